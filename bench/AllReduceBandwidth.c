/*===- AllReduceBandwidth.c - all_reduce bandwidth, after nccl-tests -----===*/
/*
 * Workload: an in-place f32 sum all_reduce over all ranks, for buffer sizes
 * from 1 MiB to 256 MiB in powers of two. For each size it times, in the
 * same run, the runtime's braid_rt_all_reduce_sum_f32, raw MPI_Allreduce,
 * and a memcpy of the same size on every rank at once, and reports
 * algorithm bandwidth (bytes / time), bus bandwidth (algbw * 2(n-1)/n, the
 * per-link traffic of a ring all_reduce) and two ratios: runtime over MPI
 * (the overhead of the runtime's non-blocking calls and timeout polling)
 * and runtime busbw over memcpy bandwidth (how close a shared-memory
 * all_reduce gets to what the memory system can move).
 *
 *   mpirun -n 2 braid-bench-all-reduce [--min-bytes B] [--max-bytes B]
 *                                      [--iters N] [--warmup N] [--csv]
 *
 * Times are the slowest rank's mean per iteration. Each size is first
 * checked once (every rank contributes 1, the sum must be n everywhere);
 * the "wrong" column counts elements that were not.
 */

#include "braid/rt/collectives.h"
#include "braid/rt/trace.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  size_t min_bytes, max_bytes;
  int iters, warmup, csv;
} options_t;

static int parse_options(int argc, char **argv, options_t *opts) {
  opts->min_bytes = (size_t)1 << 20;
  opts->max_bytes = (size_t)256 << 20;
  opts->iters = 20;
  opts->warmup = 3;
  opts->csv = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--csv") == 0)
      opts->csv = 1;
    else if (strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc)
      opts->min_bytes = strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
      opts->max_bytes = strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      opts->iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
      opts->warmup = atoi(argv[++i]);
    else
      return 0;
  }
  return opts->iters > 0 && opts->warmup >= 0 && opts->min_bytes >= 4 &&
         opts->min_bytes <= opts->max_bytes;
}

typedef enum { RUNTIME, RAW_MPI, MEMCPY } method_t;

/* Runs `method` `reps` times; returns 0 on success. */
static int run(method_t method, braid_rt_comm_t *world, float *buf,
               float *copy, size_t count, int reps) {
  for (int r = 0; r < reps; ++r) {
    if (method == RUNTIME) {
      if (braid_rt_all_reduce_sum_f32(world, buf, count, NULL) != BRAID_RT_OK)
        return 1;
    } else if (method == RAW_MPI) {
      if (MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    } else {
      memcpy(copy, buf, count * sizeof(float));
    }
  }
  return 0;
}

/* The slowest rank's mean seconds per run of `method`, or -1 on failure. */
static double time_method(method_t method, braid_rt_comm_t *world, float *buf,
                          float *copy, size_t count, const options_t *opts) {
  if (run(method, world, buf, copy, count, opts->warmup))
    return -1;
  MPI_Barrier(MPI_COMM_WORLD);
  double start = braid_rt_now_seconds();
  if (run(method, world, buf, copy, count, opts->iters))
    return -1;
  double mine = (braid_rt_now_seconds() - start) / opts->iters, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

int main(int argc, char **argv) {
  braid_rt_context_t *ctx = NULL;
  if (braid_rt_context_create(NULL, &argc, &argv, &ctx) != BRAID_RT_OK) {
    fprintf(stderr, "error: %s\n", braid_rt_context_last_error(NULL));
    return 1;
  }
  int rank = braid_rt_context_rank(ctx), n = braid_rt_context_size(ctx);
  options_t opts;
  if (!parse_options(argc, argv, &opts)) {
    if (rank == 0)
      fprintf(stderr, "usage: braid-bench-all-reduce [--min-bytes B] "
                      "[--max-bytes B] [--iters N] [--warmup N] [--csv]\n");
    braid_rt_context_destroy(ctx);
    return 2;
  }
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  size_t max_count = opts.max_bytes / sizeof(float);
  float *buf = malloc(max_count * sizeof(float));
  float *copy = malloc(max_count * sizeof(float));
  if (!buf || !copy) {
    fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank,
            opts.max_bytes);
    braid_rt_context_abort(ctx, 1);
  }

  double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  if (rank == 0) {
    printf("# all_reduce f32 sum in place, %d ranks, %d iterations after %d "
           "warm-up; GB/s = 1e9 bytes/s\n",
           n, opts.iters, opts.warmup);
    if (opts.csv)
      printf("bytes,count,rt_us,rt_algbw,rt_busbw,mpi_us,mpi_algbw,mpi_busbw,"
             "rt_over_mpi,memcpy_gbs,busbw_over_memcpy,wrong\n");
    else
      printf("%12s %10s %10s %9s %9s %10s %9s %9s %7s %9s %8s %6s\n", "bytes",
             "count", "rt us", "rt algbw", "rt busbw", "mpi us", "mpi algbw",
             "mpi busbw", "rt/mpi", "memcpy", "bus/mem", "wrong");
  }

  int failed = 0;
  for (size_t bytes = opts.min_bytes; bytes <= opts.max_bytes && !failed;
       bytes *= 2) {
    size_t count = bytes / sizeof(float);
    /* Check once, then time with zeros, which stay zeros however often
       they are summed. */
    for (size_t i = 0; i < count; ++i)
      buf[i] = 1.0f;
    long wrong = 0, total_wrong = 0;
    if (braid_rt_all_reduce_sum_f32(world, buf, count, NULL) != BRAID_RT_OK) {
      fprintf(stderr, "rank %d: %s\n", rank, braid_rt_context_last_error(ctx));
      braid_rt_context_abort(ctx, 1);
    }
    for (size_t i = 0; i < count; ++i)
      wrong += buf[i] != (float)n;
    MPI_Allreduce(&wrong, &total_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    memset(buf, 0, bytes);

    double rt = time_method(RUNTIME, world, buf, copy, count, &opts);
    double mpi = time_method(RAW_MPI, world, buf, copy, count, &opts);
    double mem = time_method(MEMCPY, world, buf, copy, count, &opts);
    if (rt < 0 || mpi < 0) {
      fprintf(stderr, "rank %d: all_reduce failed: %s\n", rank,
              braid_rt_context_last_error(ctx));
      braid_rt_context_abort(ctx, 1);
    }
    failed = total_wrong != 0;
    if (rank != 0)
      continue;
    double rt_alg = bytes / rt / 1e9, mpi_alg = bytes / mpi / 1e9;
    double mem_bw = bytes / mem / 1e9;
    printf(opts.csv ? "%zu,%zu,%.1f,%.3f,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,"
                      "%ld\n"
                    : "%12zu %10zu %10.1f %9.3f %9.3f %10.1f %9.3f %9.3f "
                      "%7.3f %9.3f %8.3f %6ld\n",
           bytes, count, rt * 1e6, rt_alg, rt_alg * bus_factor, mpi * 1e6,
           mpi_alg, mpi_alg * bus_factor, mpi / rt, mem_bw,
           rt_alg * bus_factor / mem_bw, total_wrong);
    fflush(stdout);
  }
  free(buf);
  free(copy);
  braid_rt_context_destroy(ctx);
  return failed;
}

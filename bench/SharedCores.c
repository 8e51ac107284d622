/*===- SharedCores.c - What ranks sharing cores cost, beyond their share ---===*/
/*
 * Two probes of a machine running more ranks than it has cores, through the
 * runtime's own waits (MPI_Test with sched_yield between polls) and its
 * matmul kernel, each against a baseline timed in the same run:
 *
 * placement: the first --computing ranks multiply (--gemms products of
 *   128 x 128 matrices) while the others wait in a receive that completes
 *   when the computing ranks are done. Baseline: one rank computing the same
 *   alone while the others wait. A waiting rank that yields stays runnable,
 *   so Linux's load balancer counts it as load: two computing ranks may
 *   share one core while the waiting ones hold the other. Each repetition
 *   prints the slowest computing rank's time over the baseline (1: each had
 *   a core; 2: two shared one throughout).
 *
 * after-compute: an all_reduce of --bytes over all ranks after each round
 *   of --round-gemms products, against the same rounds without it (their
 *   difference per round: what the collective costs in a step), and against
 *   the same all_reduce timed back to back (as braid-plan --calibrate times
 *   the links). Prints both per collective and their ratio.
 *
 *   braid-run -n 4 --threads 1 braid-bench-shared-cores [--computing K]
 *     [--gemms G] [--repeats R] [--bytes B] [--round-gemms G] [--rounds N]
 *
 * Times are the slowest rank's. docs/planner.md ("Ranks sharing cores")
 * has the measurements.
 */

#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/kernels.h"
#include "braid/rt/trace.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  int computing, gemms, repeats, round_gemms, rounds;
  size_t bytes;
} options_t;

static int parse_options(int argc, char **argv, int quiet, options_t *o) {
  *o = (options_t){2, 2000, 6, 96, 40, 1268000};
  for (int i = 1; i < argc; ++i) {
    const char *f = argv[i];
    if (i + 1 >= argc) {
      if (!quiet)
        fprintf(stderr, "braid-bench-shared-cores: unknown option or "
                        "missing value: %s\n", f);
      return 1;
    }
    long v = strtol(argv[++i], NULL, 10);
    if (v < 1) {
      if (!quiet)
        fprintf(stderr, "braid-bench-shared-cores: %s must be positive\n",
                f);
      return 1;
    }
    if (strcmp(f, "--computing") == 0)
      o->computing = (int)v;
    else if (strcmp(f, "--gemms") == 0)
      o->gemms = (int)v;
    else if (strcmp(f, "--repeats") == 0)
      o->repeats = (int)v;
    else if (strcmp(f, "--bytes") == 0)
      o->bytes = (size_t)v;
    else if (strcmp(f, "--round-gemms") == 0)
      o->round_gemms = (int)v;
    else if (strcmp(f, "--rounds") == 0)
      o->rounds = (int)v;
    else {
      if (!quiet)
        fprintf(stderr, "braid-bench-shared-cores: unknown option %s\n", f);
      return 1;
    }
  }
  return 0;
}

enum { kN = 128 };
static float ga[kN * kN], gb[kN * kN], gc[kN * kN];

static void multiply(int gemms) {
  const int64_t shape[2] = {kN, kN};
  for (int i = 0; i < gemms; ++i)
    braid_rt_matmul_f32(NULL, ga, gb, 2, shape, 2, shape, 0, 0, gc);
}

/* The slowest rank's `seconds`. */
static double slowest(double seconds) {
  double out = 0;
  MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

/* Ranks below `computing` multiply; the others wait for rank r % computing,
   which sends when it is done. The slowest computing rank's time. */
static int computing_phase(braid_rt_comm_t *world, int rank, int size,
                           int computing, int gemms, double *out) {
  float token = 0;
  braid_rt_barrier(world, NULL);
  double t0 = braid_rt_now_seconds(), mine = 0;
  if (rank < computing) {
    multiply(gemms);
    mine = braid_rt_now_seconds() - t0;
    for (int peer = computing; peer < size; ++peer)
      if (peer % computing == rank &&
          braid_rt_send_f32(world, &token, 1, peer, 3, NULL) != BRAID_RT_OK)
        return 1;
  } else if (braid_rt_recv_f32(world, &token, 1, rank % computing, 3, NULL) !=
             BRAID_RT_OK) {
    return 1;
  }
  *out = slowest(mine);
  return 0;
}

static double rounds_time(braid_rt_comm_t *world, float *buf, size_t count,
                          int gemms, int rounds, int sync, int *status) {
  braid_rt_barrier(world, NULL);
  double t0 = braid_rt_now_seconds();
  for (int i = 0; i < rounds && !*status; ++i) {
    multiply(gemms);
    if (sync)
      *status |= braid_rt_all_reduce_sum_f32(world, buf, count, NULL) !=
                 BRAID_RT_OK;
  }
  braid_rt_barrier(world, NULL);
  return slowest(braid_rt_now_seconds() - t0);
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  options_t o;
  braid_rt_context_t *ctx = NULL;
  if (braid_rt_context_create(NULL, &argc, &argv, &ctx) != BRAID_RT_OK) {
    fprintf(stderr, "braid-bench-shared-cores: %s\n",
            braid_rt_context_last_error(NULL));
    return 1;
  }
  int rank = braid_rt_context_rank(ctx), size = braid_rt_context_size(ctx);
  if (parse_options(argc, argv, rank != 0, &o)) {
    braid_rt_context_destroy(ctx);
    return 1;
  }
  if (o.computing > size) {
    if (rank == 0)
      fprintf(stderr, "braid-bench-shared-cores: --computing %d exceeds the "
                      "%d ranks\n", o.computing, size);
    braid_rt_context_destroy(ctx);
    return 1;
  }
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  for (int i = 0; i < kN * kN; ++i) {
    ga[i] = 0.5f;
    gb[i] = 0.25f;
  }
  int status = 0;

  /* placement */
  double alone = 0;
  multiply(o.gemms / 10); /* warm-up */
  status |= computing_phase(world, rank, size, 1, o.gemms, &alone);
  if (rank == 0)
    printf("placement: %d ranks, %d computing %d products of %dx%d each; "
           "one computing alone: %.1f ms\n",
           size, o.computing, o.gemms, kN, kN, alone * 1e3);
  /* The computing ranks' fair share of the cores: each its own core while
     they do not outnumber them. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double fair = cores > 0 && o.computing > cores ? (double)o.computing / cores
                                                 : 1.0;
  int shared = 0;
  for (int r = 0; r < o.repeats && !status; ++r) {
    double t = 0;
    status |= computing_phase(world, rank, size, o.computing, o.gemms, &t);
    shared += t / alone > 1.5 * fair;
    if (rank == 0)
      printf("  repeat %d: slowest computing rank %.1f ms, %.2fx alone\n", r,
             t * 1e3, t / alone);
  }
  if (rank == 0 && !status)
    printf("  %d of %d repeats at more than 1.5x the fair share (%.2fx alone: "
           "%d computing on %ld cores)\n",
           shared, o.repeats, fair, o.computing, cores);

  /* after-compute */
  size_t count = o.bytes / sizeof(float);
  float *buf = calloc(count ? count : 1, sizeof(float));
  double back[9], in_step[9];
  for (int r = 0; r < 9 && !status; ++r) {
    braid_rt_barrier(world, NULL);
    double t0 = braid_rt_now_seconds();
    for (int i = 0; i < o.rounds && !status; ++i)
      status |= braid_rt_all_reduce_sum_f32(world, buf, count, NULL) !=
                BRAID_RT_OK;
    back[r] = slowest(braid_rt_now_seconds() - t0) / o.rounds;
    /* Alternate the order so that a drift of the machine falls on both. */
    double with, without;
    if (r % 2) {
      with = rounds_time(world, buf, count, o.round_gemms, o.rounds, 1, &status);
      without =
          rounds_time(world, buf, count, o.round_gemms, o.rounds, 0, &status);
    } else {
      without =
          rounds_time(world, buf, count, o.round_gemms, o.rounds, 0, &status);
      with = rounds_time(world, buf, count, o.round_gemms, o.rounds, 1, &status);
    }
    in_step[r] = (with - without) / o.rounds;
  }
  if (rank == 0 && !status) {
    qsort(back, 9, sizeof(double), compare);
    qsort(in_step, 9, sizeof(double), compare);
    printf("after-compute: all_reduce of %zu bytes over %d ranks, after "
           "rounds of %d products: %.3f ms (quartiles %.3f-%.3f); back to "
           "back: %.3f ms (quartiles %.3f-%.3f); %.2fx\n",
           count * sizeof(float), size, o.round_gemms, in_step[4] * 1e3,
           in_step[2] * 1e3, in_step[6] * 1e3, back[4] * 1e3, back[2] * 1e3,
           back[6] * 1e3, in_step[4] / back[4]);
  }
  free(buf);
  if (status && rank == 0)
    fprintf(stderr, "braid-bench-shared-cores: %s\n",
            braid_rt_context_last_error(ctx));
  braid_rt_context_destroy(ctx);
  return status;
}

/*===- ring_cpu_test.c - The CUDA backend's ring against the CPU's -------===*/
/*
 * Run under mpirun on 2 or more ranks, with the CPU backend: every rank
 * runs the CPU backend's bf16 / fp16 all_reduce and reduce_scatter
 * (runtime/src/cpu/compressed.c, over MPI) and simulates the whole group
 * with the CUDA backend's schedule and rounding (ring_reference.h: host.h's
 * braid_rt_cuda_ring_*, half.h), and requires its own result to be the
 * same bits. Inputs have full 24-bit mantissas over 16 binades, so that
 * every hop rounds; chunk sizes include uneven and empty ones. Prints
 * "ring: N checks passed on R ranks".
 */

#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/mesh.h"

#include "ring_reference.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static braid_rt_context_t *ctx;
static long checks;

static void fail(const char *what) {
  fprintf(stderr, "rank %d: FAIL: %s: %s\n", braid_rt_context_rank(ctx), what,
          braid_rt_context_last_error(ctx));
  braid_rt_context_abort(ctx, 1);
}

/* A float of 24 random mantissa bits, magnitude 2^-8 .. 2^8, from
   (rank, index, salt). */
static float rough(int rank, size_t index, unsigned salt) {
  uint64_t h = (uint64_t)rank * 0x9E3779B97F4A7C15ull ^
               (uint64_t)index * 0xC2B2AE3D27D4EB4Full ^
               (uint64_t)salt * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  float unit = (float)(h >> 40) / 16777216.0f * 2.0f - 1.0f;
  return ldexpf(unit, (int)((h >> 8) % 16) - 8);
}

static float **alloc_ranks(int size, size_t n) {
  float **a = calloc((size_t)size, sizeof(*a));
  if (!a)
    fail("out of memory");
  for (int r = 0; r < size; ++r)
    if (!(a[r] = malloc((n ? n : 1) * sizeof(float))))
      fail("out of memory");
  return a;
}

static void free_ranks(float **a, int size) {
  for (int r = 0; r < size; ++r)
    free(a[r]);
  free(a);
}

/* Requires got[0..n) to be want's bits; returns how many elements differ
   from `exact` (the f32 sum in rank order), to show that rounding showed. */
static size_t compare(const char *what, const float *got, const float *want,
                      const float *exact, size_t n) {
  size_t rounded = 0;
  for (size_t i = 0; i < n; ++i) {
    ++checks;
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      fprintf(stderr,
              "rank %d: FAIL: %s: element %zu of %zu is %.9g (CPU backend), "
              "the CUDA backend's ring gives %.9g\n",
              braid_rt_context_rank(ctx), what, i, n, got[i], want[i]);
      braid_rt_context_abort(ctx, 1);
    }
    rounded += got[i] != exact[i];
  }
  return rounded;
}

static size_t check_all_reduce(braid_rt_comm_t *world, size_t count,
                               int format) {
  int size = braid_rt_comm_size(world), me = braid_rt_comm_rank(world);
  float **acc = alloc_ranks(size, count);
  float *mine = malloc((count ? count : 1) * sizeof(float));
  float *exact = calloc(count ? count : 1, sizeof(float));
  if (!mine || !exact)
    fail("out of memory");
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < count; ++i) {
      acc[r][i] = rough(r, i, (unsigned)count);
      exact[i] += acc[r][i];
    }
  memcpy(mine, acc[me], count * sizeof(float));
  if (ring_reference_all_reduce(size, count, format, acc) != 0)
    fail("out of memory");
  braid_rt_status_t s =
      format ? braid_rt_all_reduce_sum_f32_as_f16(world, mine, count, NULL)
             : braid_rt_all_reduce_sum_f32_as_bf16(world, mine, count, NULL);
  if (s != BRAID_RT_OK)
    fail("all_reduce (16-bit)");
  size_t rounded = compare(format ? "all_reduce f16" : "all_reduce bf16", mine,
                           acc[me], exact, count);
  free_ranks(acc, size);
  free(mine);
  free(exact);
  return rounded;
}

static size_t check_reduce_scatter(braid_rt_comm_t *world, size_t block,
                                   int format) {
  int size = braid_rt_comm_size(world), me = braid_rt_comm_rank(world);
  size_t count = (size_t)size * block;
  float **acc = alloc_ranks(size, count);
  float *send = malloc((count ? count : 1) * sizeof(float));
  float *recv = malloc((block ? block : 1) * sizeof(float));
  float *exact = calloc(count ? count : 1, sizeof(float));
  if (!send || !recv || !exact)
    fail("out of memory");
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < count; ++i) {
      acc[r][i] = rough(r, i, (unsigned)block + 7);
      exact[i] += acc[r][i];
    }
  memcpy(send, acc[me], count * sizeof(float));
  if (ring_reference_reduce_scatter(size, block, format, acc) != 0)
    fail("out of memory");
  braid_rt_status_t s = format ? braid_rt_reduce_scatter_sum_f32_as_f16(
                                     world, send, recv, block, NULL)
                               : braid_rt_reduce_scatter_sum_f32_as_bf16(
                                     world, send, recv, block, NULL);
  if (s != BRAID_RT_OK)
    fail("reduce_scatter (16-bit)");
  size_t rounded =
      compare(format ? "reduce_scatter f16" : "reduce_scatter bf16", recv,
              acc[me] + (size_t)me * block, exact + (size_t)me * block, block);
  free_ranks(acc, size);
  free(send);
  free(recv);
  free(exact);
  return rounded;
}

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  if (braid_rt_context_create(&opts, &argc, &argv, &ctx) != BRAID_RT_OK) {
    fprintf(stderr, "FAIL: braid_rt_context_create: %s\n",
            braid_rt_context_last_error(NULL));
    return 1;
  }
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  static const size_t counts[] = {0, 1, 2, 3, 5, 7, 1000, 1001, 4099};
  static const size_t blocks[] = {0, 1, 3, 500, 1025};
  size_t rounded = 0;
  for (int format = 0; format < 2; ++format) {
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i)
      rounded += check_all_reduce(world, counts[i], format);
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); ++i)
      rounded += check_reduce_scatter(world, blocks[i], format);
  }
  /* The inputs made the 16-bit rounding show: a ring that sent f32 would
     have passed too otherwise. */
  if (braid_rt_comm_size(world) > 1 && rounded == 0)
    fail("no result differs from the exact f32 sum: the inputs do not test "
         "the rounding");
  if (braid_rt_context_rank(ctx) == 0)
    printf("ring: %ld checks passed on %d ranks\n", checks,
           braid_rt_comm_size(world));
  braid_rt_context_destroy(ctx);
  return 0;
}

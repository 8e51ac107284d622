/*===- ring_reference.h - The compressed ring, simulated on the host -----===*/
/*
 * What the compressed collectives of collectives.h compute on every rank of
 * a group of `size`, simulated in one process: the ring of host.h's
 * schedule with half.h's rounding and one f32 add per hop, as the CUDA
 * backend runs it on the device (compressed.c). ring_cpu_test.c checks it
 * against the CPU backend's own ring under MPI; comm_test.c checks the CUDA
 * backend against it. For tests only.
 */
#ifndef BRAID_RT_CUDA_COMM_TEST_RING_REFERENCE_H
#define BRAID_RT_CUDA_COMM_TEST_RING_REFERENCE_H

#include "half.h"
#include "host.h"

#include <stdint.h>
#include <stdlib.h>

/* One half of the ring over every rank's `count` values acc[r], in place:
   the reduce-scatter half (gather 0) or the all_gather half (gather 1).
   Returns 0, or -1 when out of memory. */
static int ring_reference_half(int size, size_t count, int format, float **acc,
                               int gather) {
  uint16_t **msg = calloc((size_t)size, sizeof(*msg));
  if (!msg)
    return -1;
  size_t most = braid_rt_cuda_ring_chunk_length(count, size, 0);
  int failed = 0;
  for (int r = 0; r < size; ++r)
    failed |= !(msg[r] = malloc((most ? most : 1) * sizeof(uint16_t)));
  for (int s = 0; !failed && s + 1 < size; ++s) {
    /* Every rank sends, then every rank receives its predecessor's. */
    for (int r = 0; r < size; ++r) {
      int out, in;
      braid_rt_cuda_ring_step(size, r, s, gather, &out, &in);
      const float *from =
          acc[r] + braid_rt_cuda_ring_chunk_begin(count, size, out);
      for (size_t i = 0, n = braid_rt_cuda_ring_chunk_length(count, size, out);
           i < n; ++i)
        msg[r][i] = braid_rt_half_narrow(format, from[i]);
    }
    for (int r = 0; r < size; ++r) {
      int out, in;
      braid_rt_cuda_ring_step(size, r, s, gather, &out, &in);
      const uint16_t *got = msg[(r + size - 1) % size];
      float *to = acc[r] + braid_rt_cuda_ring_chunk_begin(count, size, in);
      for (size_t i = 0, n = braid_rt_cuda_ring_chunk_length(count, size, in);
           i < n; ++i)
        to[i] = gather ? braid_rt_half_widen(format, got[i])
                       : braid_rt_half_widen(format, got[i]) + to[i];
    }
  }
  for (int r = 0; r < size; ++r)
    free(msg[r]);
  free(msg);
  return failed ? -1 : 0;
}

/* all_reduce (16-bit): every acc[r] becomes the sum every rank gets. A
   group of one is left as it is. */
static int ring_reference_all_reduce(int size, size_t count, int format,
                                     float **acc) {
  if (size == 1 || count == 0)
    return 0;
  if (ring_reference_half(size, count, format, acc, 0) != 0)
    return -1;
  for (int r = 0; r < size; ++r) {
    float *own = acc[r] + braid_rt_cuda_ring_chunk_begin(count, size, r);
    for (size_t i = 0, n = braid_rt_cuda_ring_chunk_length(count, size, r);
         i < n; ++i)
      own[i] =
          braid_rt_half_widen(format, braid_rt_half_narrow(format, own[i]));
  }
  return ring_reference_half(size, count, format, acc, 1);
}

/* reduce_scatter (16-bit) of size * block values per rank: rank r's result
   is acc[r][r * block, (r + 1) * block). */
static int ring_reference_reduce_scatter(int size, size_t block, int format,
                                         float **acc) {
  if (size == 1 || block == 0)
    return 0;
  return ring_reference_half(size, (size_t)size * block, format, acc, 0);
}

#endif /* BRAID_RT_CUDA_COMM_TEST_RING_REFERENCE_H */

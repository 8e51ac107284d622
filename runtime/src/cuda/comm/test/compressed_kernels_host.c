/*===- compressed_kernels_host.c - compressed_kernels.cu on the host -----===*/
/*
 * The compressed collectives' kernels (internal.h) for the fake device:
 * the same per-element functions as compressed_kernels.cu (half.h's
 * conversions, one f32 add), run at once on the host. Like the fake's
 * copies, a kernel handed host memory ends the process naming it: on a GPU
 * it would fault.
 */

#include "internal.h"

#include "half.h"

#include <stdio.h>
#include <stdlib.h>

static void check_device(const void *p, size_t n, const char *kernel) {
  struct cudaPointerAttributes attributes;
  if (n == 0)
    return;
  cudaPointerGetAttributes(&attributes, p);
  if (attributes.type != cudaMemoryTypeDevice) {
    fprintf(stderr,
            "fake device: %s: a pointer is host memory, not device "
            "memory\n",
            kernel);
    fflush(NULL);
    abort();
  }
}

cudaError_t braid_rt_cuda_narrow(const float *in, uint16_t *out, size_t n,
                                 int format, cudaStream_t stream) {
  (void)stream;
  check_device(in, n, "braid_rt_cuda_narrow");
  check_device(out, n, "braid_rt_cuda_narrow");
  for (size_t i = 0; i < n; ++i)
    out[i] = braid_rt_half_narrow(format, in[i]);
  return cudaSuccess;
}

cudaError_t braid_rt_cuda_widen_add(const uint16_t *in, float *acc, size_t n,
                                    int format, cudaStream_t stream) {
  (void)stream;
  check_device(in, n, "braid_rt_cuda_widen_add");
  check_device(acc, n, "braid_rt_cuda_widen_add");
  for (size_t i = 0; i < n; ++i)
    acc[i] = braid_rt_half_widen(format, in[i]) + acc[i];
  return cudaSuccess;
}

cudaError_t braid_rt_cuda_widen(const uint16_t *in, float *out, size_t n,
                                int format, cudaStream_t stream) {
  (void)stream;
  check_device(in, n, "braid_rt_cuda_widen");
  check_device(out, n, "braid_rt_cuda_widen");
  for (size_t i = 0; i < n; ++i)
    out[i] = braid_rt_half_widen(format, in[i]);
  return cudaSuccess;
}

cudaError_t braid_rt_cuda_round_trip(float *x, size_t n, int format,
                                     cudaStream_t stream) {
  (void)stream;
  check_device(x, n, "braid_rt_cuda_round_trip");
  for (size_t i = 0; i < n; ++i)
    x[i] = braid_rt_half_widen(format, braid_rt_half_narrow(format, x[i]));
  return cudaSuccess;
}

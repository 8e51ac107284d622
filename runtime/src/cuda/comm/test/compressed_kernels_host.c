/*===- compressed_kernels_host.c - Compressed sums' kernels on the host ---===*/
/*
 * The compressed collectives' kernels (internal.h) for the fake device:
 * the same per-element functions as compressed_kernels.cu (half.h's
 * conversions, one f32 add) and powersgd_kernels.cu (powersgd_math.h, the
 * orthonormalisation in its block's order), run at once on the host. Like the
 * fake's copies, a kernel handed host memory ends the process naming it: on a
 * GPU it would fault.
 */

#include "internal.h"

#include "half.h"
#include "powersgd_math.h"

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

cudaError_t braid_rt_cuda_powersgd_m(const float *grad, const float *error,
                                     float *m, size_t n, cudaStream_t stream) {
  (void)stream;
  check_device(grad, n, "braid_rt_cuda_powersgd_m");
  if (error)
    check_device(error, n, "braid_rt_cuda_powersgd_m");
  check_device(m, n, "braid_rt_cuda_powersgd_m");
  for (size_t i = 0; i < n; ++i)
    m[i] = braid_rt_psgd_m(grad, error, i);
  return cudaSuccess;
}

cudaError_t braid_rt_cuda_powersgd_orthonormalise(float *p, size_t rows,
                                                  size_t rank,
                                                  cudaStream_t stream) {
  (void)stream;
  check_device(p, rows * rank, "braid_rt_cuda_powersgd_orthonormalise");
  double partial[BRAID_RT_PSGD_GS_THREADS];
  braid_rt_psgd_orthonormalise_as_device(p, rows, rank, partial,
                                         BRAID_RT_PSGD_GS_THREADS);
  return cudaSuccess;
}

cudaError_t braid_rt_cuda_powersgd_finish(const float *m, const float *p,
                                          const float *q, float *grad,
                                          float *error, size_t rows,
                                          size_t cols, size_t rank, int size,
                                          cudaStream_t stream) {
  (void)stream;
  size_t n = rows * cols;
  check_device(m, n, "braid_rt_cuda_powersgd_finish");
  check_device(p, rows * rank, "braid_rt_cuda_powersgd_finish");
  check_device(q, cols * rank, "braid_rt_cuda_powersgd_finish");
  check_device(grad, n, "braid_rt_cuda_powersgd_finish");
  if (error)
    check_device(error, n, "braid_rt_cuda_powersgd_finish");
  double share = 1.0 / size;
  for (size_t i = 0; i < n; ++i) {
    float mi = m[i];
    double approx = braid_rt_psgd_approx(p, q, i / cols, i % cols, rank);
    grad[i] = (float)approx;
    if (error)
      error[i] = braid_rt_psgd_error(mi, approx, share);
  }
  return cudaSuccess;
}

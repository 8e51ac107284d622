/*===- cuda.h - What the CUDA backend adds to the runtime API ------------===*/
/*
 * The CUDA backend (library braid_rt_cuda) implements context.h, mesh.h,
 * collectives.h and trace.h like the CPU backend; this header is for code
 * that is CUDA-only: the backend's kernels and generated CUDA programs, which
 * launch their own work and so need the cudaStream_t behind a
 * braid_rt_stream_t. Include it only from code compiled against CUDA.
 */
#ifndef BRAID_RT_CUDA_H
#define BRAID_RT_CUDA_H

#include "braid/rt/context.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* On this backend a braid_rt_stream_t begins with its CUDA stream; the
   context's private members follow. Library braid_rt_cuda_stream (cudart
   only, no NCCL or MPI) implements the two functions below, so that the
   kernels and their tests need no context. */

/* The CUDA stream behind `stream`. NULL names the default stream: the
   compute stream of the process's live context, or CUDA's legacy default
   stream (0) when no context exists (kernel unit tests). Infallible;
   thread-safe. */
cudaStream_t braid_rt_cuda_stream(braid_rt_stream_t *stream);

/* Makes `stream` the one NULL names. braid_rt_context_create sets its
   compute stream, braid_rt_context_destroy sets 0 again. */
void braid_rt_cuda_set_default_stream(cudaStream_t stream);

/* The device the context bound this rank to, and the local rank it chose it
   by. Infallible. */
int braid_rt_cuda_device(const braid_rt_context_t *ctx);
int braid_rt_cuda_local_rank(const braid_rt_context_t *ctx);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_CUDA_H */

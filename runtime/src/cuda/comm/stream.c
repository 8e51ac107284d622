/*===- stream.c - The CUDA stream behind a braid_rt_stream_t -------------===*/
/*
 * Alone in library braid_rt_cuda_stream, which needs nothing but cudart:
 * the kernels call braid_rt_cuda_stream without a context (their unit tests
 * have none) and the context, in braid_rt_cuda, sets the default.
 */

#include "braid/rt/cuda.h"

#include <stdatomic.h>

/* The first member of every CUDA braid_rt_stream (internal.h). */
typedef struct {
  cudaStream_t stream;
} stream_head_t;

static _Atomic(cudaStream_t) default_stream;

cudaStream_t braid_rt_cuda_stream(braid_rt_stream_t *stream) {
  if (stream)
    return ((const stream_head_t *)stream)->stream;
  return atomic_load(&default_stream);
}

void braid_rt_cuda_set_default_stream(cudaStream_t stream) {
  atomic_store(&default_stream, stream);
}

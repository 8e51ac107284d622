//===- memory.cu - Device memory on the CUDA backend ----------------------===//
//
// Buffers come from cudaMalloc (256-byte aligned, above the 64 that
// memory.h promises); allocation and release synchronise the device, so
// programs allocate up front. Copies are cudaMemcpyAsync on the stream.
//
//===----------------------------------------------------------------------===//

#include "braid/rt/cuda.h"
#include "braid/rt/memory.h"

#include <cuda_runtime.h>

braid_rt_status_t braid_rt_memory_alloc(size_t bytes, void **out_ptr) {
  if (!out_ptr)
    return BRAID_RT_INVALID_ARGUMENT;
  *out_ptr = nullptr;
  cudaError_t error = cudaMalloc(out_ptr, bytes ? bytes : 1);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    *out_ptr = nullptr;
    // No device or driver is not a lack of memory.
    return error == cudaErrorMemoryAllocation ? BRAID_RT_OUT_OF_MEMORY
                                              : BRAID_RT_UNSUPPORTED;
  }
  return BRAID_RT_OK;
}

void braid_rt_memory_free(void *ptr) {
  if (ptr)
    (void)cudaFree(ptr);
}

static braid_rt_status_t copy(braid_rt_stream_t *stream, void *dst,
                              const void *src, size_t bytes,
                              cudaMemcpyKind kind) {
  if (bytes && (!dst || !src))
    return BRAID_RT_INVALID_ARGUMENT;
  if (!bytes || dst == src)
    return BRAID_RT_OK;
  if (cudaMemcpyAsync(dst, src, bytes, kind, braid_rt_cuda_stream(stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    return BRAID_RT_INTERNAL;
  }
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_memory_copy_to_device(braid_rt_stream_t *stream,
                                                 void *device_dst,
                                                 const void *host_src,
                                                 size_t bytes) {
  return copy(stream, device_dst, host_src, bytes, cudaMemcpyHostToDevice);
}

braid_rt_status_t braid_rt_memory_copy_to_host(braid_rt_stream_t *stream,
                                               void *host_dst,
                                               const void *device_src,
                                               size_t bytes) {
  return copy(stream, host_dst, device_src, bytes, cudaMemcpyDeviceToHost);
}

braid_rt_status_t braid_rt_memory_copy(braid_rt_stream_t *stream, void *dst,
                                       const void *src, size_t bytes) {
  return copy(stream, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

braid_rt_status_t braid_rt_memory_synchronize(braid_rt_stream_t *stream) {
  if (cudaStreamSynchronize(braid_rt_cuda_stream(stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    return BRAID_RT_INTERNAL;
  }
  return BRAID_RT_OK;
}

int braid_rt_memory_is_host(void) { return 0; }

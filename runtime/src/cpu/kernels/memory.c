/*===- memory.c - Device memory on the CPU backend: host memory ----------===*/

#include "braid/rt/memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

braid_rt_status_t braid_rt_memory_alloc(size_t bytes, void **out_ptr) {
  if (!out_ptr)
    return BRAID_RT_INVALID_ARGUMENT;
  *out_ptr = NULL;
  /* aligned_alloc wants a nonzero multiple of the alignment. */
  const size_t align = BRAID_RT_MEMORY_ALIGNMENT;
  if (bytes > SIZE_MAX - align)
    return BRAID_RT_OUT_OF_MEMORY;
  *out_ptr =
      aligned_alloc(align, bytes ? (bytes + align - 1) / align * align : align);
  return *out_ptr ? BRAID_RT_OK : BRAID_RT_OUT_OF_MEMORY;
}

void braid_rt_memory_free(void *ptr) { free(ptr); }

static braid_rt_status_t copy(void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return BRAID_RT_INVALID_ARGUMENT;
  if (dst != src && bytes)
    memcpy(dst, src, bytes);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_memory_copy_to_device(braid_rt_stream_t *stream,
                                                 void *device_dst,
                                                 const void *host_src,
                                                 size_t bytes) {
  (void)stream; /* the CPU backend runs every call on the calling thread */
  return copy(device_dst, host_src, bytes);
}

braid_rt_status_t braid_rt_memory_copy_to_host(braid_rt_stream_t *stream,
                                               void *host_dst,
                                               const void *device_src,
                                               size_t bytes) {
  (void)stream;
  return copy(host_dst, device_src, bytes);
}

braid_rt_status_t braid_rt_memory_copy(braid_rt_stream_t *stream, void *dst,
                                       const void *src, size_t bytes) {
  (void)stream;
  return copy(dst, src, bytes);
}

braid_rt_status_t braid_rt_memory_synchronize(braid_rt_stream_t *stream) {
  (void)stream; /* every call has completed on the calling thread */
  return BRAID_RT_OK;
}

int braid_rt_memory_is_host(void) { return 1; }

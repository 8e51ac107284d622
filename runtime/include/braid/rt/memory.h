/*===- memory.h - Device memory of the Braid runtime ---------------------===*/
/*
 * Where tensors live and how they move between the host and the device.
 * Generated programs and the program runtime hold every tensor in device
 * memory and call the kernels (kernels.h) on it; they stage through host
 * memory only what leaves the program: inputs read from files, printed
 * results, checkpoints.
 *
 * On the CPU backend the device is the host: braid_rt_memory_alloc is an
 * aligned malloc, the copies are memcpy (nothing at all when source and
 * destination are the same buffer), and braid_rt_memory_is_host() is 1, so
 * that callers may use a device buffer as its own host staging buffer. On
 * the CUDA backend the copies are asynchronous on `stream` (NULL: the
 * default stream); a host buffer may be read or reused only after
 * braid_rt_memory_synchronize (or context.h's braid_rt_stream_synchronize).
 */
#ifndef BRAID_RT_MEMORY_H
#define BRAID_RT_MEMORY_H

#include "braid/rt/status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same opaque type as context.h's: work on a device is ordered by the
   stream it is issued to. NULL names the default stream. */
typedef struct braid_rt_stream braid_rt_stream_t;

/* The alignment in bytes of every buffer braid_rt_memory_alloc returns. */
#define BRAID_RT_MEMORY_ALIGNMENT 64

/* Allocates `bytes` of device memory (at least 1), aligned to
   BRAID_RT_MEMORY_ALIGNMENT and uninitialised. OUT_OF_MEMORY if it cannot,
   UNSUPPORTED when there is no usable device (no GPU or driver), leaving
   *out_ptr NULL either way. Thread-safe. */
braid_rt_status_t braid_rt_memory_alloc(size_t bytes, void **out_ptr);

/* Releases a buffer of braid_rt_memory_alloc. NULL is a no-op. */
void braid_rt_memory_free(void *ptr);

/* Copies `bytes` from host memory to device memory, from device memory to
   host memory, and within device memory. The regions must not overlap
   unless they are identical (then nothing is copied). */
braid_rt_status_t braid_rt_memory_copy_to_device(braid_rt_stream_t *stream,
                                                 void *device_dst,
                                                 const void *host_src,
                                                 size_t bytes);
braid_rt_status_t braid_rt_memory_copy_to_host(braid_rt_stream_t *stream,
                                               void *host_dst,
                                               const void *device_src,
                                               size_t bytes);
braid_rt_status_t braid_rt_memory_copy(braid_rt_stream_t *stream, void *dst,
                                       const void *src, size_t bytes);

/* Waits until everything issued to `stream` (copies and kernels) has
   finished, so that the host buffers of its copies may be read or reused.
   Needs no context: the program runtime's MPI-free part calls it. A no-op
   returning OK on the CPU backend, where every call completes before it
   returns. */
braid_rt_status_t braid_rt_memory_synchronize(braid_rt_stream_t *stream);

/* 1 when device memory is host memory (the CPU backend), so that a device
   buffer can serve as its own host staging buffer; 0 otherwise. */
int braid_rt_memory_is_host(void);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_MEMORY_H */

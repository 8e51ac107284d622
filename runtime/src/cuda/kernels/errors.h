/*===- errors.h - Errors of the CUDA kernels, reported at a poll ----------===*/
/*
 * A CUDA kernel runs after its entry point has returned, so an id or label
 * outside [0, vocab) cannot be its return value without a synchronisation
 * per call. Instead the kernel records a code in a sticky per-device flag
 * (the first error stays) and the entry point returns BRAID_RT_OK; errors
 * the host finds while enqueuing (a rank above 8, a cuBLAS or launch
 * failure, scratch that cannot be allocated by a kernel that returns void)
 * stick in a process-wide flag. braid_rt_cuda_kernels_poll synchronises a
 * stream, reads both flags (one 4-byte device-to-host copy) and clears them.
 * The context's stream synchronisation is meant to call it, so an error
 * surfaces at the end of the step that made it, not at the kernel.
 *
 * Cost: nothing per kernel beyond the comparison; one small copy per poll.
 */
#ifndef BRAID_RT_CUDA_ERRORS_H
#define BRAID_RT_CUDA_ERRORS_H

#include "braid/rt/memory.h"
#include "braid/rt/status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Waits for `stream` (NULL: the default stream), then returns and clears the
   first error recorded by the CUDA kernels since the last poll: OK when
   none; INVALID_ARGUMENT for an id or label out of range; UNSUPPORTED for a
   rank above 8; OUT_OF_MEMORY; INTERNAL for a CUDA or cuBLAS failure
   (including one that made the stream fail). When `message` is not NULL it
   receives a NUL-terminated description (at most `size` bytes) naming the
   kernel. Thread-safe. */
braid_rt_status_t braid_rt_cuda_kernels_poll(braid_rt_stream_t *stream,
                                             char *message, size_t size);

/* Records `code` (a KernelError of kernel_math.h) unless an error is already
   recorded. Thread-safe. */
void braid_rt_cuda_record_host_error(int code);

#ifdef __cplusplus
}

namespace braid_rt_cuda {
inline void recordHostError(int code) { braid_rt_cuda_record_host_error(code); }
} // namespace braid_rt_cuda
#endif

#endif /* BRAID_RT_CUDA_ERRORS_H */

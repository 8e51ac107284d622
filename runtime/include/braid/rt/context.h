/*===- context.h - Runtime context and streams ---------------------------===*/
/*
 * A context is one process's handle on the runtime: it owns the connection
 * to the other ranks (MPI on the CPU backend), the world communicator, the
 * collective timeout, the trace buffer and the last error message.
 *
 * Streams order work on a device. The CPU backend executes every call
 * synchronously on the calling thread, so a CPU stream is trivial; the type
 * exists so that code written against this API runs unchanged on the CUDA
 * backend, where a stream is a cudaStream_t. Every call that takes a
 * `braid_rt_stream_t *stream` accepts NULL for the context's default stream.
 */
#ifndef BRAID_RT_CONTEXT_H
#define BRAID_RT_CONTEXT_H

#include "braid/rt/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_rt_context braid_rt_context_t; /* opaque */
typedef struct braid_rt_stream braid_rt_stream_t;   /* opaque */

#define BRAID_RT_CONTEXT_OPTIONS_VERSION 1

typedef struct {
  /* sizeof(braid_rt_context_options_t) as the caller compiled it. */
  size_t size;
  /* BRAID_RT_CONTEXT_OPTIONS_VERSION. */
  uint32_t version;
  /* Seconds a wait on a collective or point-to-point operation may take
     before it fails with BRAID_RT_TIMEOUT; 0 waits forever. */
  double collective_timeout_s;
  /* Nonzero: record trace events (braid_rt_trace_begin/end, and each
     communication operation's wait and flight: trace.h). */
  int trace;
} braid_rt_context_options_t;

/* Fills `out_opts` with the defaults: a 300 s timeout, tracing off. */
void braid_rt_context_options_init(braid_rt_context_options_t *out_opts);

/* Creates the process's context. Initialises MPI (passing argc/argv, which
   may be NULL) unless the program already did; in that case the program
   also finalises it. Collective over all ranks. `opts` may be NULL for the
   defaults. On failure *out_ctx is NULL and the message is available from
   braid_rt_context_last_error(NULL). The caller owns *out_ctx and releases it
   with braid_rt_context_destroy. Not thread-safe; call it once, from the
   main thread. */
braid_rt_status_t braid_rt_context_create(const braid_rt_context_options_t *opts,
                                          int *argc, char ***argv,
                                          braid_rt_context_t **out_ctx);

/* Releases `ctx` and finalises MPI if the context initialised it. Every mesh
   must have been destroyed first (INVALID_ARGUMENT otherwise, and nothing is
   released). Collective over all ranks. NULL is a no-op. */
braid_rt_status_t braid_rt_context_destroy(braid_rt_context_t *ctx);

/* This process's rank in the world and the number of ranks. Infallible. */
int braid_rt_context_rank(const braid_rt_context_t *ctx);
int braid_rt_context_size(const braid_rt_context_t *ctx);

/* The collective timeout in seconds (0: none). */
double braid_rt_context_timeout(const braid_rt_context_t *ctx);

/* The message of the last failed call on `ctx`, or of the last failed
   context-less call (braid_rt_context_create) when `ctx` is NULL; "" if
   none. The string belongs to the runtime and is valid until the next
   failing call on the same context. Thread-compatible. */
const char *braid_rt_context_last_error(const braid_rt_context_t *ctx);

/* Ends every rank with `exit_code` (MPI_Abort). For a program that has
   reported an error and cannot continue: unlike exit(), it does not leave
   the other ranks waiting. Does not return. */
void braid_rt_context_abort(braid_rt_context_t *ctx, int exit_code);

/* Creates a stream on `ctx`. The caller owns *out_stream. */
braid_rt_status_t braid_rt_stream_create(braid_rt_context_t *ctx,
                                         braid_rt_stream_t **out_stream);

/* Blocks until all work issued to `stream` (NULL: the default stream) has
   completed. Immediate on the CPU backend. */
braid_rt_status_t braid_rt_stream_synchronize(braid_rt_stream_t *stream);

/* Releases `stream` after synchronising it. NULL is a no-op. */
braid_rt_status_t braid_rt_stream_destroy(braid_rt_stream_t *stream);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_CONTEXT_H */

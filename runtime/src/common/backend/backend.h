/*===- backend.h - What the shared communication code needs of a backend -===*/
/*
 * The communication layer's target-neutral parts live in this directory:
 * the public entry points of every collective and transfer with their
 * argument checks (collectives.c), the error buffer, the checks every
 * operation makes, context options and queries (errors.c), and meshes with
 * their cache of axis-group communicators (meshes.c), and the trace events
 * of trace.h (trace.c). They are compiled into
 * each backend library (braid_rt_cpu over MPI, braid_rt_cuda over NCCL),
 * not once, because they read the backend's own structures: each file
 * includes the backend's private "internal.h" (the backend's directory is
 * on its include path), which must define, before including this header,
 *
 *   struct braid_rt_comm     with ctx, rank, size and char name[128];
 *   struct braid_rt_context  with world (its struct braid_rt_comm),
 *                            timeout_s, live_meshes and
 *                            char error[BRAID_RT_ERROR_CAPACITY];
 *   struct braid_rt_stream   with ctx;
 *   braid_rt_dtype_t         with name ("f32") and bytes, and the values
 *                            BRAID_RT_F32 and BRAID_RT_F64;
 *
 * and give its context `int trace` (tracing on) and `braid_rt_trace_events_t
 * trace_events` (trace.c);
 *
 * and define the functions of the second part below. What a backend keeps
 * is what differs: MPI or NCCL calls, streams, events, requests.
 */
#ifndef BRAID_RT_COMMON_BACKEND_H
#define BRAID_RT_COMMON_BACKEND_H

#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/mesh.h"
#include "braid/rt/status.h"
#include "trace_events.h"

#include <stddef.h>

/*--- Shared (errors.c) ----------------------------------------------------*/

/* Records a printf-style message as ctx's last error and returns `status`.
   `ctx` may be NULL for the context-less error buffer. */
braid_rt_status_t braid_rt_fail(braid_rt_context_t *ctx,
                                braid_rt_status_t status, const char *format,
                                ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Records the failure of MPI call `call` (its source text, of which the
   message keeps the function name) with MPI error code `code`, in function
   `where`, and returns BRAID_RT_COMM_FAILURE. Both backends start over MPI
   (the CUDA backend for its bootstrap). */
braid_rt_status_t braid_rt_fail_mpi(braid_rt_context_t *ctx, int code,
                                    const char *call, const char *where);

/* Evaluates an MPI call; on failure records it in `ctx` and returns a status
   from the enclosing function. Communicators use MPI_ERRORS_RETURN, so
   errors reach here instead of aborting the process. */
#define BRAID_MPI_CHECK(ctx, call)                                             \
  do {                                                                         \
    int braid_mpi_code_ = (call);                                              \
    if (braid_mpi_code_ != MPI_SUCCESS)                                        \
      return braid_rt_fail_mpi((ctx), braid_mpi_code_, #call, __func__);       \
  } while (0)

/* Where a context finds MPI: sets *out_initialized to whether it runs
   already; fails when it was finalised (it cannot start again). */
braid_rt_status_t braid_rt_mpi_state(int *out_initialized);

/* Starts MPI for a context that owns it: MPI_Init_thread with
   MPI_THREAD_SERIALIZED, since the runtime may be called from any thread,
   one at a time. */
braid_rt_status_t braid_rt_mpi_start(int *argc, char ***argv);

/* Copies ctx's last error into the context-less buffer, where
   braid_rt_context_last_error(NULL) finds it after a failed
   braid_rt_context_create has released ctx. */
void braid_rt_keep_context_less_error(const braid_rt_context_t *ctx);

/* The start of braid_rt_context_create on every backend: fails unless
   out_ctx is given (then sets it to NULL) and `opts` (NULL: the defaults)
   has this runtime's size and version and a finite timeout >= 0; copies
   the options to use into *out_opts. */
braid_rt_status_t
braid_rt_context_prepare(const braid_rt_context_options_t *opts,
                         braid_rt_context_t **out_ctx,
                         braid_rt_context_options_t *out_opts);

/* Checks what every operation on `comm` needs: a communicator, what the
   backend requires of it (braid_rt_backend_check_comm), a stream of the
   same context, a count that fits in an int (the API's bound on every
   backend), a buffer when count is not zero, and what the backend
   requires of that buffer (braid_rt_backend_check_buffer). `what` names
   the operation in the message. */
braid_rt_status_t braid_rt_check_op(braid_rt_comm_t *comm,
                                    braid_rt_stream_t *stream, const char *what,
                                    size_t count, const void *buf,
                                    const char *buf_name);

/* Fails unless the byte ranges [a, a+a_bytes) and [b, b+b_bytes) are
   disjoint. */
braid_rt_status_t braid_rt_check_disjoint(braid_rt_comm_t *comm,
                                          const char *what, const void *a,
                                          size_t a_bytes, const void *b,
                                          size_t b_bytes);

/* Fails unless a _start call was given somewhere to put its request. */
braid_rt_status_t braid_rt_check_out_request(braid_rt_comm_t *comm,
                                             const char *what,
                                             braid_rt_request_t **out_request);

/*--- Shared (trace.c) ----------------------------------------------------*/

/* Records a communication operation on ctx's trace (trace_events.h); a
   message on ctx when it cannot. */
braid_rt_status_t braid_rt_trace_comm(braid_rt_context_t *ctx,
                                      const braid_rt_trace_comm_t *op);

/* Releases ctx's trace events. */
void braid_rt_trace_clear(braid_rt_context_t *ctx);

/*--- Defined by each backend ----------------------------------------------*/

/* What the backend requires of a non-NULL communicator before any
   operation (the CUDA backend: not aborted), and of a non-NULL buffer of
   `count` > 0 elements (the CUDA backend: device memory). */
braid_rt_status_t braid_rt_backend_check_comm(braid_rt_comm_t *comm,
                                              const char *what);
braid_rt_status_t braid_rt_backend_check_buffer(braid_rt_comm_t *comm,
                                                const char *what,
                                                const void *buf,
                                                const char *buf_name);

/* The operations, their arguments checked by the shared entry points
   (collectives.c): blocking when out_request is NULL, started otherwise. */
braid_rt_status_t braid_rt_backend_all_reduce_sum(
    braid_rt_comm_t *comm, void *buf, size_t count, braid_rt_dtype_t type,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_backend_all_gather(braid_rt_comm_t *comm,
                                              const void *send, void *recv,
                                              size_t send_count,
                                              braid_rt_dtype_t type,
                                              braid_rt_stream_t *stream,
                                              braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_backend_reduce_scatter_sum(
    braid_rt_comm_t *comm, const void *send, void *recv, size_t recv_count,
    braid_rt_dtype_t type, braid_rt_stream_t *stream,
    braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_backend_broadcast(braid_rt_comm_t *comm, void *buf,
                                             size_t count, int root,
                                             braid_rt_dtype_t type,
                                             braid_rt_stream_t *stream,
                                             braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_backend_all_to_all(braid_rt_comm_t *comm,
                                              const void *send, void *recv,
                                              size_t block_count,
                                              braid_rt_dtype_t type,
                                              braid_rt_stream_t *stream,
                                              braid_rt_request_t **out_request);
/* A send when `is_send` (then `buf` is only read). */
braid_rt_status_t braid_rt_backend_transfer(int is_send, braid_rt_comm_t *comm,
                                            void *buf, size_t count, int peer,
                                            int tag, braid_rt_dtype_t type,
                                            braid_rt_stream_t *stream,
                                            braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_backend_barrier(braid_rt_comm_t *comm,
                                           braid_rt_stream_t *stream);

/* The compressed sums of collectives.h, their arguments checked by the
   shared entry points: the 16-bit ring (`format` 0 bf16, 1 fp16), called
   with count > 0 on more than one rank for all_reduce and recv_count > 0
   for reduce_scatter; PowerSGD. */
braid_rt_status_t braid_rt_backend_all_reduce_sum_f32_16bit(
    braid_rt_comm_t *comm, float *buf, size_t count, braid_rt_stream_t *stream,
    int format);
braid_rt_status_t braid_rt_backend_reduce_scatter_sum_f32_16bit(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream, int format);
braid_rt_status_t braid_rt_backend_powersgd_all_reduce_f32(
    braid_rt_comm_t *comm, float *grad, size_t rows, size_t cols, size_t rank,
    float *q, float *error, braid_rt_stream_t *stream);

/* Makes `comm` the communicator of the world's ranks that pass the same
   `color`, numbered by `key` (MPI_Comm_split's arguments); comm->ctx and
   comm->name are set, and comm->rank and comm->size hold the expected
   values for messages. Collective over the world. On failure releases what
   it made; the caller frees comm. */
braid_rt_status_t braid_rt_backend_comm_split(braid_rt_comm_t *comm, int color,
                                              int key);

/* Before a mesh releases its communicators (the CUDA backend: waits for
   every operation in flight), and each communicator's release; the caller
   frees comm and returns the first failure. */
braid_rt_status_t braid_rt_backend_mesh_release_begin(braid_rt_context_t *ctx);
braid_rt_status_t braid_rt_backend_comm_release(braid_rt_comm_t *comm);

/* braid_rt_trace_write's steps over the world, rank 0 the root, as the
   backend waits for them (the CPU backend: with the context's timeout; the
   CUDA backend: blocking MPI over its bootstrap communicator): MPI_Gather
   of one int, MPI_Bcast of `bytes` bytes, MPI_Gatherv of chars. */
braid_rt_status_t braid_rt_backend_trace_gather_int(braid_rt_context_t *ctx,
                                                    const int *mine, int *all);
braid_rt_status_t braid_rt_backend_trace_bcast(braid_rt_context_t *ctx,
                                               void *buf, int bytes);
braid_rt_status_t braid_rt_backend_trace_gatherv(braid_rt_context_t *ctx,
                                                 const char *mine, int length,
                                                 char *all, const int *lengths,
                                                 const int *offsets);

#endif /* BRAID_RT_COMMON_BACKEND_H */

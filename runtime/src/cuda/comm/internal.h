/*===- internal.h - Private state of the CUDA backend's communication ----===*/

#ifndef BRAID_RT_CUDA_COMM_INTERNAL_H
#define BRAID_RT_CUDA_COMM_INTERNAL_H

#include "trace_events.h"
#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/cuda.h"
#include "braid/rt/mesh.h"
#include "braid/rt/status.h"

#include "host.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

/* braid_rt_cuda_single: one process, no libmpi (mpi_single.h). */
#ifdef BRAID_RT_CUDA_SINGLE_PROCESS
#include "mpi_single.h"
#else
#include <mpi.h>
#endif

#define BRAID_RT_ERROR_CAPACITY 512

/* Transfers (started or blocking) that may be in flight at once. */
#define BRAID_RT_MAX_TRANSFERS 4096


struct braid_rt_comm {
  braid_rt_context_t *ctx;
  ncclComm_t nccl; /* NULL once aborted */
  int rank, size;
  /* Aborted after a timeout or an asynchronous error: unusable, and never
     passed to ncclCommDestroy. */
  int broken;
  char name[128];             /* "world", "mesh axes {dp,tp}" */
  braid_rt_comm_t *next_live; /* the context's list of communicators */
};

/* Begins with its CUDA stream, as braid_rt_cuda_stream (stream.c) and the
   kernels read it. */
struct braid_rt_stream {
  cudaStream_t cuda;
  braid_rt_context_t *ctx;
  int owned; /* created by braid_rt_stream_create */
};

/* An operation from its start to its wait. Collectives are handed to NCCL
   at once; started sends and receives wait in the context's pending list
   until a wait issues them (host.h, braid_rt_cuda_p2p_select). */
struct braid_rt_request {
  braid_rt_comm_t *comm;
  braid_rt_stream_t *stream; /* the caller's; ordered after completion */
  cudaEvent_t ready; /* a transfer's: recorded on `stream` when started */
  cudaEvent_t done;  /* recorded on the communication stream */
  const char *op;    /* "all_reduce" */
  const char *dtype; /* "f32" */
  ncclDataType_t nccl_type;
  size_t count;
  int peer; /* rank in comm, or -1 for collectives */
  int tag;
  void *buf; /* of a deferred transfer */
  /* A transfer's tag travels beside it, in the slot of the context's
     device array `tags`, so that a receive can check what it matched. */
  int64_t tag_value; /* the sender's copy, uploaded when issued */
  int slot;          /* -1: none */
  int is_send;
  int issued;
  double start_s;
  /* When tracing: the first time the host saw it complete (0: not yet), and
     when a _start call returned (0: blocking). */
  double complete_s, issue_end_s;
  braid_rt_request_t *next; /* in the pending or in-flight list */
};

struct braid_rt_context {
  braid_rt_comm_t world;
  MPI_Comm mpi; /* private duplicate of MPI_COMM_WORLD: bootstrap, traces */
  int owns_mpi;
  int device, local_rank;
  cudaStream_t compute, comm_stream;
  braid_rt_stream_t default_stream; /* the compute stream */
  cudaEvent_t ready; /* recorded on a caller's stream, waited on by comm */
  float *scratch;    /* one device float: barriers */
  /* One int64 per transfer in flight, for its tag (request.c). */
  int64_t *tags;
  int *free_slots, num_free_slots;
  double timeout_s;
  int live_meshes;
  braid_rt_comm_t *comms; /* every live communicator, the world first */
  char error[BRAID_RT_ERROR_CAPACITY];

  /* Started transfers not yet issued, in start order. */
  braid_rt_request_t *pending, *pending_tail;
  size_t num_pending;
  /* Blocking operations issued and not yet known complete, oldest first:
     what a stream synchronisation waits for and a timeout names. */
  braid_rt_request_t *in_flight, *in_flight_tail;
  size_t num_in_flight;

  int trace;
  braid_rt_trace_events_t trace_events;

  /* PowerSGD's (compressed.c): a cuBLAS handle on the communication stream,
     created at the first call, and P's device buffer, grown to the largest
     call's rows x rank floats; both released by braid_rt_context_destroy.
     Every PowerSGD call runs on the communication stream, so one buffer
     serves them all in turn. */
  cublasHandle_t powersgd_blas;
  float *powersgd_p;
  size_t powersgd_p_floats;
};

typedef struct {
  ncclDataType_t nccl;
  const char *name; /* "f32", as messages name it */
  size_t bytes;
} braid_rt_dtype_t;

#define BRAID_RT_F32 ((braid_rt_dtype_t){ncclFloat32, "f32", sizeof(float)})
#define BRAID_RT_F64 ((braid_rt_dtype_t){ncclFloat64, "f64", sizeof(double)})

#include "backend/backend.h"

/* Records a failed CUDA or NCCL call (`call`: its source text, of which the
   message keeps the function name) in function `where` (MPI:
   braid_rt_fail_mpi, backend.h). */
braid_rt_status_t braid_rt_fail_cuda(braid_rt_context_t *ctx, cudaError_t code,
                                     const char *call, const char *where);
braid_rt_status_t braid_rt_fail_nccl(braid_rt_context_t *ctx, ncclResult_t code,
                                     ncclComm_t comm, const char *call,
                                     const char *where);

/* Evaluate a call; on failure record it in `ctx` and return a status from
   the enclosing function. */
#define BRAID_CUDA_CHECK(ctx, call)                                            \
  do {                                                                         \
    cudaError_t braid_cuda_code_ = (call);                                     \
    if (braid_cuda_code_ != cudaSuccess)                                       \
      return braid_rt_fail_cuda((ctx), braid_cuda_code_, #call, __func__);     \
  } while (0)

/* The stream `stream` names: NULL is the context's compute stream. */
braid_rt_stream_t *braid_rt_resolve_stream(braid_rt_context_t *ctx,
                                           braid_rt_stream_t *stream);

/* Completes a call on a communicator created non-blocking: `result`
   ncclInProgress is polled with ncclCommGetAsyncError until it settles or
   the context's timeout passes (then the communicator is aborted). `what`
   names the operation in messages. */
braid_rt_status_t braid_rt_nccl_settle(braid_rt_comm_t *comm,
                                       ncclResult_t result, const char *call,
                                       const char *what);

/* Aborts `comm` (ncclCommAbort; never ncclCommDestroy on it afterwards). */
void braid_rt_comm_abort(braid_rt_comm_t *comm);

/* Every collective runs in three steps, so that the blocking and the _start
   forms share one body:
     braid_rt_op_begin(...)        allocates the request, issues every pending
                                   send first, orders the communication stream
                                   after the caller's stream
     ncclXxx(..., ctx->comm_stream) inside ncclGroupStart/End
     braid_rt_op_finish(req, out_request, result, "ncclXxx")
   finish() settles the call, records the completion event, and either hands
   the request to the caller (_start) or orders the caller's stream after it
   and tracks it until it completes (blocking). */
braid_rt_status_t braid_rt_op_begin(braid_rt_comm_t *comm,
                                    braid_rt_stream_t *stream, const char *op,
                                    braid_rt_dtype_t type, size_t count,
                                    braid_rt_request_t **out_req);
braid_rt_status_t braid_rt_op_finish(braid_rt_request_t *req,
                                     braid_rt_request_t **out_request,
                                     ncclResult_t result, const char *call);

/* Queues a send or receive (request.c): issued at the latest when it is
   waited for; a blocking one is issued at once. */
braid_rt_status_t braid_rt_p2p_enqueue(braid_rt_comm_t *comm,
                                       braid_rt_stream_t *stream, int is_send,
                                       void *buf, size_t count, int peer,
                                       int tag, braid_rt_dtype_t type,
                                       braid_rt_request_t **out_request);

/* Issues every pending send (before any other operation, so that every rank
   issues in start order). */
braid_rt_status_t braid_rt_flush_sends(braid_rt_context_t *ctx);

/* Waits, on the host and within the timeout, until `req` has completed. */
braid_rt_status_t braid_rt_wait_event(braid_rt_request_t *req);

/* Waits for every issued operation and for `stream`; releases the tracked
   ones. */
braid_rt_status_t braid_rt_drain(braid_rt_context_t *ctx,
                                 braid_rt_stream_t *stream);

void braid_rt_request_free(braid_rt_request_t *req);

/* The compressed collectives' elementwise kernels (compressed_kernels.cu;
   on the fake device, test/compressed_kernels_host.c), launched on
   `stream` over `n` elements of device memory, `format` 0 bf16 or 1 fp16,
   with half.h's rounding:
     narrow:     out[i] = the 16-bit value nearest in[i]
     widen_add:  acc[i] = widen(in[i]) + acc[i]    (f32, as the CPU's ring)
     widen:      out[i] = widen(in[i])
     round_trip: x[i] = widen(narrow(x[i]))
   The launch's error, if any (nothing for n == 0). */
#ifdef __cplusplus
extern "C" {
#endif
cudaError_t braid_rt_cuda_narrow(const float *in, uint16_t *out, size_t n,
                                 int format, cudaStream_t stream);
cudaError_t braid_rt_cuda_widen_add(const uint16_t *in, float *acc, size_t n,
                                    int format, cudaStream_t stream);
cudaError_t braid_rt_cuda_widen(const uint16_t *in, float *out, size_t n,
                                int format, cudaStream_t stream);
cudaError_t braid_rt_cuda_round_trip(float *x, size_t n, int format,
                                     cudaStream_t stream);

/* PowerSGD's kernels (powersgd_kernels.cu; on the fake device,
   test/compressed_kernels_host.c), powersgd_math.h's arithmetic, on
   `stream` over device memory, row-major as common/powersgd.h:
     m:              m[i] = grad[i] + error[i] (error NULL: grad[i]); m may
                     be error
     orthonormalise: p's `rank` columns, modified Gram-Schmidt, in one block
     finish:         grad = p q^T; error (unless NULL) = m - grad / size; m
                     may be grad or error
   The launch's error, if any (nothing for an empty matrix). */
cudaError_t braid_rt_cuda_powersgd_m(const float *grad, const float *error,
                                     float *m, size_t n, cudaStream_t stream);
cudaError_t braid_rt_cuda_powersgd_orthonormalise(float *p, size_t rows,
                                                  size_t rank,
                                                  cudaStream_t stream);
cudaError_t braid_rt_cuda_powersgd_finish(const float *m, const float *p,
                                          const float *q, float *grad,
                                          float *error, size_t rows,
                                          size_t cols, size_t rank, int size,
                                          cudaStream_t stream);
#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_CUDA_COMM_INTERNAL_H */

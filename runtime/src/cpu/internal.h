/*===- internal.h - Private state of the CPU backend ---------------------===*/

#ifndef BRAID_RT_CPU_INTERNAL_H
#define BRAID_RT_CPU_INTERNAL_H

#include "trace_events.h"
#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/mesh.h"
#include "braid/rt/status.h"

#include <mpi.h>

#define BRAID_RT_ERROR_CAPACITY 512


struct braid_rt_comm {
  braid_rt_context_t *ctx;
  MPI_Comm mpi;
  int rank, size;
  char name[128]; /* "world", "mesh axes {dp,tp}" */
};

struct braid_rt_context {
  braid_rt_comm_t world;
  int owns_mpi; /* MPI_Init ran in braid_rt_context_create */
  double timeout_s;
  int live_meshes;
  char error[BRAID_RT_ERROR_CAPACITY];

  int trace;
  braid_rt_trace_events_t trace_events;
  /* While a sum the runtime composes of other operations runs (the 16-bit
     ring's messages, PowerSGD's all_reduces): its name, which those
     operations' events carry as `within`, and the bytes they sent, which
     its own event reports (when tracing). */
  const char *trace_within;
  size_t trace_within_sent;

  /* Started operations not yet waited for, newest first: what
     braid_rt_progress tests. */
  struct braid_rt_request *active;

  /* MPI gives the core away in a test that finds nothing to do (OpenMPI's
     mpi_yield_when_idle); read once, after MPI_Init. */
  int progress_yields;
};

struct braid_rt_stream {
  braid_rt_context_t *ctx;
};

/* An operation in flight: what the wait polls and what a timeout names. */
struct braid_rt_request {
  braid_rt_comm_t *comm;
  MPI_Request mpi;
  const char *op;    /* "all_reduce" */
  const char *dtype; /* "f32" */
  size_t count;
  int peer; /* rank in comm, or -1 for collectives */
  int tag;
  double start_s;
  /* For the trace (trace_events.h): the payload, the bytes this rank sends
     for it, and ctx->trace_within when it began. */
  size_t bytes, wire_bytes;
  const char *within;
  /* When tracing: the first time a test saw it complete (0: not yet), and
     when a _start call returned (0: blocking). */
  double complete_s, issue_end_s;
  int done;
  /* Links in ctx->active while started and not waited for. */
  struct braid_rt_request *active_prev, *active_next;
};

/* An element type as operations need it. */
typedef struct {
  MPI_Datatype mpi;
  const char *name; /* "f32", as messages name it */
  size_t bytes;
} braid_rt_dtype_t;

#define BRAID_RT_F32 ((braid_rt_dtype_t){MPI_FLOAT, "f32", sizeof(float)})
#define BRAID_RT_F64 ((braid_rt_dtype_t){MPI_DOUBLE, "f64", sizeof(double)})

#include "backend/backend.h"

/* Every operation runs in three steps, so that the blocking and the _start
   forms share one body:
     req = braid_rt_request_begin(...)   storage: the heap for a _start call
                                         (out_request != NULL), else `stack`
     code = MPI_I<op>(..., &req->mpi)
     return braid_rt_request_finish(req, out_request, code, "MPI_I<op>");
   finish() waits in the blocking form, hands the request to the caller in
   the _start form, and on an MPI error records it and frees the request. */
braid_rt_status_t braid_rt_request_begin(braid_rt_comm_t *comm,
                                         braid_rt_request_t **out_request,
                                         braid_rt_request_t *stack,
                                         const char *op, const char *dtype,
                                         size_t count, int peer, int tag,
                                         braid_rt_request_t **out_req);
braid_rt_status_t braid_rt_request_finish(braid_rt_request_t *req,
                                          braid_rt_request_t **out_request,
                                          int mpi_code, const char *mpi_call);

/* A sum the runtime composes of other operations (compressed.c,
   powersgd.c), on ctx's trace: braid_rt_composed_enter makes `op` the
   `within` of the operations that follow, saving the enclosing one's in
   `saved`; braid_rt_composed_leave restores it and returns the bytes those
   operations sent (0 when not tracing), which count towards the enclosing
   one's too. */
typedef struct {
  const char *within;
  size_t sent;
} braid_rt_composed_t;
void braid_rt_composed_enter(braid_rt_context_t *ctx, const char *op,
                             braid_rt_composed_t *saved);
size_t braid_rt_composed_leave(braid_rt_context_t *ctx,
                               const braid_rt_composed_t *saved);

/* Leaves the composed sum `op` over `comm` (braid_rt_composed_leave) and,
   when it succeeded (`status`) and ctx traces, records it as one operation
   on `count` f32 values beside the operations within it: its payload, and
   on the wire the bytes they sent. It waited from start_s to now; a
   negative start_s records it as of no duration, at its end (PowerSGD's,
   whose products are compute, not communication). Returns `status`, or the
   failure to record it. */
braid_rt_status_t braid_rt_composed_finish(braid_rt_comm_t *comm,
                                           const char *op, size_t count,
                                           double start_s,
                                           const braid_rt_composed_t *saved,
                                           braid_rt_status_t status);

#endif /* BRAID_RT_CPU_INTERNAL_H */

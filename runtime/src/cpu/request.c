/*===- request.c - Waiting for operations, with a timeout (CPU, MPI) -----===*/

#include "internal.h"
#include "op_info.h"

#include "braid/rt/trace.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static braid_rt_status_t wait_in_place(braid_rt_request_t *req, int blocking);

braid_rt_status_t braid_rt_request_begin(braid_rt_comm_t *comm,
                                         braid_rt_request_t **out_request,
                                         braid_rt_request_t *stack,
                                         const char *op, const char *dtype,
                                         size_t count, int peer, int tag,
                                         braid_rt_request_t **out_req) {
  braid_rt_request_t *req = stack;
  if (out_request) {
    *out_request = NULL;
    req = malloc(sizeof(*req));
    if (!req)
      return braid_rt_fail(comm->ctx, BRAID_RT_OUT_OF_MEMORY,
                           "%s over %s: out of memory", op, comm->name);
  }
  req->comm = comm;
  req->mpi = MPI_REQUEST_NULL;
  req->op = op;
  req->dtype = dtype;
  req->count = count;
  req->peer = peer;
  req->tag = tag;
  req->bytes = req->wire_bytes = 0;
  req->within = comm->ctx->trace_within;
  req->start_s = braid_rt_now_seconds();
  req->complete_s = req->issue_end_s = 0;
  req->done = 0;
  req->active_prev = req->active_next = NULL;
  *out_req = req;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_request_finish(braid_rt_request_t *req,
                                          braid_rt_request_t **out_request,
                                          int mpi_code, const char *mpi_call) {
  if (mpi_code != MPI_SUCCESS) {
    braid_rt_status_t status =
        braid_rt_fail_mpi(req->comm->ctx, mpi_code, mpi_call, req->op);
    if (out_request)
      free(req);
    return status;
  }
  if (!out_request)
    return wait_in_place(req, 1);
  braid_rt_context_t *ctx = req->comm->ctx;
  if (ctx->trace)
    req->issue_end_s = braid_rt_now_seconds();
  req->active_next = ctx->active;
  if (ctx->active)
    ctx->active->active_prev = req;
  ctx->active = req;
  *out_request = req;
  return BRAID_RT_OK;
}

static void unlink_active(braid_rt_request_t *req) {
  braid_rt_context_t *ctx = req->comm->ctx;
  if (req->active_prev)
    req->active_prev->active_next = req->active_next;
  else if (ctx->active == req)
    ctx->active = req->active_next;
  if (req->active_next)
    req->active_next->active_prev = req->active_prev;
  req->active_prev = req->active_next = NULL;
}

/* The operation as a timeout or failure message names it. */
static void describe(const braid_rt_request_t *req, char *out,
                     size_t capacity) {
  const braid_rt_comm_t *comm = req->comm;
  braid_rt_op_info_t info = {req->op,    req->dtype, req->count,
                             req->peer,  req->tag,   comm->name,
                             comm->rank, comm->size, comm->ctx->world.rank};
  braid_rt_describe_op(&info, out, capacity);
}

/* MPI_Test on `req`; when tracing, notes the time it is first seen complete
   (the end of its flight: a started operation moves only in MPI calls, so
   it completes in one). */
static int test_once(braid_rt_request_t *req) {
  int code = MPI_Test(&req->mpi, &req->done, MPI_STATUS_IGNORE);
  if (req->done && req->comm->ctx->trace && req->complete_s == 0)
    req->complete_s = braid_rt_now_seconds();
  return code;
}

/* Waits for `req` without releasing it; in a blocking call (which waits
   from its issue) or in braid_rt_request_wait. Polls rather than blocking
   in MPI_Wait, which has no timeout. */
static braid_rt_status_t wait_in_place(braid_rt_request_t *req, int blocking) {
  braid_rt_context_t *ctx = req->comm->ctx;
  double wait_start_s = braid_rt_now_seconds();
  while (!req->done) {
    int code = test_once(req);
    if (code != MPI_SUCCESS) {
      char what[256];
      describe(req, what, sizeof(what));
      return braid_rt_fail_mpi(ctx, code, "MPI_Test", what);
    }
    if (req->done)
      break;
    if (ctx->timeout_s > 0 &&
        braid_rt_now_seconds() - wait_start_s > ctx->timeout_s) {
      char what[256];
      describe(req, what, sizeof(what));
      return braid_rt_fail(ctx, BRAID_RT_TIMEOUT,
                           "%s: no completion within %g s", what,
                           ctx->timeout_s);
    }
    /* Ranks may outnumber cores: let a peer that shares ours make progress. */
    sched_yield();
  }
  if (!ctx->trace)
    return BRAID_RT_OK;
  if (req->within)
    ctx->trace_within_sent += req->wire_bytes;
  /* A blocking call waits over its whole flight, to the bit. */
  braid_rt_trace_comm_t op = {
      .name = req->op,
      .over = req->comm->name,
      .dtype = req->dtype,
      .count = req->count,
      .peer = req->peer,
      .tag = req->tag,
      .has_bytes = req->dtype != NULL,
      .bytes = req->bytes,
      .wire_bytes = req->wire_bytes,
      .within = req->within,
      .issue_s = req->start_s,
      .complete_s = req->complete_s,
      .wait_start_s = blocking ? req->start_s : wait_start_s,
      .wait_end_s = blocking ? req->complete_s : braid_rt_now_seconds(),
      .issue_end_s = req->issue_end_s};
  return braid_rt_trace_comm(ctx, &op);
}

void braid_rt_composed_enter(braid_rt_context_t *ctx, const char *op,
                             braid_rt_composed_t *saved) {
  saved->within = ctx->trace_within;
  saved->sent = ctx->trace_within_sent;
  ctx->trace_within = op;
  ctx->trace_within_sent = 0;
}

size_t braid_rt_composed_leave(braid_rt_context_t *ctx,
                               const braid_rt_composed_t *saved) {
  size_t sent = ctx->trace_within_sent;
  ctx->trace_within = saved->within;
  ctx->trace_within_sent = saved->sent + (saved->within ? sent : 0);
  return sent;
}

braid_rt_status_t braid_rt_composed_finish(braid_rt_comm_t *comm,
                                           const char *op, size_t count,
                                           double start_s,
                                           const braid_rt_composed_t *saved,
                                           braid_rt_status_t status) {
  size_t sent = braid_rt_composed_leave(comm->ctx, saved);
  if (status != BRAID_RT_OK || !comm->ctx->trace)
    return status;
  double end_s = braid_rt_now_seconds();
  if (start_s < 0)
    start_s = end_s;
  braid_rt_trace_comm_t event = {.name = op,
                                 .over = comm->name,
                                 .dtype = "f32",
                                 .count = count,
                                 .peer = -1,
                                 .has_bytes = 1,
                                 .bytes = count * sizeof(float),
                                 .wire_bytes = sent,
                                 .within = saved->within,
                                 .issue_s = start_s,
                                 .complete_s = end_s,
                                 .wait_start_s = start_s,
                                 .wait_end_s = end_s};
  return braid_rt_trace_comm(comm->ctx, &event);
}

braid_rt_status_t braid_rt_request_wait(braid_rt_request_t *request) {
  if (!request)
    return BRAID_RT_OK;
  braid_rt_status_t status = wait_in_place(request, 0);
  unlink_active(request);
  /* After a failure the MPI request may still be active; freeing it is
     erroneous for collectives, so it is abandoned with its communicator. */
  free(request);
  return status;
}

braid_rt_status_t braid_rt_request_test(braid_rt_request_t *request,
                                        int *out_done) {
  if (!request || !out_done)
    return braid_rt_fail(request ? request->comm->ctx : NULL,
                         BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_request_test: NULL argument");
  if (!request->done) {
    int code = test_once(request);
    if (code != MPI_SUCCESS) {
      char what[256];
      describe(request, what, sizeof(what));
      return braid_rt_fail_mpi(request->comm->ctx, code, "MPI_Test", what);
    }
  }
  *out_done = request->done;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_progress(braid_rt_context_t *ctx, int *out_active) {
  if (out_active)
    *out_active = 0;
  if (!ctx)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_progress: ctx is NULL");
  /* OpenMPI moves a started collective or a large message only inside MPI
     calls: testing gives its progress engine a turn. One MPI_Testsome over
     the requests (in batches) rather than an MPI_Test each: every MPI call
     that moves nothing yields the core where MPI yields when idle, and a
     ZeRO-3 stage has a gather per bucket in flight (docs/runtime.md). */
  enum { kBatch = 64 };
  MPI_Request mpi[kBatch];
  braid_rt_request_t *batch[kBatch];
  int indices[kBatch];
  int active = 0;
  braid_rt_request_t *req = ctx->active;
  while (req) {
    int n = 0;
    for (; req && n < kBatch; req = req->active_next)
      if (!req->done) {
        batch[n] = req;
        mpi[n++] = req->mpi;
      }
    if (n == 0)
      break;
    int completed = 0;
    int code = MPI_Testsome(n, mpi, &completed, indices, MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) {
      char what[256];
      describe(batch[0], what, sizeof(what));
      return braid_rt_fail_mpi(ctx, code, "MPI_Testsome", what);
    }
    if (completed == MPI_UNDEFINED) /* no active request among them */
      completed = 0;
    double now = completed > 0 && ctx->trace ? braid_rt_now_seconds() : 0;
    for (int i = 0; i < completed; ++i) {
      braid_rt_request_t *done = batch[indices[i]];
      /* MPI_Testsome set the completed handles to MPI_REQUEST_NULL (a
         persistent or non-blocking one is freed). */
      done->mpi = mpi[indices[i]];
      done->done = 1;
      if (done->complete_s == 0)
        done->complete_s = now;
    }
    active += n - completed;
  }
  if (out_active)
    *out_active = active;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_progress_yields(braid_rt_context_t *ctx,
                                           int *out_yields) {
  if (!ctx || !out_yields)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_progress_yields: NULL argument");
  *out_yields = ctx->progress_yields;
  return BRAID_RT_OK;
}

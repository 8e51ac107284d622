/*===- request.c - Issuing, tracking and waiting (CUDA, NCCL) ------------===*/

#include "internal.h"
#include "op_info.h"

#include "braid/rt/trace.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* Blocking operations tracked at once; beyond this a new operation first
   waits for the oldest, so that a program that never synchronises still
   meets its timeouts and does not grow the list without bound. */
#define MAX_IN_FLIGHT 1024

void braid_rt_request_free(braid_rt_request_t *req) {
  if (!req)
    return;
  if (req->slot >= 0) {
    braid_rt_context_t *ctx = req->comm->ctx;
    ctx->free_slots[ctx->num_free_slots++] = req->slot;
  }
  if (req->ready)
    cudaEventDestroy(req->ready);
  if (req->done)
    cudaEventDestroy(req->done);
  free(req);
}

static braid_rt_status_t new_request(braid_rt_comm_t *comm,
                                     braid_rt_stream_t *stream, const char *op,
                                     braid_rt_dtype_t type, size_t count,
                                     int peer, int tag, int with_ready,
                                     braid_rt_request_t **out_req) {
  braid_rt_context_t *ctx = comm->ctx;
  *out_req = NULL;
  braid_rt_request_t *req = calloc(1, sizeof(*req));
  if (!req)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: out of memory", op, comm->name);
  req->comm = comm;
  req->stream = braid_rt_resolve_stream(ctx, stream);
  req->op = op;
  req->dtype = type.name;
  req->nccl_type = type.nccl;
  req->count = count;
  req->peer = peer;
  req->tag = tag;
  req->start_s = braid_rt_now_seconds();
  req->slot = -1;
  cudaError_t code =
      cudaEventCreateWithFlags(&req->done, cudaEventDisableTiming);
  if (code == cudaSuccess && with_ready)
    code = cudaEventCreateWithFlags(&req->ready, cudaEventDisableTiming);
  if (code != cudaSuccess) {
    braid_rt_request_free(req);
    return braid_rt_fail_cuda(ctx, code, "cudaEventCreateWithFlags", op);
  }
  *out_req = req;
  return BRAID_RT_OK;
}

static void describe(const braid_rt_request_t *req, char *out,
                     size_t capacity) {
  const braid_rt_comm_t *comm = req->comm;
  braid_rt_op_info_t info = {
      req->op,    req->dtype, req->count,
      req->peer,  req->tag,   comm->name,
      comm->rank, comm->size, comm->ctx->world.rank};
  braid_rt_describe_op(&info, out, capacity);
}

/* Appends to a singly linked list with a tail. */
static void append(braid_rt_request_t **head, braid_rt_request_t **tail,
                   size_t *count, braid_rt_request_t *req) {
  req->next = NULL;
  if (*tail)
    (*tail)->next = req;
  else
    *head = req;
  *tail = req;
  ++*count;
}

/* Removes `req` from the pending list if it is there. */
static void unlink_pending(braid_rt_context_t *ctx, braid_rt_request_t *req) {
  braid_rt_request_t *prev = NULL;
  for (braid_rt_request_t *r = ctx->pending; r; prev = r, r = r->next) {
    if (r != req)
      continue;
    if (prev)
      prev->next = r->next;
    else
      ctx->pending = r->next;
    if (ctx->pending_tail == r)
      ctx->pending_tail = prev;
    --ctx->num_pending;
    r->next = NULL;
    return;
  }
}

/* Issues, as one NCCL group on the communication stream, the pending
   transfers braid_rt_cuda_p2p_select picks for a wait on `target` (NULL:
   the sends only). */
static braid_rt_status_t issue_pending(braid_rt_context_t *ctx,
                                       braid_rt_request_t *target) {
  size_t n = ctx->num_pending;
  if (n == 0)
    return BRAID_RT_OK;
  braid_rt_request_t **reqs = malloc(n * sizeof(*reqs));
  braid_rt_cuda_p2p_entry_t *entries = malloc(n * sizeof(*entries));
  unsigned char *selected = malloc(n);
  if (!reqs || !entries || !selected) {
    free(reqs);
    free(entries);
    free(selected);
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "issuing %zu transfers: out of memory", n);
  }
  ptrdiff_t target_index = -1;
  size_t i = 0;
  for (braid_rt_request_t *r = ctx->pending; r; r = r->next, ++i) {
    reqs[i] = r;
    entries[i] = (braid_rt_cuda_p2p_entry_t){r->is_send, r->comm, r->peer,
                                             r->peer == r->comm->rank};
    if (r == target)
      target_index = (ptrdiff_t)i;
  }
  braid_rt_status_t status = BRAID_RT_OK;
  if (braid_rt_cuda_p2p_select(entries, n, target_index, selected) == 0)
    goto done;

  /* Each transfer waits for the work its caller issued before starting it,
     no more. */
  for (i = 0; i < n; ++i) {
    if (!selected[i])
      continue;
    cudaError_t code = cudaStreamWaitEvent(ctx->comm_stream, reqs[i]->ready, 0);
    if (code != cudaSuccess) {
      status =
          braid_rt_fail_cuda(ctx, code, "cudaStreamWaitEvent", reqs[i]->op);
      goto done;
    }
  }
  /* The senders' tags go to their slots first, on the same stream. */
  for (i = 0; i < n; ++i) {
    braid_rt_request_t *r = reqs[i];
    if (!selected[i] || !r->is_send)
      continue;
    cudaError_t code =
        cudaMemcpyAsync(&ctx->tags[r->slot], &r->tag_value, sizeof(int64_t),
                        cudaMemcpyHostToDevice, ctx->comm_stream);
    if (code != cudaSuccess) {
      status = braid_rt_fail_cuda(ctx, code, "cudaMemcpyAsync", r->op);
      goto done;
    }
  }
  ncclGroupStart();
  braid_rt_request_t *failed = NULL;
  ncclResult_t result = ncclSuccess;
  for (i = 0; i < n && !failed; ++i) {
    braid_rt_request_t *r = reqs[i];
    if (!selected[i])
      continue;
    if (r->comm->broken) {
      failed = r;
      break;
    }
    /* The tag, then the data: both sides keep this order per peer. */
    int64_t *tag = &ctx->tags[r->slot];
    ncclComm_t nc = r->comm->nccl;
    result = r->is_send
                 ? ncclSend(tag, 1, ncclInt64, r->peer, nc, ctx->comm_stream)
                 : ncclRecv(tag, 1, ncclInt64, r->peer, nc, ctx->comm_stream);
    if (result == ncclSuccess || result == ncclInProgress)
      result = r->is_send ? ncclSend(r->buf, r->count, r->nccl_type, r->peer,
                                     nc, ctx->comm_stream)
                          : ncclRecv(r->buf, r->count, r->nccl_type, r->peer,
                                     nc, ctx->comm_stream);
    if (result != ncclSuccess && result != ncclInProgress)
      failed = r;
  }
  ncclResult_t end = ncclGroupEnd();
  if (failed) {
    char what[256];
    describe(failed, what, sizeof(what));
    if (failed->comm->broken)
      status = braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE,
                             "%s: the communicator was aborted after an "
                             "earlier failure",
                             what);
    else
      status =
          braid_rt_nccl_settle(failed->comm, result,
                               failed->is_send ? "ncclSend" : "ncclRecv", what);
    goto done;
  }
  /* A non-blocking group settles on each of its communicators. */
  for (i = 0; i < n && status == BRAID_RT_OK; ++i) {
    if (!selected[i])
      continue;
    int first = 1;
    for (size_t j = 0; j < i; ++j)
      first &= !(selected[j] && reqs[j]->comm == reqs[i]->comm);
    if (!first)
      continue;
    char what[256];
    describe(reqs[i], what, sizeof(what));
    status = braid_rt_nccl_settle(reqs[i]->comm, end, "ncclGroupEnd", what);
  }
  for (i = 0; i < n && status == BRAID_RT_OK; ++i) {
    if (!selected[i])
      continue;
    cudaError_t code = cudaEventRecord(reqs[i]->done, ctx->comm_stream);
    if (code != cudaSuccess) {
      status = braid_rt_fail_cuda(ctx, code, "cudaEventRecord", reqs[i]->op);
      break;
    }
    reqs[i]->issued = 1;
    unlink_pending(ctx, reqs[i]);
  }
done:
  free(reqs);
  free(entries);
  free(selected);
  return status;
}

braid_rt_status_t braid_rt_flush_sends(braid_rt_context_t *ctx) {
  return issue_pending(ctx, NULL);
}

braid_rt_status_t braid_rt_wait_event(braid_rt_request_t *req) {
  braid_rt_comm_t *comm = req->comm;
  braid_rt_context_t *ctx = comm->ctx;
  /* Pending sends go too: a peer may need them before it can take part in
     what this rank waits for, as with MPI, where they would be in flight. */
  braid_rt_status_t issued = issue_pending(ctx, req->issued ? NULL : req);
  if (issued != BRAID_RT_OK)
    return issued;
  double wait_start_s = braid_rt_now_seconds();
  for (;;) {
    cudaError_t code = cudaEventQuery(req->done);
    if (code == cudaSuccess)
      return BRAID_RT_OK;
    char what[256];
    if (code != cudaErrorNotReady) {
      describe(req, what, sizeof(what));
      return braid_rt_fail_cuda(ctx, code, "cudaEventQuery", what);
    }
    if (comm->broken) {
      describe(req, what, sizeof(what));
      return braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE,
                           "%s: the communicator was aborted after an "
                           "earlier failure",
                           what);
    }
    /* A peer that died or a network error shows here, not in the event. */
    ncclResult_t state = ncclSuccess;
    ncclResult_t got = ncclCommGetAsyncError(comm->nccl, &state);
    if (got != ncclSuccess)
      state = got;
    if (state != ncclSuccess && state != ncclInProgress) {
      describe(req, what, sizeof(what));
      const char *detail = ncclGetLastError(comm->nccl);
      braid_rt_comm_abort(comm);
      return braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE,
                           "%s: NCCL reported %s%s%s; the communicator was "
                           "aborted",
                           what, ncclGetErrorString(state),
                           detail && detail[0] ? ": " : "",
                           detail ? detail : "");
    }
    if (braid_rt_cuda_timed_out(wait_start_s, braid_rt_now_seconds(),
                                ctx->timeout_s)) {
      describe(req, what, sizeof(what));
      braid_rt_comm_abort(comm);
      return braid_rt_fail(ctx, BRAID_RT_TIMEOUT,
                           "%s: no completion within %g s; the communicator "
                           "was aborted",
                           what, ctx->timeout_s);
    }
    /* Ranks may outnumber cores: let a peer that shares ours progress. */
    sched_yield();
  }
}

/* After a receive completed: whether the message it matched carried its
   tag. NCCL matches in order, so a program that waits for receives in
   another order than their sends gets another message; say so rather than
   compute with it. */
static braid_rt_status_t check_tag(braid_rt_request_t *req) {
  if (req->is_send || req->slot < 0)
    return BRAID_RT_OK;
  braid_rt_context_t *ctx = req->comm->ctx;
  int64_t got = -1;
  cudaError_t code = cudaMemcpy(&got, &ctx->tags[req->slot], sizeof(got),
                                cudaMemcpyDeviceToHost);
  if (code != cudaSuccess)
    return braid_rt_fail_cuda(ctx, code, "cudaMemcpy", req->op);
  if (got == req->tag)
    return BRAID_RT_OK;
  char what[256];
  describe(req, what, sizeof(what));
  return braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE,
                       "%s: the message that arrived was sent with tag %lld; "
                       "the CUDA backend (NCCL) delivers the messages "
                       "between two ranks in the order they were sent: wait "
                       "for the receives in that order",
                       what, (long long)got);
}

/* Releases tracked operations that have completed, oldest first; a
   blocking receive's tag is checked then. */
static braid_rt_status_t retire_completed(braid_rt_context_t *ctx) {
  braid_rt_status_t status = BRAID_RT_OK;
  while (ctx->in_flight &&
         cudaEventQuery(ctx->in_flight->done) == cudaSuccess) {
    braid_rt_request_t *r = ctx->in_flight;
    ctx->in_flight = r->next;
    if (!ctx->in_flight)
      ctx->in_flight_tail = NULL;
    --ctx->num_in_flight;
    braid_rt_status_t checked = check_tag(r);
    if (status == BRAID_RT_OK)
      status = checked;
    braid_rt_request_free(r);
  }
  return status;
}

/* Waits for the oldest tracked operation and releases it, whatever the
   outcome. */
static braid_rt_status_t wait_oldest(braid_rt_context_t *ctx) {
  braid_rt_request_t *r = ctx->in_flight;
  braid_rt_status_t status = braid_rt_wait_event(r);
  if (status == BRAID_RT_OK)
    status = check_tag(r);
  ctx->in_flight = r->next;
  if (!ctx->in_flight)
    ctx->in_flight_tail = NULL;
  --ctx->num_in_flight;
  braid_rt_request_free(r);
  return status;
}

/* Records `req` on the trace: in flight from its start until the host saw
   it complete (complete_s, else the end of the wait), waited for from
   wait_start_s to wait_end_s. */
static braid_rt_status_t trace_op(braid_rt_request_t *req, double wait_start_s,
                                  double wait_end_s) {
  braid_rt_trace_comm_t op = {.name = req->op,
                              .over = req->comm->name,
                              .dtype = req->dtype,
                              .count = req->count,
                              .peer = req->peer,
                              .tag = req->tag,
                              .issue_s = req->start_s,
                              .complete_s = req->complete_s ? req->complete_s
                                                            : wait_end_s,
                              .wait_start_s = wait_start_s,
                              .wait_end_s = wait_end_s,
                              .issue_end_s = req->issue_end_s};
  return braid_rt_trace_comm(req->comm->ctx, &op);
}

/* Hands a blocking operation's completion to its caller's stream and keeps
   it until it is known complete. */
static braid_rt_status_t complete_blocking(braid_rt_request_t *req) {
  braid_rt_context_t *ctx = req->comm->ctx;
  cudaError_t code = cudaStreamWaitEvent(req->stream->cuda, req->done, 0);
  if (code != cudaSuccess) {
    braid_rt_status_t status =
        braid_rt_fail_cuda(ctx, code, "cudaStreamWaitEvent", req->op);
    braid_rt_request_free(req);
    return status;
  }
  braid_rt_status_t status = BRAID_RT_OK;
  /* Host-side times: a blocking operation returns once enqueued, so its
     flight and its wait are the enqueue. */
  if (ctx->trace)
    status = trace_op(req, req->start_s, braid_rt_now_seconds());
  append(&ctx->in_flight, &ctx->in_flight_tail, &ctx->num_in_flight, req);
  return status;
}

/* What every issue does first: pending sends go before anything started
   later, completed operations are released, and the list stays bounded. */
static braid_rt_status_t prepare_issue(braid_rt_context_t *ctx) {
  braid_rt_status_t status = braid_rt_flush_sends(ctx);
  if (status != BRAID_RT_OK)
    return status;
  status = retire_completed(ctx);
  while (status == BRAID_RT_OK && ctx->num_in_flight >= MAX_IN_FLIGHT)
    status = wait_oldest(ctx);
  return status;
}

braid_rt_status_t braid_rt_op_begin(braid_rt_comm_t *comm,
                                    braid_rt_stream_t *stream, const char *op,
                                    braid_rt_dtype_t type, size_t count,
                                    braid_rt_request_t **out_req) {
  braid_rt_context_t *ctx = comm->ctx;
  braid_rt_status_t status = prepare_issue(ctx);
  if (status != BRAID_RT_OK)
    return status;
  status = new_request(comm, stream, op, type, count, -1, 0, 0, out_req);
  if (status != BRAID_RT_OK)
    return status;
  /* The communication stream waits for the caller's earlier work. */
  braid_rt_request_t *req = *out_req;
  cudaError_t code = cudaEventRecord(ctx->ready, req->stream->cuda);
  if (code == cudaSuccess)
    code = cudaStreamWaitEvent(ctx->comm_stream, ctx->ready, 0);
  if (code != cudaSuccess) {
    braid_rt_request_free(req);
    *out_req = NULL;
    return braid_rt_fail_cuda(ctx, code, "cudaStreamWaitEvent", op);
  }
  req->issued = 1;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_op_finish(braid_rt_request_t *req,
                                     braid_rt_request_t **out_request,
                                     ncclResult_t result, const char *call) {
  braid_rt_comm_t *comm = req->comm;
  braid_rt_context_t *ctx = comm->ctx;
  char what[256];
  describe(req, what, sizeof(what));
  braid_rt_status_t status = braid_rt_nccl_settle(comm, result, call, what);
  if (status == BRAID_RT_OK) {
    cudaError_t code = cudaEventRecord(req->done, ctx->comm_stream);
    if (code != cudaSuccess)
      status = braid_rt_fail_cuda(ctx, code, "cudaEventRecord", req->op);
  }
  if (status != BRAID_RT_OK) {
    braid_rt_request_free(req);
    return status;
  }
  if (out_request) {
    if (ctx->trace)
      req->issue_end_s = braid_rt_now_seconds();
    *out_request = req;
    return BRAID_RT_OK;
  }
  return complete_blocking(req);
}

braid_rt_status_t braid_rt_p2p_enqueue(braid_rt_comm_t *comm,
                                       braid_rt_stream_t *stream, int is_send,
                                       void *buf, size_t count, int peer,
                                       int tag, braid_rt_dtype_t type,
                                       braid_rt_request_t **out_request) {
  braid_rt_context_t *ctx = comm->ctx;
  const char *op = is_send ? "send" : "recv";
  braid_rt_status_t status = retire_completed(ctx);
  if (status != BRAID_RT_OK)
    return status;
  if (ctx->num_free_slots == 0)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: %d transfers are in flight already; "
                         "wait for some first",
                         op, comm->name, BRAID_RT_MAX_TRANSFERS);
  braid_rt_request_t *req;
  status = new_request(comm, stream, op, type, count, peer, tag, 1, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->is_send = is_send;
  req->buf = buf;
  req->tag_value = tag;
  req->slot = ctx->free_slots[--ctx->num_free_slots];
  cudaError_t code = cudaEventRecord(req->ready, req->stream->cuda);
  if (code != cudaSuccess) {
    braid_rt_request_free(req);
    return braid_rt_fail_cuda(ctx, code, "cudaEventRecord", op);
  }
  append(&ctx->pending, &ctx->pending_tail, &ctx->num_pending, req);
  if (out_request) {
    if (ctx->trace)
      req->issue_end_s = braid_rt_now_seconds();
    *out_request = req;
    return BRAID_RT_OK;
  }
  /* Blocking: issued now, grouped with the pending sends. */
  status = issue_pending(ctx, req);
  if (status == BRAID_RT_OK && !req->issued)
    status = braid_rt_fail(ctx, BRAID_RT_INTERNAL, "%s over %s: not issued", op,
                           comm->name);
  if (status != BRAID_RT_OK) {
    unlink_pending(ctx, req);
    braid_rt_request_free(req);
    return status;
  }
  return complete_blocking(req);
}

braid_rt_status_t braid_rt_drain(braid_rt_context_t *ctx,
                                 braid_rt_stream_t *stream) {
  braid_rt_status_t status = braid_rt_flush_sends(ctx);
  while (status == BRAID_RT_OK && ctx->in_flight)
    status = wait_oldest(ctx);
  if (status != BRAID_RT_OK)
    return status;
  /* Communication is done: what remains on the stream is compute, which
     has no timeout. */
  braid_rt_stream_t *s = braid_rt_resolve_stream(ctx, stream);
  BRAID_CUDA_CHECK(ctx, cudaStreamSynchronize(s->cuda));
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_request_wait(braid_rt_request_t *request) {
  if (!request)
    return BRAID_RT_OK;
  braid_rt_context_t *ctx = request->comm->ctx;
  double wait_start_s = ctx->trace ? braid_rt_now_seconds() : 0;
  braid_rt_status_t status = braid_rt_wait_event(request);
  if (status == BRAID_RT_OK)
    status = check_tag(request);
  if (status == BRAID_RT_OK) {
    /* The host saw completion; later work on the caller's stream is ordered
       after it too, as on the blocking forms. */
    cudaError_t code =
        cudaStreamWaitEvent(request->stream->cuda, request->done, 0);
    if (code != cudaSuccess)
      status =
          braid_rt_fail_cuda(ctx, code, "cudaStreamWaitEvent", request->op);
  }
  if (status == BRAID_RT_OK && ctx->trace)
    status = trace_op(request, wait_start_s, braid_rt_now_seconds());
  unlink_pending(ctx, request);
  braid_rt_request_free(request);
  return status;
}

braid_rt_status_t braid_rt_progress(braid_rt_context_t *ctx, int *out_active) {
  if (out_active)
    *out_active = 0;
  if (!ctx)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_progress: ctx is NULL");
  /* NCCL and the copies progress on their streams by themselves. */
  if (out_active)
    *out_active = (int)(ctx->num_in_flight + ctx->num_pending);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_progress_yields(braid_rt_context_t *ctx,
                                           int *out_yields) {
  if (!ctx || !out_yields)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_progress_yields: NULL argument");
  *out_yields = 0; /* braid_rt_progress only counts */
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_request_test(braid_rt_request_t *request,
                                        int *out_done) {
  if (!request || !out_done)
    return braid_rt_fail(request ? request->comm->ctx : NULL,
                         BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_request_test: NULL argument");
  braid_rt_context_t *ctx = request->comm->ctx;
  *out_done = 0;
  /* A test asks for the transfer: issue it (and the pending sends, as a wait
     does), or it could never complete. */
  braid_rt_status_t status =
      issue_pending(ctx, request->issued ? NULL : request);
  if (status != BRAID_RT_OK)
    return status;
  cudaError_t code = cudaEventQuery(request->done);
  if (code == cudaErrorNotReady)
    return BRAID_RT_OK;
  if (code != cudaSuccess) {
    char what[256];
    describe(request, what, sizeof(what));
    return braid_rt_fail_cuda(ctx, code, "cudaEventQuery", what);
  }
  *out_done = 1;
  if (ctx->trace && request->complete_s == 0)
    request->complete_s = braid_rt_now_seconds();
  return BRAID_RT_OK;
}

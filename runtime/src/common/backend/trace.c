/*===- trace.c - Trace events of a context, on every backend -------------===*/
/*
 * trace.h on a context: begin/end events, the communication events the
 * backends record, and braid_rt_trace_write, whose four steps (lengths to
 * rank 0, whether it can take them, the texts, its outcome to everyone) go
 * through the backend's MPI calls (backend.h): the CPU backend waits for
 * them as for any collective, with the context's timeout; the CUDA backend
 * makes them blocking over its bootstrap communicator. Compiled into each
 * backend.
 */

#include "braid/rt/trace.h"

#include "internal.h"
#include "trace_events.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Records an event on ctx's trace; a message on ctx when it cannot. */
static braid_rt_status_t append(braid_rt_context_t *ctx, const char *name,
                                const char *category, char phase,
                                double start_s, double end_s) {
  braid_rt_status_t status = braid_rt_trace_events_append(
      &ctx->trace_events, name, category, phase, start_s, end_s);
  if (status != BRAID_RT_OK)
    return braid_rt_fail(ctx, status, "trace: out of memory after %zu events",
                         ctx->trace_events.count);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_trace_begin(braid_rt_context_t *ctx,
                                       const char *name, const char *category) {
  if (!ctx || !name || !category)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_trace_begin: NULL argument");
  if (!ctx->trace)
    return BRAID_RT_OK;
  double now = braid_rt_now_seconds();
  braid_rt_status_t status = append(ctx, name, category, 'B', now, now);
  if (status == BRAID_RT_OK)
    ++ctx->trace_events.open;
  return status;
}

braid_rt_status_t braid_rt_trace_end(braid_rt_context_t *ctx) {
  if (!ctx)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_trace_end: ctx is NULL");
  if (!ctx->trace)
    return BRAID_RT_OK;
  if (ctx->trace_events.open == 0)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_trace_end: no event is open");
  double now = braid_rt_now_seconds();
  braid_rt_status_t status = append(ctx, NULL, NULL, 'E', now, now);
  if (status == BRAID_RT_OK)
    --ctx->trace_events.open;
  return status;
}

braid_rt_status_t braid_rt_trace_comm(braid_rt_context_t *ctx,
                                      const braid_rt_trace_comm_t *op) {
  braid_rt_status_t status = braid_rt_trace_events_comm(&ctx->trace_events, op);
  if (status != BRAID_RT_OK)
    return braid_rt_fail(ctx, status, "trace: out of memory after %zu events",
                         ctx->trace_events.count);
  return BRAID_RT_OK;
}

size_t braid_rt_trace_event_count(const braid_rt_context_t *ctx) {
  return ctx->trace_events.count;
}

void braid_rt_trace_clear(braid_rt_context_t *ctx) {
  braid_rt_trace_events_clear(&ctx->trace_events);
}

static braid_rt_status_t write_file(braid_rt_context_t *ctx, const char *path,
                                    const char *data, size_t size) {
  char error[4352];
  braid_rt_status_t status =
      braid_rt_write_file_atomic(path, data, size, error, sizeof(error));
  if (status != BRAID_RT_OK)
    return braid_rt_fail(ctx, status, "trace_write: %s", error);
  return BRAID_RT_OK;
}

/* What rank 0 tells the others after writing. */
typedef struct {
  int status;
  char message[BRAID_RT_ERROR_CAPACITY];
} write_outcome_t;

/* Rank 0's part once it holds every rank's text: joins the pieces into one
   JSON document and writes it. */
static braid_rt_status_t join_and_write(braid_rt_context_t *ctx,
                                        const char *path, const char *gathered,
                                        const int *lengths,
                                        const int *offsets) {
  braid_rt_text_t doc = {0};
  braid_rt_text_put_str(&doc, "{\"traceEvents\":[\n");
  int first = 1;
  for (int r = 0; r < ctx->world.size; ++r) {
    if (lengths[r] == 0)
      continue;
    if (!first)
      braid_rt_text_put_str(&doc, ",\n");
    braid_rt_text_put(&doc, gathered + offsets[r], (size_t)lengths[r]);
    first = 0;
  }
  braid_rt_text_put_str(&doc, "\n],\"displayTimeUnit\":\"ms\"}\n");
  braid_rt_status_t status =
      doc.failed ? braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                                 "trace_write: out of memory on rank 0")
                 : write_file(ctx, path, doc.data, doc.size);
  free(doc.data);
  return status;
}

braid_rt_status_t braid_rt_trace_write(braid_rt_context_t *ctx,
                                       const char *path) {
  if (!ctx || !path)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_trace_write: NULL argument");
  braid_rt_text_t mine = {0};
  braid_rt_trace_events_serialize(&ctx->trace_events, ctx->world.rank, &mine);
  /* A rank out of memory still takes part, with nothing to say, so that the
     others do not wait for it. */
  int length =
      mine.failed || mine.size > (size_t)INT32_MAX ? 0 : (int)mine.size;
  int rank = ctx->world.rank, size = ctx->world.size;
  int *lengths = NULL, *offsets = NULL;
  char *gathered = NULL;
  write_outcome_t outcome = {BRAID_RT_OK, ""};
  braid_rt_status_t status;

  if (rank == 0) {
    lengths = calloc((size_t)size, sizeof(int));
    offsets = calloc((size_t)size, sizeof(int));
  }
  /* Step 1: rank 0 learns the lengths (a calloc failure surfaces as MPI's
     error on the NULL receive buffer). */
  status = braid_rt_backend_trace_gather_int(ctx, &length, lengths);
  if (status != BRAID_RT_OK)
    goto done;

  /* Step 2: rank 0 says whether it can receive everything. */
  int accept = 1;
  if (rank == 0) {
    size_t total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[r] = (int)total;
      total += (size_t)lengths[r];
    }
    gathered = total <= (size_t)INT32_MAX ? malloc(total + 1) : NULL;
    accept = gathered != NULL;
  }
  status = braid_rt_backend_trace_bcast(ctx, &accept, (int)sizeof(accept));
  if (status != BRAID_RT_OK)
    goto done;

  /* Step 3: gather the texts and write them. */
  if (accept) {
    status = braid_rt_backend_trace_gatherv(ctx, mine.data, length, gathered,
                                            lengths, offsets);
    if (status != BRAID_RT_OK)
      goto done;
    if (rank == 0)
      outcome.status = join_and_write(ctx, path, gathered, lengths, offsets);
  } else if (rank == 0) {
    outcome.status = braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                                   "trace_write: out of memory on rank 0");
  }
  if (rank == 0 && outcome.status != BRAID_RT_OK)
    snprintf(outcome.message, sizeof(outcome.message), "%s", ctx->error);

  /* Step 4: everyone returns rank 0's outcome. */
  status = braid_rt_backend_trace_bcast(ctx, &outcome, (int)sizeof(outcome));
  if (status != BRAID_RT_OK)
    goto done;
  status = (braid_rt_status_t)outcome.status;
  if (status != BRAID_RT_OK && rank != 0)
    braid_rt_fail(ctx, status, "%s (reported by rank 0)", outcome.message);
  else if (status == BRAID_RT_OK && mine.failed)
    status = braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                           "trace_write: out of memory; this rank's events "
                           "are missing from '%s'",
                           path);

done:
  free(mine.data);
  free(gathered);
  free(lengths);
  free(offsets);
  return status;
}

/*===- trace.c - Timers and Chrome trace events (CUDA backend) -----------===*/

#include "braid/rt/trace.h"

#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct braid_rt_trace_event {
  char *name;
  char *category; /* NULL for an end event */
  char phase;     /* 'B', 'E' or 'X' (complete, with a duration) */
  double ts_us, dur_us;
};

double braid_rt_now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy)
    memcpy(copy, s, n);
  return copy;
}

static braid_rt_status_t append(braid_rt_context_t *ctx, const char *name,
                                const char *category, char phase,
                                double start_s, double end_s) {
  if (ctx->num_events == ctx->events_capacity) {
    size_t capacity = ctx->events_capacity ? 2 * ctx->events_capacity : 256;
    braid_rt_trace_event_t *events =
        realloc(ctx->events, capacity * sizeof(*events));
    if (!events)
      return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                           "trace: out of memory for %zu events", capacity);
    ctx->events = events;
    ctx->events_capacity = capacity;
  }
  braid_rt_trace_event_t *e = &ctx->events[ctx->num_events];
  e->name = name ? copy_string(name) : NULL;
  e->category = category ? copy_string(category) : NULL;
  if ((name && !e->name) || (category && !e->category)) {
    free(e->name);
    free(e->category);
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY, "trace: out of memory");
  }
  e->phase = phase;
  e->ts_us = 1e6 * (start_s - ctx->trace_origin_s);
  e->dur_us = 1e6 * (end_s - start_s);
  ++ctx->num_events;
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
    ++ctx->open_events;
  return status;
}

braid_rt_status_t braid_rt_trace_end(braid_rt_context_t *ctx) {
  if (!ctx)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_trace_end: ctx is NULL");
  if (!ctx->trace)
    return BRAID_RT_OK;
  if (ctx->open_events == 0)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_trace_end: no event is open");
  double now = braid_rt_now_seconds();
  braid_rt_status_t status = append(ctx, NULL, NULL, 'E', now, now);
  if (status == BRAID_RT_OK)
    --ctx->open_events;
  return status;
}

braid_rt_status_t braid_rt_trace_complete(braid_rt_context_t *ctx,
                                          const char *name,
                                          const char *category, double start_s,
                                          double end_s) {
  return append(ctx, name, category, 'X', start_s, end_s);
}

size_t braid_rt_trace_event_count(const braid_rt_context_t *ctx) {
  return ctx->num_events;
}

void braid_rt_trace_clear(braid_rt_context_t *ctx) {
  for (size_t i = 0; i < ctx->num_events; ++i) {
    free(ctx->events[i].name);
    free(ctx->events[i].category);
  }
  free(ctx->events);
  ctx->events = NULL;
  ctx->num_events = ctx->events_capacity = 0;
}

/* A growable string; `failed` sticks once an allocation fails. */
typedef struct {
  char *data;
  size_t size, capacity;
  int failed;
} text_t;

static void put(text_t *t, const char *s, size_t n) {
  if (t->failed)
    return;
  if (t->size + n + 1 > t->capacity) {
    size_t capacity = t->capacity ? t->capacity : 4096;
    while (t->size + n + 1 > capacity)
      capacity *= 2;
    char *data = realloc(t->data, capacity);
    if (!data) {
      t->failed = 1;
      return;
    }
    t->data = data;
    t->capacity = capacity;
  }
  memcpy(t->data + t->size, s, n);
  t->size += n;
  t->data[t->size] = '\0';
}

static void put_str(text_t *t, const char *s) { put(t, s, strlen(s)); }

/* Writes `s` as a JSON string literal. */
static void put_json_string(text_t *t, const char *s) {
  put(t, "\"", 1);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char escaped[2] = {'\\', (char)c};
      put(t, escaped, 2);
    } else if (c < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      put_str(t, escaped);
    } else {
      put(t, (const char *)&c, 1);
    }
  }
  put(t, "\"", 1);
}

/* This rank's events as comma-separated JSON objects, each on a line. */
static void serialize_events(const braid_rt_context_t *ctx, text_t *t) {
  int pid = ctx->world.rank;
  char buf[160];
  snprintf(buf, sizeof(buf),
           "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
           "\"args\":{\"name\":\"rank %d\"}}",
           pid, pid);
  put_str(t, buf);
  for (size_t i = 0; i < ctx->num_events; ++i) {
    const braid_rt_trace_event_t *e = &ctx->events[i];
    put_str(t, ",\n{");
    if (e->name) {
      put_str(t, "\"name\":");
      put_json_string(t, e->name);
      put_str(t, ",\"cat\":");
      put_json_string(t, e->category);
      put_str(t, ",");
    }
    snprintf(buf, sizeof(buf), "\"ph\":\"%c\",\"ts\":%.3f,", e->phase,
             e->ts_us);
    put_str(t, buf);
    if (e->phase == 'X') {
      snprintf(buf, sizeof(buf), "\"dur\":%.3f,", e->dur_us);
      put_str(t, buf);
    }
    snprintf(buf, sizeof(buf), "\"pid\":%d,\"tid\":0}", pid);
    put_str(t, buf);
  }
}

static braid_rt_status_t write_file(braid_rt_context_t *ctx, const char *path,
                                    const char *data, size_t size) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "trace_write: path '%s' is too long", path);
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return braid_rt_fail(ctx, BRAID_RT_IO_ERROR,
                         "trace_write: cannot create '%s': %s", tmp,
                         strerror(errno));
  int ok = fwrite(data, 1, size, f) == size;
  int saved_errno = errno;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    saved_errno = ok ? errno : saved_errno;
    remove(tmp);
    return braid_rt_fail(ctx, BRAID_RT_IO_ERROR,
                         "trace_write: cannot write '%s': %s", path,
                         strerror(saved_errno));
  }
  return BRAID_RT_OK;
}

/* trace_write's steps run over MPI, which the CUDA backend keeps for its
   bootstrap: a few small messages once per run, blocking. */
static braid_rt_status_t mpi_step(braid_rt_context_t *ctx, int code,
                                  const char *call) {
  return code == MPI_SUCCESS
             ? BRAID_RT_OK
             : braid_rt_fail_mpi(ctx, code, call, "braid_rt_trace_write");
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
  text_t doc = {0};
  put_str(&doc, "{\"traceEvents\":[\n");
  int first = 1;
  for (int r = 0; r < ctx->world.size; ++r) {
    if (lengths[r] == 0)
      continue;
    if (!first)
      put_str(&doc, ",\n");
    put(&doc, gathered + offsets[r], (size_t)lengths[r]);
    first = 0;
  }
  put_str(&doc, "\n],\"displayTimeUnit\":\"ms\"}\n");
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
  text_t mine = {0};
  serialize_events(ctx, &mine);
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
  status = mpi_step(
      ctx, MPI_Gather(&length, 1, MPI_INT, lengths, 1, MPI_INT, 0, ctx->mpi),
      "MPI_Gather");
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
  status =
      mpi_step(ctx, MPI_Bcast(&accept, 1, MPI_INT, 0, ctx->mpi), "MPI_Bcast");
  if (status != BRAID_RT_OK)
    goto done;

  /* Step 3: gather the texts and write them. */
  if (accept) {
    status = mpi_step(ctx,
                      MPI_Gatherv(mine.data, length, MPI_CHAR, gathered,
                                  lengths, offsets, MPI_CHAR, 0, ctx->mpi),
                      "MPI_Gatherv");
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
  status = mpi_step(
      ctx, MPI_Bcast(&outcome, (int)sizeof(outcome), MPI_BYTE, 0, ctx->mpi),
      "MPI_Bcast");
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

/*===- trace_events.c - Trace events shared by the backends -------------===*/

#include "trace_events.h"

#include "braid/rt/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Appends an event owning a copy of name, category and args (each may be
   NULL). */
static braid_rt_status_t append(braid_rt_trace_events_t *t, const char *name,
                                const char *category, const char *args,
                                char phase, double start_s, double end_s) {
  if (t->count == t->capacity) {
    size_t capacity = t->capacity ? 2 * t->capacity : 256;
    braid_rt_trace_event_t *events =
        realloc(t->events, capacity * sizeof(*events));
    if (!events)
      return BRAID_RT_OUT_OF_MEMORY;
    t->events = events;
    t->capacity = capacity;
  }
  braid_rt_trace_event_t *e = &t->events[t->count];
  e->name = name ? copy_string(name) : NULL;
  e->category = category ? copy_string(category) : NULL;
  e->args = args ? copy_string(args) : NULL;
  if ((name && !e->name) || (category && !e->category) || (args && !e->args)) {
    free(e->name);
    free(e->category);
    free(e->args);
    return BRAID_RT_OUT_OF_MEMORY;
  }
  e->phase = phase;
  e->id = phase == 'b' ? t->spans++ : 0;
  e->ts_us = 1e6 * (start_s - t->origin_s);
  e->dur_us = 1e6 * (end_s - start_s);
  ++t->count;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_trace_events_append(braid_rt_trace_events_t *t,
                                               const char *name,
                                               const char *category, char phase,
                                               double start_s, double end_s) {
  return append(t, name, category, NULL, phase, start_s, end_s);
}

void braid_rt_trace_events_clear(braid_rt_trace_events_t *t) {
  for (size_t i = 0; i < t->count; ++i) {
    free(t->events[i].name);
    free(t->events[i].category);
    free(t->events[i].args);
  }
  free(t->events);
  t->events = NULL;
  t->count = t->capacity = 0;
}

void braid_rt_text_put(braid_rt_text_t *t, const char *s, size_t n) {
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

void braid_rt_text_put_str(braid_rt_text_t *t, const char *s) {
  braid_rt_text_put(t, s, strlen(s));
}

/* Writes `s` as a JSON string literal. */
static void put_json_string(braid_rt_text_t *t, const char *s) {
  braid_rt_text_put(t, "\"", 1);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char escaped[2] = {'\\', (char)c};
      braid_rt_text_put(t, escaped, 2);
    } else if (c < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      braid_rt_text_put_str(t, escaped);
    } else {
      braid_rt_text_put(t, (const char *)&c, 1);
    }
  }
  braid_rt_text_put(t, "\"", 1);
}

braid_rt_status_t braid_rt_trace_events_comm(braid_rt_trace_events_t *t,
                                             const braid_rt_trace_comm_t *op) {
  braid_rt_text_t args = {0};
  char buf[96];
  braid_rt_text_put_str(&args, "{\"over\":");
  put_json_string(&args, op->over);
  if (op->dtype) {
    braid_rt_text_put_str(&args, ",\"dtype\":");
    put_json_string(&args, op->dtype);
    snprintf(buf, sizeof(buf), ",\"count\":%zu", op->count);
    braid_rt_text_put_str(&args, buf);
  }
  if (op->peer >= 0) {
    snprintf(buf, sizeof(buf), ",\"peer\":%d,\"tag\":%d", op->peer, op->tag);
    braid_rt_text_put_str(&args, buf);
  }
  if (op->has_bytes) {
    snprintf(buf, sizeof(buf), ",\"bytes\":%zu,\"wire_bytes\":%zu", op->bytes,
             op->wire_bytes);
    braid_rt_text_put_str(&args, buf);
  }
  if (op->within) {
    braid_rt_text_put_str(&args, ",\"within\":");
    put_json_string(&args, op->within);
  }
  braid_rt_text_put_str(&args, "}");
  braid_rt_text_t start = {0};
  braid_rt_text_put_str(&start, op->name);
  braid_rt_text_put_str(&start, " start");
  size_t before = t->count;
  braid_rt_status_t status =
      args.failed || start.failed ? BRAID_RT_OUT_OF_MEMORY : BRAID_RT_OK;
  if (status == BRAID_RT_OK && op->issue_end_s > 0)
    status =
        append(t, start.data, "comm", NULL, 'X', op->issue_s, op->issue_end_s);
  if (status == BRAID_RT_OK)
    status = append(t, op->name, "comm", NULL, 'X', op->wait_start_s,
                    op->wait_end_s);
  if (status == BRAID_RT_OK)
    status = append(t, op->name, "comm_in_flight", args.data, 'b', op->issue_s,
                    op->complete_s);
  /* All or none. */
  while (status != BRAID_RT_OK && t->count > before) {
    braid_rt_trace_event_t *e = &t->events[--t->count];
    free(e->name);
    free(e->category);
    free(e->args);
  }
  free(args.data);
  free(start.data);
  return status;
}

size_t braid_rt_ring_chunk_begin(size_t count, int size, int c) {
  size_t rest = count % (size_t)size;
  return count / (size_t)size * (size_t)c +
         ((size_t)c < rest ? (size_t)c : rest);
}

size_t braid_rt_ring_chunk_length(size_t count, int size, int c) {
  return braid_rt_ring_chunk_begin(count, size, c + 1) -
         braid_rt_ring_chunk_begin(count, size, c);
}

size_t braid_rt_ring_sent(braid_rt_ring_kind_t kind, size_t count, int rank,
                          int size, int root) {
  if (size <= 1)
    return 0;
  switch (kind) {
  case BRAID_RT_RING_ALL_REDUCE:
    return 2 * count - braid_rt_ring_chunk_length(count, size, rank) -
           braid_rt_ring_chunk_length(count, size, (rank + 1) % size);
  case BRAID_RT_RING_ALL_GATHER:
  case BRAID_RT_RING_REDUCE_SCATTER:
    return (size_t)(size - 1) * count;
  case BRAID_RT_RING_BROADCAST:
    return (rank - root + size) % size == size - 1 ? 0 : count;
  }
  return 0;
}

/* Writes one event object (without the separator before it). */
static void put_event(braid_rt_text_t *out, const braid_rt_trace_event_t *e,
                      char phase, double ts_us, int pid) {
  char buf[160];
  braid_rt_text_put_str(out, "{");
  if (e->name) {
    braid_rt_text_put_str(out, "\"name\":");
    put_json_string(out, e->name);
    braid_rt_text_put_str(out, ",\"cat\":");
    put_json_string(out, e->category);
    braid_rt_text_put_str(out, ",");
  }
  snprintf(buf, sizeof(buf), "\"ph\":\"%c\",\"ts\":%.3f,", phase, ts_us);
  braid_rt_text_put_str(out, buf);
  if (phase == 'X') {
    snprintf(buf, sizeof(buf), "\"dur\":%.3f,", e->dur_us);
    braid_rt_text_put_str(out, buf);
  }
  /* Process-local ids: every rank numbers its spans from 0. */
  if (phase == 'b' || phase == 'e') {
    snprintf(buf, sizeof(buf), "\"id2\":{\"local\":\"0x%llx\"},", e->id);
    braid_rt_text_put_str(out, buf);
  }
  if (e->args && phase != 'e') {
    braid_rt_text_put_str(out, "\"args\":");
    braid_rt_text_put_str(out, e->args);
    braid_rt_text_put_str(out, ",");
  }
  snprintf(buf, sizeof(buf), "\"pid\":%d,\"tid\":0}", pid);
  braid_rt_text_put_str(out, buf);
}

void braid_rt_trace_events_serialize(const braid_rt_trace_events_t *t, int pid,
                                     braid_rt_text_t *out) {
  char buf[160];
  snprintf(buf, sizeof(buf),
           "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
           "\"args\":{\"name\":\"rank %d\"}}",
           pid, pid);
  braid_rt_text_put_str(out, buf);
  for (size_t i = 0; i < t->count; ++i) {
    const braid_rt_trace_event_t *e = &t->events[i];
    braid_rt_text_put_str(out, ",\n");
    put_event(out, e, e->phase, e->ts_us, pid);
    /* A span's end, with the same name, category and id. */
    if (e->phase == 'b') {
      braid_rt_text_put_str(out, ",\n");
      put_event(out, e, 'e', e->ts_us + e->dur_us, pid);
    }
  }
}

braid_rt_status_t braid_rt_write_file_atomic(const char *path,
                                             const char *data, size_t size,
                                             char *error, size_t error_size) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
    snprintf(error, error_size, "path '%s' is too long", path);
    return BRAID_RT_INVALID_ARGUMENT;
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    snprintf(error, error_size, "cannot create '%s': %s", tmp,
             strerror(errno));
    return BRAID_RT_IO_ERROR;
  }
  int ok = fwrite(data, 1, size, f) == size;
  int saved_errno = errno;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    saved_errno = ok ? errno : saved_errno;
    remove(tmp);
    snprintf(error, error_size, "cannot write '%s': %s", path,
             strerror(saved_errno));
    return BRAID_RT_IO_ERROR;
  }
  return BRAID_RT_OK;
}

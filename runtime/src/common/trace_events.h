/*===- trace_events.h - Trace events shared by the backends -------------===*/
/*
 * Internal to the runtime: the part of trace.h's events that does not
 * depend on the backend (recording, JSON text, the atomic file write), so
 * that the CPU and CUDA backends differ only in how the ranks' events are
 * gathered for braid_rt_trace_write.
 */
#ifndef BRAID_RT_COMMON_TRACE_EVENTS_H
#define BRAID_RT_COMMON_TRACE_EVENTS_H

#include "braid/rt/status.h"

#include <stddef.h>

struct braid_rt_trace_event {
  char *name;
  char *category; /* NULL for an end event */
  char *args;     /* a JSON object's text, or NULL */
  /* 'B', 'E', 'X' (complete, with a duration) or 'b' (an asynchronous span
     with a duration, written as a "b"/"e" pair with process-local id `id`) */
  char phase;
  unsigned long long id;
  double ts_us, dur_us;
};
typedef struct braid_rt_trace_event braid_rt_trace_event_t;

/* One rank's events, times relative to origin_s; `open` counts 'B' events
   not yet ended; `spans` numbers the asynchronous spans. */
typedef struct {
  braid_rt_trace_event_t *events;
  size_t count, capacity;
  int open;
  unsigned long long spans;
  double origin_s;
} braid_rt_trace_events_t;

/* Appends an event (copying name and category; NULL for an end event).
   OUT_OF_MEMORY, with nothing appended, when it cannot. */
braid_rt_status_t braid_rt_trace_events_append(braid_rt_trace_events_t *t,
                                               const char *name,
                                               const char *category,
                                               char phase, double start_s,
                                               double end_s);

/* One communication operation as the trace records it (times from
   braid_rt_now_seconds). */
typedef struct {
  const char *name;  /* "all_reduce" */
  const char *over;  /* the communicator's name */
  const char *dtype; /* "f32"; NULL: no count either */
  size_t count;
  int peer, tag; /* peer -1: a collective, without either */
  /* With has_bytes: `bytes`, the operation's payload on this rank (the
     larger of what it hands in and gets back: an all_reduce's buffer, a
     reduce_scatter's input, an all_gather's result, a message), and
     `wire_bytes`, what this rank sends for it under the algorithm that moves
     it (braid_rt_ring_sent below for MPI's collectives; the messages it
     posts for a sum the runtime runs itself); both written as arguments.
     `within` (NULL: none) names the operation this one is a step of, whose
     own event counts these bytes again: a reader summing bytes skips it. */
  int has_bytes;
  size_t bytes, wire_bytes;
  const char *within;
  /* In flight from its issue to the first time the rank saw it complete;
     the rank waited for it (in a blocking call or a wait) from wait_start_s
     to wait_end_s. A blocking call waits from its issue; a started one's
     _start call returned at issue_end_s (0: blocking). */
  double issue_s, complete_s, wait_start_s, wait_end_s, issue_end_s;
} braid_rt_trace_comm_t;

/* Records `op`: a started one's _start call as a complete event "<name>
   start" and its wait as a complete event "<name>", both in category
   "comm" (time the rank spent in communication calls), and its flight as an
   asynchronous span in category "comm_in_flight" (its own track in Chrome
   and Perfetto, since flights overlap each other and the compute), with the
   communicator, type, count and peer as arguments. All or, when out of
   memory, none. */
braid_rt_status_t braid_rt_trace_events_comm(braid_rt_trace_events_t *t,
                                             const braid_rt_trace_comm_t *op);

/* The collectives whose bytes on the wire braid_rt_ring_sent models. */
typedef enum {
  BRAID_RT_RING_ALL_REDUCE,
  BRAID_RT_RING_ALL_GATHER,     /* and all_to_all: count is one block */
  BRAID_RT_RING_REDUCE_SCATTER, /* count is the result's */
  BRAID_RT_RING_BROADCAST,
} braid_rt_ring_kind_t;

/* A ring's cut of `count` elements into `size` chunks, the first
   count % size of them one element longer: chunk c (0..size-1) starts at
   element braid_rt_ring_chunk_begin(count, size, c) and has
   braid_rt_ring_chunk_length(count, size, c) elements (begin of `size` is
   `count`). The CPU backend's 16-bit ring (compressed.c) cuts its buffer
   so, and braid_rt_ring_sent counts an all_reduce's chunks so. */
size_t braid_rt_ring_chunk_begin(size_t count, int size, int c);
size_t braid_rt_ring_chunk_length(size_t count, int size, int c);

/* The elements rank `rank` of `size` sends in a ring (Patarasuk and Yuan)
   over `count` elements, as the 16-bit compressed sums run it and as the
   comm report models MPI's collectives (MPI picks its own algorithm,
   which may send more than this bandwidth-optimal figure). An
   all_reduce cuts its buffer into `size` chunks, the first count % size of
   them one element longer, and sends all but its own chunk in the
   reduce-scatter half and all but the next rank's in the all-gather half:
   2 count minus those two, 2(size-1)/size count on average over the ranks,
   exactly. all_gather, all_to_all and reduce_scatter send (size-1) blocks;
   broadcast is a chain from `root`, on which every rank but the last
   forwards the whole buffer. 0 on one rank. */
size_t braid_rt_ring_sent(braid_rt_ring_kind_t kind, size_t count, int rank,
                          int size, int root);

/* Releases the events (the origin stays). */
void braid_rt_trace_events_clear(braid_rt_trace_events_t *t);

/* A growable string; `failed` sticks once an allocation fails. */
typedef struct {
  char *data;
  size_t size, capacity;
  int failed;
} braid_rt_text_t;

void braid_rt_text_put(braid_rt_text_t *t, const char *s, size_t n);
void braid_rt_text_put_str(braid_rt_text_t *t, const char *s);

/* The events of rank `pid` as comma-separated Chrome trace JSON objects,
   one per line, after a process_name record. */
void braid_rt_trace_events_serialize(const braid_rt_trace_events_t *t, int pid,
                                     braid_rt_text_t *out);

/* Writes `size` bytes to `path` through `path`.tmp and a rename, so that a
   reader never sees half a file. On failure, a message in `error`. */
braid_rt_status_t braid_rt_write_file_atomic(const char *path,
                                             const char *data, size_t size,
                                             char *error, size_t error_size);

#endif /* BRAID_RT_COMMON_TRACE_EVENTS_H */

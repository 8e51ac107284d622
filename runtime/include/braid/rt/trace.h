/*===- trace.h - Timers and Chrome trace events --------------------------===*/
/*
 * With tracing on (braid_rt_context_options_t.trace), each rank records
 * begin/end events and, per communication operation, two: the span the rank
 * waited for it (a complete event in category "comm": a blocking call from
 * its issue to its return, a started one inside braid_rt_request_wait), and
 * its flight from its issue to the first time the rank saw it complete (an
 * asynchronous "b"/"e" pair in category "comm_in_flight", with a
 * process-local id and the communicator, type, count and peer as args, and
 * on the CPU backend "bytes", its payload, and "wire_bytes", what the rank
 * sent for it; "within" names the operation one is a step of, which counts
 * its bytes: docs/runtime.md).
 * In-flight time outside the wait is communication the rank did not wait
 * for. braid_rt_trace_write gathers the events into one Chrome trace event
 * file (chrome://tracing, Perfetto) with pid = rank.
 * Timestamps are microseconds since context creation, which ends with a
 * barrier, so that ranks line up to within the barrier's skew.
 */
#ifndef BRAID_RT_TRACE_H
#define BRAID_RT_TRACE_H

#include "braid/rt/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on a monotonic clock with an arbitrary origin. Thread-safe. */
double braid_rt_now_seconds(void);

/* Opens / closes an event called `name` in `category` (both copied; "name"
   may contain any characters). Events nest; each end closes the innermost
   open begin. No-ops returning OK when tracing is off. Thread-compatible. */
braid_rt_status_t braid_rt_trace_begin(braid_rt_context_t *ctx,
                                       const char *name, const char *category);
braid_rt_status_t braid_rt_trace_end(braid_rt_context_t *ctx);

/* The number of events this rank has recorded. */
size_t braid_rt_trace_event_count(const braid_rt_context_t *ctx);

/* Gathers every rank's events to rank 0, which writes them to `path` (via
   path.tmp and a rename, so that a reader never sees half a file). The
   events stay recorded. Collective over all ranks; every rank returns rank
   0's status. */
braid_rt_status_t braid_rt_trace_write(braid_rt_context_t *ctx,
                                       const char *path);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_TRACE_H */

/*===- trace_test.c - Trace events from every rank in one Chrome file ----===*/
/*
 * Each rank records nested begin/end events (one name needing JSON escapes),
 * a blocking all_reduce and a started one that completes (by progress
 * calls) during 2 ms of compute before its wait; rank 0 then reads the
 * written file back and checks that it is one JSON object holding every
 * rank's events with its rank as pid, that each all_reduce has its wait
 * ("comm") and its flight ("comm_in_flight" b/e pair): the blocking one's
 * coincide, the started one's flight begins with its start call ("comm"),
 * at least 2 ms before its wait, and ends before the wait; that the temporary
 * file is gone, and that an unwritable path fails on every rank with IO_ERROR
 * naming the path.
 */

#include "test_util.h"

#include "braid/rt/trace.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* The timestamp and duration (0 when none) of the event object on the line
   after `after` containing `needle`; NULL when there is none. */
static const char *find_event(const char *after, const char *needle, double *ts,
                              double *dur) {
  const char *hit = strstr(after, needle);
  if (!hit)
    return NULL;
  const char *line = hit;
  while (line > after && line[-1] != '\n')
    --line;
  const char *t = strstr(line, "\"ts\":"), *d = strstr(line, "\"dur\":");
  const char *end = strchr(hit, '\n');
  CHECK(t && (!end || t < end), "no ts in %.120s", line);
  *ts = atof(t + 5);
  *dur = d && (!end || d < end) ? atof(d + 6) : 0;
  return end ? end : hit + strlen(hit);
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    ++n;
  return n;
}

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  opts.trace = 1;
  CHECK_OK(braid_rt_context_create(&opts, &argc, &argv, &test_ctx));
  int rank = braid_rt_context_rank(test_ctx);
  int size = braid_rt_context_size(test_ctx);

  CHECK_FAILS(test_ctx, braid_rt_trace_end(test_ctx),
              BRAID_RT_INVALID_ARGUMENT, "no event is open");
  CHECK_OK(braid_rt_trace_begin(test_ctx, "step", "train"));
  CHECK_OK(braid_rt_trace_begin(test_ctx, "say \"hi\"\\\n", "compute"));
  struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
  CHECK_OK(braid_rt_trace_end(test_ctx));
  float x = 1;
  CHECK_OK(braid_rt_all_reduce_sum_f32(braid_rt_context_world(test_ctx), &x, 1,
                                       NULL));
  /* A started all_reduce, moved by progress calls during 2 ms of compute
     (the sleeps), so that it completes before its wait begins. */
  braid_rt_request_t *req;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(braid_rt_context_world(test_ctx),
                                             &x, 1, NULL, &req));
  nanosleep(&ms, NULL);
  nanosleep(&ms, NULL);
  double waited_s = braid_rt_now_seconds();
  for (int active = 1; active;) {
    CHECK_OK(braid_rt_progress(test_ctx, &active));
    CHECK(braid_rt_now_seconds() - waited_s < 30, "not done after 30 s");
  }
  nanosleep(&ms, NULL);
  CHECK_OK(braid_rt_request_wait(req));
  CHECK(x == (float)(size * size), "sum %g", x);
  CHECK_OK(braid_rt_trace_end(test_ctx));
  /* 2 B, 2 E, per all_reduce its wait and its flight, and the started
     one's start call. */
  CHECK(braid_rt_trace_event_count(test_ctx) == 9, "%zu events",
        braid_rt_trace_event_count(test_ctx));

  /* The test's working directory is the build tree; the path is shared by
     all ranks, which run on this machine. */
  char path[256];
  snprintf(path, sizeof(path), "trace_test_np%d.json", size);
  CHECK_OK(braid_rt_trace_write(test_ctx, path));
  if (rank == 0) {
    char *text = read_file(path);
    size_t len = strlen(text);
    CHECK(strncmp(text, "{\"traceEvents\":[", 16) == 0 &&
              strcmp(text + len - 3, "}\n") != 0 &&
              strcmp(text + len - 2, "}\n") == 0,
          "not one JSON object: %.40s ... %s", text, text + len - 3);
    CHECK(count(text, "\"ph\":\"B\"") == 2 * size, "B events");
    CHECK(count(text, "\"ph\":\"E\"") == 2 * size, "E events");
    CHECK(
        count(text, "\"name\":\"all_reduce\",\"cat\":\"comm\",\"ph\":\"X\"") ==
            2 * size,
        "all_reduce waits");
    CHECK(count(text, "\"name\":\"all_reduce start\",\"cat\":\"comm\","
                      "\"ph\":\"X\"") == size,
          "all_reduce starts");
    CHECK(count(text, "\"name\":\"all_reduce\",\"cat\":\"comm_in_flight\","
                      "\"ph\":\"b\"") == 2 * size,
          "all_reduce flights begun");
    CHECK(count(text, "\"name\":\"all_reduce\",\"cat\":\"comm_in_flight\","
                      "\"ph\":\"e\"") == 2 * size,
          "all_reduce flights ended");
    CHECK(count(text, "\"args\":{\"over\":\"world\",\"dtype\":\"f32\","
                      "\"count\":1,\"bytes\":4,\"wire_bytes\":") == 2 * size,
          "flight args");
    /* Rank 0's events come first, in the order recorded: the blocking
       all_reduce's wait and flight, then the started one's start call,
       wait and flight. */
    double wait_ts, wait_dur, begin_ts, end_ts, start_ts, start_dur, unused;
    const char *at = text;
    at = find_event(at, "\"cat\":\"comm\",\"ph\":\"X\"", &wait_ts, &wait_dur);
    CHECK(at, "no blocking wait");
    at = find_event(at, "\"ph\":\"b\"", &begin_ts, &unused);
    CHECK(at, "no blocking flight");
    at = find_event(at, "\"ph\":\"e\"", &end_ts, &unused);
    CHECK(at, "no blocking flight end");
    CHECK(begin_ts == wait_ts && end_ts - (wait_ts + wait_dur) < 0.002 &&
              end_ts - (wait_ts + wait_dur) > -0.002,
          "blocking: wait %.3f + %.3f, flight %.3f .. %.3f", wait_ts, wait_dur,
          begin_ts, end_ts);
    at = find_event(at, "\"name\":\"all_reduce start\"", &start_ts, &start_dur);
    CHECK(at, "no start call");
    at = find_event(at, "\"cat\":\"comm\",\"ph\":\"X\"", &wait_ts, &wait_dur);
    CHECK(at, "no started wait");
    at = find_event(at, "\"ph\":\"b\"", &begin_ts, &unused);
    CHECK(at, "no started flight");
    at = find_event(at, "\"ph\":\"e\"", &end_ts, &unused);
    CHECK(at, "no started flight end");
    CHECK(wait_ts - begin_ts >= 2000 && end_ts <= wait_ts &&
              end_ts > begin_ts && start_ts == begin_ts &&
              start_ts + start_dur <= wait_ts - 2000,
          "started: start %.3f + %.3f, wait %.3f + %.3f, flight %.3f .. %.3f",
          start_ts, start_dur, wait_ts, wait_dur, begin_ts, end_ts);
    CHECK(count(text, "\"name\":\"say \\\"hi\\\"\\\\\\u000a\"") == size,
          "escaped names");
    for (int r = 0; r < size; ++r) {
      char pid[32];
      snprintf(pid, sizeof(pid), "\"pid\":%d,", r);
      CHECK(count(text, pid) == 12,
            "rank %d has %d events, expected 12 "
            "(9, 2 flight ends and its process name)",
            r, count(text, pid));
    }
    char tmp[300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0, "'%s' left behind", tmp);
    free(text);
    remove(path);
  }

  CHECK_FAILS(test_ctx,
              braid_rt_trace_write(test_ctx, "no-such-dir/trace.json"),
              BRAID_RT_IO_ERROR,
              "cannot create 'no-such-dir/trace.json.tmp'");
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}

/*===- trace_test.c - Trace events from every rank in one Chrome file ----===*/
/*
 * Each rank records nested begin/end events (one name needing JSON escapes)
 * and a traced all_reduce; rank 0 then reads the written file back and
 * checks that it is one JSON object holding every rank's events with its
 * rank as pid, that the temporary file is gone, and that an unwritable path
 * fails on every rank with IO_ERROR naming the path.
 */

#include "test_util.h"

#include "braid/rt/trace.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL, "cannot open '%s'", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  CHECK(text && fread(text, 1, (size_t)size, f) == (size_t)size, "read");
  text[size] = '\0';
  fclose(f);
  return text;
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
  CHECK_OK(braid_rt_trace_end(test_ctx));
  CHECK(braid_rt_trace_event_count(test_ctx) == 5, "%zu events",
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
    CHECK(count(text, "\"name\":\"all_reduce\",\"cat\":\"comm\",\"ph\":\"X\"") ==
              size,
          "all_reduce events");
    CHECK(count(text, "\"name\":\"say \\\"hi\\\"\\\\\\u000a\"") == size,
          "escaped names");
    for (int r = 0; r < size; ++r) {
      char pid[32];
      snprintf(pid, sizeof(pid), "\"pid\":%d,", r);
      CHECK(count(text, pid) == 6, "rank %d has %d events, expected 6 "
            "(5 and its process name)", r, count(text, pid));
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

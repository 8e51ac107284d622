/*===- test_util.h - Checks shared by the runtime's MPI tests ------------===*/
/*
 * A failed check prints the rank, the place and the reason, then ends every
 * rank with exit code 1 (an exit() on one rank would leave the others
 * waiting in their next collective).
 */
#ifndef BRAID_RT_TEST_UTIL_H
#define BRAID_RT_TEST_UTIL_H

#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/init.h"
#include "braid/rt/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static braid_rt_context_t *test_ctx;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ",                    \
              test_ctx ? braid_rt_context_rank(test_ctx) : -1, __FILE__,       \
              __LINE__, #cond);                                                \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      fflush(stderr);                                                          \
      braid_rt_context_abort(test_ctx, 1);                                     \
    }                                                                          \
  } while (0)

#define CHECK_OK(call)                                                         \
  do {                                                                         \
    braid_rt_status_t check_status_ = (call);                                  \
    CHECK(check_status_ == BRAID_RT_OK, "%s: %s",                              \
          braid_rt_status_string(check_status_),                               \
          braid_rt_context_last_error(test_ctx));                              \
  } while (0)

/* Checks that `call` fails with `expected` and a message containing
   `fragment` (in ctx's buffer, or the context-less one when ctx is NULL). */
#define CHECK_FAILS(ctx, call, expected, fragment)                             \
  do {                                                                         \
    braid_rt_status_t check_status_ = (call);                                  \
    const char *check_message_ = braid_rt_context_last_error(ctx);             \
    CHECK(check_status_ == (expected), "got %s (%s), expected %s",             \
          braid_rt_status_string(check_status_), check_message_,               \
          braid_rt_status_string(expected));                                   \
    CHECK(strstr(check_message_, (fragment)) != NULL,                          \
          "message '%s' lacks '%s'", check_message_, (fragment));              \
  } while (0)

/* Input element i of world rank `rank` under `seed`: a multiple of 1/8 in
   [-64, 64), so that sums of a few thousand are exact in f32 in any order
   and a result can be compared with ==. */
static inline double test_value(uint64_t seed, int rank, size_t i) {
  uint64_t bits = braid_rt_splitmix64(seed ^ braid_rt_splitmix64(
                                                 ((uint64_t)rank << 40) + i));
  return (double)((int64_t)(bits % 1024) - 512) / 8.0;
}

/* The whole of the file at `path`, NUL-terminated, in malloc'd memory (the
   caller frees it); a file that cannot be opened or read fails the check. */
static inline char *read_file(const char *path) {
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

#endif /* BRAID_RT_TEST_UTIL_H */

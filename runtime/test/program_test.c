/*===- program_test.c - The program runtime without a mesh ---------------===*/
/*
 * braid_rt_program as a single-device program links it (no MPI): flags,
 * buffers, initial values and errors. Without arguments it checks what
 * returns; `flag NAME VALUE MIN MAX` parses one flag as a generated main()
 * does (status 2 when refused), `bad-id` and `bad-status` end as a failing
 * program does: ctest checks their status and message with expect_exit.
 */

#include "braid/rt/program.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__,        \
              #cond);                                                          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static void test_flags(void) {
  struct {
    const char *text;
    uint64_t min, max;
    int ok;
    uint64_t value;
  } cases[] = {
      {"0", 0, UINT64_MAX, 1, 0},
      {"42", 0, INT64_MAX, 1, 42},
      {"18446744073709551615", 0, UINT64_MAX, 1, UINT64_MAX},
      {"18446744073709551616", 0, UINT64_MAX, 0, 0}, /* overflow */
      {"9223372036854775808", 0, INT64_MAX, 0, 0},   /* above max */
      {"2", 2, 4, 1, 2},
      {"4", 2, 4, 1, 4},
      {"5", 2, 4, 0, 0},
      {"1", 2, 4, 0, 0},
      {"", 0, 10, 0, 0},
      {"-1", 0, 10, 0, 0},
      {"+1", 0, 10, 0, 0},
      {" 1", 0, 10, 0, 0},
      {"2abc", 0, 10, 0, 0},
      {"0x10", 0, 100, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    uint64_t out = 12345;
    int ok = braid_rt_program_parse_flag("--test", cases[i].text, cases[i].min,
                                         cases[i].max, &out);
    EXPECT(ok == cases[i].ok, "'%s' in [%llu, %llu]: got %d", cases[i].text,
           (unsigned long long)cases[i].min, (unsigned long long)cases[i].max,
           ok);
    EXPECT(out == (ok ? cases[i].value : 12345),
           "'%s': value %llu (a refused value must not be stored)",
           cases[i].text, (unsigned long long)out);
  }
}

static void test_buffers(void) {
  size_t sizes[] = {0, 1, 100, 4099};
  for (size_t i = 0; i < 4; ++i) {
    unsigned char *p = (unsigned char *)braid_rt_program_alloc(sizes[i]);
    EXPECT(p && (uintptr_t)p % BRAID_RT_MEMORY_ALIGNMENT == 0,
           "alloc(%zu) at %p", sizes[i], (void *)p);
    size_t zeroed = 0;
    while (zeroed < (sizes[i] ? sizes[i] : 1) && p[zeroed] == 0)
      ++zeroed;
    EXPECT(zeroed == (sizes[i] ? sizes[i] : 1), "alloc(%zu): byte %zu is %d",
           sizes[i], zeroed, p[zeroed]);
    braid_rt_program_free(p);
  }
  /* A reused block must come back zeroed too: dirty one, free it, and
     allocate the same size again (malloc hands the block back). */
  for (int round = 0; round < 2; ++round) {
    unsigned char *p = (unsigned char *)braid_rt_program_alloc(100);
    size_t nonzero = 0;
    for (size_t i = 0; i < 100; ++i)
      nonzero += p[i] != 0;
    EXPECT(nonzero == 0, "round %d: %zu bytes not zeroed", round, nonzero);
    memset(p, 0xAB, 100);
    braid_rt_program_free(p);
  }
  float *site = NULL;
  float *first = braid_rt_program_buffer_f32(&site, 10);
  first[3] = 7.0f;
  EXPECT(braid_rt_program_buffer_f32(&site, 10) == first && first[3] == 7.0f,
         "a site's buffer is allocated once and kept");
  braid_rt_program_free(site);
  int64_t x[5] = {1, -2, INT64_MAX, INT64_MIN, 5}, y[5] = {0};
  braid_rt_program_copy_i64(x, 5, y);
  EXPECT(memcmp(x, y, sizeof x) == 0, "copy_i64");
}

static void test_init(void) {
  enum { N = 5000 }; /* more than one chunk of 4096 */
  float *got = braid_rt_program_alloc_f32(N);
  double *ref = (double *)malloc(N * sizeof(double));
  braid_rt_program_init_f32(7, "w", BRAID_RT_INIT_NORMAL, 0.02, 0.0, N, got);
  braid_rt_init_fill_f64(BRAID_RT_INIT_NORMAL, 0.02, 0.0,
                         braid_rt_init_key(7, "w"), 0, N, ref);
  int64_t bad = -1;
  for (int64_t i = 0; i < N && bad < 0; ++i)
    if (got[i] != (float)ref[i])
      bad = i;
  EXPECT(bad < 0, "init_f32 element %lld", (long long)bad);
  int32_t ids32[N];
  int64_t ids64[N];
  braid_rt_program_init_ids_i32(3, "ids", 50, N, ids32);
  braid_rt_program_init_ids_i64(3, "ids", 50, N, ids64);
  braid_rt_init_fill_f64(BRAID_RT_INIT_UNIFORM, 0.0, 50.0,
                         braid_rt_init_key(3, "ids"), 0, N, ref);
  for (int64_t i = 0; i < N; ++i)
    if (ids32[i] != (int32_t)ref[i] || ids64[i] != (int64_t)ref[i] ||
        ids32[i] < 0 || ids32[i] >= 50) {
      EXPECT(0, "init_ids element %lld: %d, %lld", (long long)i, ids32[i],
             (long long)ids64[i]);
      break;
    }
  /* Ids in range pass the check (a bad one ends the program: `bad-id`). */
  braid_rt_program_check_ids("id", ids32, 0, N, 50, "here");
  braid_rt_program_check(BRAID_RT_OK, "here");
  free(ref);
  braid_rt_program_free(got);
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "flag") == 0) {
    uint64_t value;
    if (!braid_rt_program_parse_flag(argv[2], argv[3],
                                     strtoull(argv[4], NULL, 10),
                                     strtoull(argv[5], NULL, 10), &value))
      return 2;
    printf("%llu\n", (unsigned long long)value);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "bad-id") == 0) {
    int64_t labels[4] = {0, 4, 7, 1};
    braid_rt_program_check_ids("label", labels, 1, 4, 5, "loc(\"m\":3:7)");
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "bad-status") == 0) {
    braid_rt_program_check(BRAID_RT_OUT_OF_MEMORY, "loc(\"m\":9:1)");
    return 0;
  }
  test_flags();
  test_buffers();
  test_init();
  if (failures)
    fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}

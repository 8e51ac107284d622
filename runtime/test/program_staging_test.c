/*===- program_staging_test.c - The program runtime on a fake device -----===*/
/*
 * The program runtime linked with staging_device.c, whose device memory the
 * host cannot touch: every helper that reads or writes tensors on the host
 * (initial values, ids, the step, printed results, blocks of inputs, data
 * batches, checkpoints and their agreement all-reduce) must stage through
 * memory.h's copies and synchronise, or this test faults (exit 3) or reads
 * poisoned data. Values are checked against the same computation on host
 * memory: init values exactly, printed text byte for byte.
 *
 * Run on 2 ranks (a mesh 1 x 2). With `bad-id` it checks ids in device
 * memory that hold an id out of range, without MPI, as a device backend
 * does (recorded, reported by the poll after the step); ctest checks that
 * the message names that id, its position and its site.
 */

#include "braid/rt/program_spmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__,        \
              #cond);                                                          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static void *upload(const void *host, size_t bytes) {
  void *device = braid_rt_program_alloc(bytes);
  braid_rt_program_to_device(device, host, bytes, "test data");
  return device;
}

static void download(void *host, const void *device, size_t bytes) {
  braid_rt_program_to_host(host, device, bytes, "test data");
}

enum { N = 3000 }; /* below and above one page of floats */

static void test_single_device(void) {
  CHECK(!braid_rt_memory_is_host(), "the fake device is not linked");
  float *zeros = braid_rt_program_alloc_f32(N);
  static float host[N], want[N];
  download(host, zeros, sizeof host);
  for (int i = 0; i < N; ++i)
    CHECK(host[i] == 0.0f, "allocation not zeroed at %d", i);

  /* Initial values: the same stream as braid_rt_init_fill_f64's. */
  braid_rt_program_init_f32(7, "w", BRAID_RT_INIT_NORMAL, 1.0, 0.0, N, zeros);
  static double values[N];
  braid_rt_init_fill_f64(BRAID_RT_INIT_NORMAL, 1.0, 0.0,
                         braid_rt_init_key(7, "w"), 0, N, values);
  download(host, zeros, sizeof host);
  for (int i = 0; i < N; ++i)
    CHECK(host[i] == (float)values[i], "init_f32 element %d", i);

  int32_t *ids32 = braid_rt_program_alloc_i32(N);
  int64_t *ids64 = braid_rt_program_alloc_i64(N);
  braid_rt_program_init_ids_i32(7, "tokens", 50, N, ids32);
  braid_rt_program_init_ids_i64(7, "tokens", 50, N, ids64);
  braid_rt_init_fill_f64(BRAID_RT_INIT_UNIFORM, 0.0, 50.0,
                         braid_rt_init_key(7, "tokens"), 0, N, values);
  static int32_t h32[N];
  static int64_t h64[N];
  download(h32, ids32, sizeof h32);
  download(h64, ids64, sizeof h64);
  for (int i = 0; i < N; ++i)
    CHECK(h32[i] == (int32_t)values[i] && h64[i] == (int64_t)values[i],
          "init_ids element %d", i);
  /* Valid ids pass (a read of poisoned or zeroed memory would not). */
  braid_rt_program_check_ids("id", ids32, 0, N, 50, "loc(\"t\":1:1)");
  braid_rt_program_check_ids("id", ids64, 1, N, 50, "loc(\"t\":1:2)");

  int64_t *copied = braid_rt_program_alloc_i64(N);
  braid_rt_program_copy_i64(ids64, N, copied);
  static int64_t back64[N];
  download(back64, copied, sizeof back64);
  CHECK(memcmp(back64, h64, sizeof h64) == 0, "copy_i64");

  /* The step, 4 and 8 bytes. */
  int32_t step32 = 0;
  int64_t step64 = 0;
  int32_t *dstep32 = braid_rt_program_alloc_i32(1);
  int64_t *dstep64 = braid_rt_program_alloc_i64(1);
  braid_rt_program_set_step(dstep32, 4, 123456);
  braid_rt_program_set_step(dstep64, 8, (int64_t)1 << 40);
  download(&step32, dstep32, 4);
  download(&step64, dstep64, 8);
  CHECK(step32 == 123456 && step64 == (int64_t)1 << 40, "set_step %d %lld",
        step32, (long long)step64);

  /* A read-modify-write view. */
  float *view = (float *)braid_rt_program_map(zeros, sizeof host, 1, "a view");
  for (int i = 0; i < N; ++i)
    view[i] += 1.0f;
  braid_rt_program_unmap(view, zeros, sizeof host, 1, "a view");
  download(want, zeros, sizeof want);
  for (int i = 0; i < N; ++i)
    CHECK(want[i] == host[i] + 1.0f, "map/unmap element %d", i);

  /* Printed results: a value and a tensor, as text, against the same
     printing from host memory. */
  CHECK(braid_rt_program_value(zeros, 5, 4, 1) == (double)want[5], "value");
  CHECK(braid_rt_program_value(ids64, 7, 8, 0) == (double)h64[7], "value i64");
  CHECK(braid_rt_program_value(ids32, 9, 4, 0) == (double)h32[9], "value i32");
  char path[256];
  snprintf(path, sizeof path, "%s/braid-staging-test-%d.txt",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  fflush(stdout);
  FILE *saved = stdout;
  stdout = fopen(path, "w+");
  braid_rt_program_print_tensor("w", zeros, 20, 4, 1, 1);
  braid_rt_program_print_tensor("ids", ids32, 10, 4, 0, 1);
  fflush(stdout);
  rewind(stdout);
  static char got[8192], expected[8192];
  size_t n = fread(got, 1, sizeof got - 1, stdout);
  got[n] = 0;
  fclose(stdout);
  stdout = saved;
  unlink(path);
  double sum = 0, sq = 0;
  for (int j = 0; j < 20; ++j) {
    sum += want[j];
    sq += (double)want[j] * want[j];
  }
  int at = snprintf(expected, sizeof expected, "w sum %.17g l2 %.17g\n", sum,
                    sqrt(sq));
  for (int j = 0; j < 20; ++j)
    at += snprintf(expected + at, sizeof expected - at, "%s%.17g%s",
                   j % 8 ? " " : "  ", (double)want[j],
                   j % 8 == 7 || j == 19 ? "\n" : "");
  sum = sq = 0;
  for (int j = 0; j < 10; ++j) {
    sum += h32[j];
    sq += (double)h32[j] * h32[j];
  }
  at += snprintf(expected + at, sizeof expected - at,
                 "ids sum %.17g l2 %.17g\n", sum, sqrt(sq));
  for (int j = 0; j < 10; ++j)
    at += snprintf(expected + at, sizeof expected - at, "%s%.17g%s",
                   j % 8 ? " " : "  ", (double)h32[j],
                   j % 8 == 7 || j == 9 ? "\n" : "");
  CHECK(strcmp(got, expected) == 0, "printed\n%s\nwanted\n%s", got, expected);
}

enum { TP = 2, WORLD = 3 };

static void test_mesh(void) {
  /* A [4][6] tensor split along 1 over tp: init_block vs extract_block of
     the whole, both on device memory. */
  static const int64_t global[2] = {4, 6}, spec[3] = {0, 1, 1};
  int64_t local[2], offsets[2];
  braid_rt_program_block(2, global, spec, local, offsets);
  int64_t count = local[0] * local[1];
  float *whole = braid_rt_program_alloc_f32(24);
  float *block = braid_rt_program_alloc_f32(count);
  float *extracted = braid_rt_program_alloc_f32(count);
  braid_rt_program_init_f32(11, "w", BRAID_RT_INIT_NORMAL, 1.0, 0.0, 24,
                            whole);
  braid_rt_program_init_block_f32(11, "w", BRAID_RT_INIT_NORMAL, 1.0, 0.0, 2,
                                  global, spec, block);
  braid_rt_program_extract_block(whole, sizeof(float), 2, global, spec,
                                 extracted);
  float hw[24], hb[24], he[24];
  download(hw, whole, sizeof hw);
  download(hb, block, count * sizeof(float));
  download(he, extracted, count * sizeof(float));
  for (int64_t i = 0; i < count; ++i)
    CHECK(hb[i] == he[i] && hb[i] == hw[(offsets[0] + i / local[1]) * 6 +
                                         offsets[1] + i % local[1]],
          "block element %lld", (long long)i);

  /* --data: a synthetic batch staged into device buffers, against the data
     source read into host memory. */
  const int64_t batch = 3, seq = 5;
  braid_rt_data_t *data =
      braid_rt_program_data_open("synthetic", 2, 5, 40, seq, batch);
  int32_t *tokens = braid_rt_program_alloc_i32(batch * seq);
  int32_t *labels = braid_rt_program_alloc_i32(batch * seq);
  braid_rt_program_data_batch(data, 2, batch, seq, tokens, labels);
  int32_t ht[15], hl[15], wt[15], wl[15];
  download(ht, tokens, sizeof ht);
  download(hl, labels, sizeof hl);
  CHECK(braid_rt_data_batch(data, 2, 0, batch, wt, wl) == BRAID_RT_OK,
        "host batch");
  CHECK(memcmp(ht, wt, sizeof ht) == 0 && memcmp(hl, wl, sizeof hl) == 0,
        "data batch");
  braid_rt_data_close(data);

  /* A checkpoint of the device block, resumed into another device buffer;
     the outcome all-reduce runs on device memory (the wrapper checks). */
  double pid = (double)getpid();
  double *device_pid = upload(&pid, sizeof pid);
  braid_rt_broadcast_f64(braid_rt_program_comm(WORLD), device_pid, 1, 0, NULL);
  download(&pid, device_pid, sizeof pid);
  char dir[256];
  snprintf(dir, sizeof dir, "%s/braid-staging-test-%lld",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long long)pid);
  braid_rt_program_slot_t slots[1] = {{"w", 2, global, spec, -1, NULL}};
  float *params[1] = {block};
  braid_rt_program_save(dir, 9, 1, slots, params, 0);
  float *resumed = braid_rt_program_alloc_f32(count);
  float *into[1] = {resumed};
  CHECK(braid_rt_program_resume(dir, 1, slots, into) == 9, "resumed step");
  float hr[24];
  download(hr, resumed, count * sizeof(float));
  CHECK(memcmp(hr, hb, count * sizeof(float)) == 0, "resumed block");
  braid_rt_program_checkpoint_outcome(0);
  if (braid_rt_program_spmd_rank() == 0) {
    char path[300];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    unlink(path);
    rmdir(dir);
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "bad-id") == 0) {
    /* A device backend only records the bad id; the poll after the step
       names it and its site, as the host backend would at once. Another
       site's good ids first, so that the site table is exercised. */
    int32_t good[2] = {0, 1}, ids[5] = {0, 1, 2, 9, 1};
    void *device_good = upload(good, sizeof good);
    void *device = upload(ids, sizeof ids);
    braid_rt_program_check_ids("id", device_good, 0, 2, 4, "loc(\"t\":2:1)");
    braid_rt_program_check_ids("label", device, 0, 5, 4, "loc(\"t\":3:4)");
    braid_rt_program_poll_bad_ids();
    return 0; /* not reached */
  }
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  int64_t dims[2] = {1, size ? atoi(size) : 1};
  const char *names[2] = {"dp", "tp"};
  braid_rt_program_spmd_start(&argc, &argv, 2, dims, names);
  test_single_device();
  test_mesh();
  if (failures)
    braid_rt_program_spmd_end_all(1);
  if (braid_rt_program_spmd_rank() == 0)
    printf("program_staging_test: all checks passed on %lld ranks\n",
           (long long)dims[1]);
  fflush(stdout);
  braid_rt_program_spmd_finish();
  return 0;
}

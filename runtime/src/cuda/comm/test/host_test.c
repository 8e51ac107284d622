/*===- host_test.c - The CUDA backend's host-side decisions, on any CPU --===*/
/*
 * Checks host.h without a GPU: local rank and world size from each
 * launcher's variables and their precedence, device choice and its messages,
 * mesh splits against a brute-force list of members, operation names, timeouts,
 * which deferred transfers a wait issues, and the compressed ring's
 * schedule. Exits non-zero on the first failure.
 */

#include "host.h"
#include "mesh_shape.h"
#include "op_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_STR(actual, expected)                                            \
  do {                                                                         \
    const char *a_ = (actual), *e_ = (expected);                               \
    if (!a_ || strcmp(a_, e_) != 0) {                                          \
      fprintf(stderr, "%s:%d: got\n  '%s'\nexpected\n  '%s'\n", __FILE__,      \
              __LINE__, a_ ? a_ : "(null)", e_);                               \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/*--- A fake environment ----------------------------------------------------*/

static const char *const *fake_env; /* name, value, name, value, ..., NULL */

static const char *fake_getenv(const char *name) {
  for (const char *const *p = fake_env; p && *p; p += 2)
    if (strcmp(p[0], name) == 0)
      return p[1];
  return NULL;
}

static void check_local_rank(const char *const *env, int expected_rank,
                             const char *expected_source) {
  fake_env = env;
  int rank = -2;
  const char *source = "unset";
  char error[256] = "";
  braid_rt_status_t status = braid_rt_cuda_local_rank_from_env(
      fake_getenv, &rank, &source, error, sizeof(error));
  CHECK(status == BRAID_RT_OK);
  CHECK(rank == expected_rank);
  if (expected_source)
    CHECK_STR(source, expected_source);
  else
    CHECK(source == NULL);
}

static void check_bad_local_rank(const char *const *env,
                                 const char *expected_message) {
  fake_env = env;
  int rank = 5;
  const char *source = "unset";
  char error[256] = "";
  braid_rt_status_t status = braid_rt_cuda_local_rank_from_env(
      fake_getenv, &rank, &source, error, sizeof(error));
  CHECK(status == BRAID_RT_INVALID_ARGUMENT);
  CHECK(rank == -1);
  CHECK_STR(error, expected_message);
}

static void test_local_rank(void) {
  check_local_rank((const char *const[]){NULL}, -1, NULL);
  check_local_rank(
      (const char *const[]){"OMPI_COMM_WORLD_LOCAL_RANK", "3", NULL}, 3,
      "OMPI_COMM_WORLD_LOCAL_RANK");
  check_local_rank((const char *const[]){"MPI_LOCALRANKID", "2", NULL}, 2,
                   "MPI_LOCALRANKID");
  check_local_rank((const char *const[]){"LOCAL_RANK", "7", NULL}, 7,
                   "LOCAL_RANK");
  check_local_rank((const char *const[]){"SLURM_LOCALID", "0", NULL}, 0,
                   "SLURM_LOCALID");
  /* The inner launcher wins: mpirun or torchrun inside a Slurm job. */
  check_local_rank((const char *const[]){"SLURM_LOCALID", "0",
                                         "OMPI_COMM_WORLD_LOCAL_RANK", "5",
                                         NULL},
                   5, "OMPI_COMM_WORLD_LOCAL_RANK");
  check_local_rank(
      (const char *const[]){"SLURM_LOCALID", "0", "LOCAL_RANK", "6", NULL}, 6,
      "LOCAL_RANK");
  check_local_rank((const char *const[]){"LOCAL_RANK", "1",
                                         "OMPI_COMM_WORLD_LOCAL_RANK", "4",
                                         NULL},
                   4, "OMPI_COMM_WORLD_LOCAL_RANK");
  check_bad_local_rank(
      (const char *const[]){"LOCAL_RANK", "3x", NULL},
      "the local rank LOCAL_RANK='3x' is not an integer in 0..2147483647");
  check_bad_local_rank(
      (const char *const[]){"SLURM_LOCALID", "-1", NULL},
      "the local rank SLURM_LOCALID='-1' is not an integer in 0..2147483647");
  check_bad_local_rank(
      (const char *const[]){"OMPI_COMM_WORLD_LOCAL_RANK", "", NULL},
      "the local rank OMPI_COMM_WORLD_LOCAL_RANK='' is not an "
      "integer in 0..2147483647");
  check_bad_local_rank((const char *const[]){"LOCAL_RANK", " 2", NULL},
                       "the local rank LOCAL_RANK=' 2' is not an integer in "
                       "0..2147483647");
  check_bad_local_rank((const char *const[]){"LOCAL_RANK", "99999999999", NULL},
                       "the local rank LOCAL_RANK='99999999999' is not an "
                       "integer in 0..2147483647");
}

static void check_world_size(const char *const *env, braid_rt_status_t expected,
                             int expected_size, const char *expected_source,
                             const char *expected_message) {
  fake_env = env;
  int size = -2;
  const char *source = "unset";
  char error[256] = "";
  braid_rt_status_t status = braid_rt_cuda_world_size_from_env(
      fake_getenv, &size, &source, error, sizeof(error));
  CHECK(status == expected);
  CHECK(size == expected_size);
  if (expected_source)
    CHECK_STR(source, expected_source);
  else
    CHECK(source == NULL);
  if (expected_message)
    CHECK_STR(error, expected_message);
}

static void test_world_size(void) {
  check_world_size((const char *const[]){NULL}, BRAID_RT_OK, 1, NULL, NULL);
  check_world_size((const char *const[]){"WORLD_SIZE", "2", NULL}, BRAID_RT_OK,
                   2, "WORLD_SIZE", NULL);
  check_world_size(
      (const char *const[]){"SLURM_NTASKS", "8", "PMI_SIZE", "1", NULL},
      BRAID_RT_OK, 1, "PMI_SIZE", NULL);
  check_world_size((const char *const[]){"SLURM_NTASKS", "4",
                                         "OMPI_COMM_WORLD_SIZE", "2", NULL},
                   BRAID_RT_OK, 2, "OMPI_COMM_WORLD_SIZE", NULL);
  check_world_size((const char *const[]){"SLURM_NTASKS", "16", NULL},
                   BRAID_RT_OK, 16, "SLURM_NTASKS", NULL);
  /* A world of no process is no world. */
  check_world_size(
      (const char *const[]){"WORLD_SIZE", "0", NULL}, BRAID_RT_INVALID_ARGUMENT,
      1, NULL,
      "the world size WORLD_SIZE='0' is not an integer in 1..2147483647");
}

/*--- Devices ---------------------------------------------------------------*/

static void test_choose_device(void) {
  char error[512];
  int device = -2;
  CHECK(braid_rt_cuda_choose_device(3, 3, 8, "OMPI_COMM_WORLD_LOCAL_RANK", 8,
                                    NULL, NULL, &device, error,
                                    sizeof(error)) == BRAID_RT_OK);
  CHECK(device == 3);
  /* srun --gpus-per-task=1: each task sees its own GPU as device 0. */
  CHECK(braid_rt_cuda_choose_device(5, 1, 4, "SLURM_LOCALID", 1, NULL, "6",
                                    &device, error,
                                    sizeof(error)) == BRAID_RT_OK);
  CHECK(device == 0);

  CHECK(braid_rt_cuda_choose_device(
            0, 0, 1, NULL, 0,
            "cudaGetDeviceCount: no CUDA-capable device is detected "
            "(cudaErrorNoDevice)",
            NULL, &device, error, sizeof(error)) == BRAID_RT_INVALID_ARGUMENT);
  CHECK(device == -1);
  CHECK_STR(error, "rank 0 (local rank 0 of 1 on this node) finds no CUDA "
                   "device: cudaGetDeviceCount: no CUDA-capable device "
                   "is detected (cudaErrorNoDevice)");

  CHECK(braid_rt_cuda_choose_device(6, 2, 4, "LOCAL_RANK", 0, NULL, "", &device,
                                    error, sizeof(error)) ==
        BRAID_RT_INVALID_ARGUMENT);
  CHECK_STR(error, "rank 6 (local rank 2 of 4 on this node, from LOCAL_RANK) "
                   "finds no CUDA device with CUDA_VISIBLE_DEVICES=''");

  CHECK(braid_rt_cuda_choose_device(
            3, 3, 4, "OMPI_COMM_WORLD_LOCAL_RANK", 2, NULL, NULL, &device,
            error, sizeof(error)) == BRAID_RT_INVALID_ARGUMENT);
  CHECK_STR(error, "rank 3 (local rank 3 of 4 on this node, from "
                   "OMPI_COMM_WORLD_LOCAL_RANK) needs device 3 but this node "
                   "shows 2 CUDA devices: run at most one rank per GPU on "
                   "each node");

  /* One device but no launcher binding: two ranks would share it. */
  CHECK(braid_rt_cuda_choose_device(1, 1, 2, "MPI_Comm_split_type", 1, NULL,
                                    NULL, &device, error, sizeof(error)) ==
        BRAID_RT_INVALID_ARGUMENT);
  CHECK_STR(
      error,
      "rank 1 (local rank 1 of 2 on this node, from MPI_Comm_split_type) needs "
      "device 1 but this node shows 1 CUDA device: run at most "
      "one rank per GPU on each node");
  CHECK(braid_rt_cuda_choose_device(1, 1, 2, "MPI_Comm_split_type", 1, NULL,
                                    "0,1", &device, error, sizeof(error)) ==
        BRAID_RT_INVALID_ARGUMENT);
  CHECK_STR(
      error,
      "rank 1 (local rank 1 of 2 on this node, from MPI_Comm_split_type) needs "
      "device 1 but this node shows 1 CUDA device with "
      "CUDA_VISIBLE_DEVICES='0,1': run at most one rank per GPU "
      "on each node");
}

/*--- Mesh splits -----------------------------------------------------------*/

/* Checks every group of axes of a mesh against the definition in mesh.h:
   the members of rank r's group are the ranks that agree with r outside
   the group, numbered by ascending world rank. */
static void check_splits(int ndims, const int64_t *dims) {
  int64_t world = 1;
  for (int i = 0; i < ndims; ++i)
    world *= dims[i];
  int64_t coords[64][8];
  for (int64_t r = 0; r < world; ++r) {
    braid_rt_mesh_rank_coords(ndims, dims, r, coords[r]);
    /* Row-major: the rank is recovered from its coordinates. */
    int64_t back = 0;
    for (int i = 0; i < ndims; ++i)
      back = back * dims[i] + coords[r][i];
    CHECK(back == r);
  }
  for (unsigned mask = 0; mask < (1u << ndims); ++mask) {
    int color[64], key[64];
    for (int64_t r = 0; r < world; ++r)
      braid_rt_mesh_split_key(ndims, dims, coords[r], mask, &color[r], &key[r]);
    for (int64_t r = 0; r < world; ++r) {
      int expected_key = 0;
      for (int64_t s = 0; s < world; ++s) {
        int same_group = 1;
        for (int i = 0; i < ndims; ++i)
          if (!(mask & (1u << i)) && coords[s][i] != coords[r][i])
            same_group = 0;
        CHECK((color[s] == color[r]) == same_group);
        if (same_group && s < r)
          ++expected_key;
      }
      CHECK(key[r] == expected_key);
    }
  }
}

static void test_splits(void) {
  check_splits(3, (const int64_t[]){2, 2, 2});
  check_splits(2, (const int64_t[]){3, 2});
  check_splits(3, (const int64_t[]){2, 3, 4});
  check_splits(1, (const int64_t[]){5});
}

/*--- Messages and timeouts -------------------------------------------------*/

static void test_describe(void) {
  char text[256];
  braid_rt_op_info_t all_reduce = {"all_reduce",     "f32", 16, -1, 0,
                                        "mesh axes {dp}", 1,     2,  2};
  braid_rt_describe_op(&all_reduce, text, sizeof(text));
  CHECK_STR(text, "all_reduce of 16 f32 over mesh axes {dp} (rank 1 of 2, "
                  "world rank 2)");
  braid_rt_op_info_t recv = {"recv", "f32", 16, 0, 7, "world", 1, 2, 1};
  braid_rt_describe_op(&recv, text, sizeof(text));
  CHECK_STR(text, "recv of 16 f32 from rank 0 (tag 7) over world (rank 1 of "
                  "2, world rank 1)");
  braid_rt_op_info_t send = {"send",           "f64", 3, 1, 0,
                                  "mesh axes {pp}", 0,     2, 4};
  braid_rt_describe_op(&send, text, sizeof(text));
  CHECK_STR(text, "send of 3 f64 to rank 1 (tag 0) over mesh axes {pp} (rank "
                  "0 of 2, world rank 4)");
  braid_rt_op_info_t barrier = {"barrier", NULL, 0, -1, 0,
                                     "world",   3,    4, 3};
  braid_rt_describe_op(&barrier, text, sizeof(text));
  CHECK_STR(text, "barrier over world (rank 3 of 4, world rank 3)");
  /* A short buffer truncates, never overflows. */
  char small[12];
  braid_rt_describe_op(&all_reduce, small, sizeof(small));
  CHECK_STR(small, "all_reduce ");
}

static void test_timeouts(void) {
  CHECK(braid_rt_cuda_timed_out(10.0, 12.5, 2.0));
  CHECK(!braid_rt_cuda_timed_out(10.0, 11.5, 2.0));
  CHECK(!braid_rt_cuda_timed_out(10.0, 12.0, 2.0)); /* not yet past */
  CHECK(!braid_rt_cuda_timed_out(10.0, 1e9, 0.0));  /* 0: forever */
}

/*--- Deferred transfers ----------------------------------------------------*/

static void check_select(const braid_rt_cuda_p2p_entry_t *pending, size_t n,
                         ptrdiff_t target, const char *expected) {
  unsigned char selected[16];
  size_t count = braid_rt_cuda_p2p_select(pending, n, target, selected);
  char got[17];
  size_t ones = 0;
  for (size_t i = 0; i < n; ++i) {
    got[i] = selected[i] ? '1' : '0';
    ones += selected[i];
  }
  got[n] = '\0';
  CHECK_STR(got, expected);
  CHECK(count == ones);
}

static void test_p2p_select(void) {
  int pp, tp; /* two communicators, by address */
  const braid_rt_cuda_p2p_entry_t stage[] = {
      {0, &pp, 0, 0}, /* 0: recv from 0 (first micro-batch) */
      {0, &pp, 0, 0}, /* 1: recv from 0 (second) */
      {0, &pp, 2, 0}, /* 2: recv from 2 (a gradient) */
      {1, &pp, 2, 0}, /* 3: send to 2 */
      {0, &tp, 0, 0}, /* 4: recv from 0 on another communicator */
      {0, &pp, 0, 0}, /* 5: recv from 0 (third) */
      {1, &tp, 1, 0}, /* 6: send on another communicator */
  };
  size_t n = sizeof(stage) / sizeof(stage[0]);
  /* Nothing waited for: the sends go, receives stay deferred. */
  check_select(stage, n, -1, "0001001");
  /* A receive goes alone (with the sends): not with the earlier receive
     from the same rank, which waits for its own wait. */
  check_select(stage, n, 1, "0101001");
  check_select(stage, n, 0, "1001001");
  check_select(stage, n, 2, "0011001");
  check_select(stage, n, 4, "0001101");
  check_select(stage, n, 5, "0001011");
  /* Waiting for a send issues the sends only. */
  check_select(stage, n, 3, "0001001");
  /* Transfers to oneself go in matching pairs: the j-th send with the j-th
     receive, never a send alone (NCCL would wait for its receive). */
  const braid_rt_cuda_p2p_entry_t self[] = {
      {0, &pp, 0, 1}, /* 0: recv from self (first message) */
      {0, &pp, 0, 1}, /* 1: recv from self (second) */
      {1, &pp, 1, 0}, /* 2: send to rank 1 */
      {1, &pp, 0, 1}, /* 3: send to self (first) */
      {1, &tp, 0, 1}, /* 4: send to self on another communicator */
      {1, &pp, 0, 1}, /* 5: send to self (second) */
      {0, &tp, 0, 1}, /* 6: recv from self on the other communicator */
  };
  size_t m = sizeof(self) / sizeof(self[0]);
  check_select(self, m, -1, "0010000");
  check_select(self, m, 0, "1011000");
  check_select(self, m, 1, "1111010");
  check_select(self, m, 3, "1011000");
  check_select(self, m, 5, "1111010");
  check_select(self, m, 6, "0010101");
  check_select(self, m, 4, "0010101");
  /* An empty list and an index past the end select nothing extra. */
  check_select(stage, 0, -1, "");
  check_select(stage, 3, 7, "000");
}

/* The compressed ring's schedule (host.h), on its own terms; that it is the
   CPU backend's ring is ring_cpu_test.c's check. */
static void test_ring(void) {
  /* 10 elements in 4 chunks: the first two one longer. */
  CHECK(braid_rt_cuda_ring_chunk_begin(10, 4, 0) == 0);
  CHECK(braid_rt_cuda_ring_chunk_begin(10, 4, 1) == 3);
  CHECK(braid_rt_cuda_ring_chunk_begin(10, 4, 2) == 6);
  CHECK(braid_rt_cuda_ring_chunk_begin(10, 4, 3) == 8);
  CHECK(braid_rt_cuda_ring_chunk_begin(10, 4, 4) == 10);
  CHECK(braid_rt_cuda_ring_chunk_length(10, 4, 1) == 3);
  CHECK(braid_rt_cuda_ring_chunk_length(10, 4, 3) == 2);
  /* Fewer elements than ranks: empty chunks at the end. */
  CHECK(braid_rt_cuda_ring_chunk_length(2, 4, 1) == 1);
  CHECK(braid_rt_cuda_ring_chunk_length(2, 4, 2) == 0);
  /* Staging: a send and a receive buffer of the largest chunk, never
     empty. */
  CHECK(braid_rt_cuda_ring_staging_words(10, 4) == 6);
  CHECK(braid_rt_cuda_ring_staging_words(12, 4) == 6);
  CHECK(braid_rt_cuda_ring_staging_words(70001, 2) == 70002);
  CHECK(braid_rt_cuda_ring_staging_words(0, 3) == 2);
  /* Reduce-scatter half on 3 ranks: rank 0 sends chunk 2 then 1 and
     receives chunk 1 then 0, which it ends up owning. */
  int out, in;
  braid_rt_cuda_ring_step(3, 0, 0, 0, &out, &in);
  CHECK(out == 2 && in == 1);
  braid_rt_cuda_ring_step(3, 0, 1, 0, &out, &in);
  CHECK(out == 1 && in == 0);
  /* All_gather half: rank 0 sends its own chunk first. */
  braid_rt_cuda_ring_step(3, 0, 0, 1, &out, &in);
  CHECK(out == 0 && in == 2);
  braid_rt_cuda_ring_step(3, 0, 1, 1, &out, &in);
  CHECK(out == 2 && in == 1);
  /* Every step, every half: what a rank receives is what its predecessor
     sends, and in the reduce half each chunk reaches its owner last. */
  for (int size = 2; size <= 8; ++size)
    for (int gather = 0; gather < 2; ++gather)
      for (int s = 0; s + 1 < size; ++s)
        for (int r = 0; r < size; ++r) {
          int p_out, p_in;
          braid_rt_cuda_ring_step(size, r, s, gather, &out, &in);
          braid_rt_cuda_ring_step(size, (r + size - 1) % size, s, gather,
                                  &p_out, &p_in);
          CHECK(in == p_out);
          if (!gather && s + 2 == size)
            CHECK(in == r);
        }
}

int main(void) {
  test_ring();
  test_local_rank();
  test_world_size();
  test_choose_device();
  test_splits();
  test_describe();
  test_timeouts();
  test_p2p_select();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("cuda comm host checks passed\n");
  return 0;
}

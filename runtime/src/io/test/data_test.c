/*===- data_test.c - Training batches do not depend on the split ---------===*/
/*
 * For the synthetic source and for uint16 and uint32 token files: each rank
 * takes its share of each step's global batch; the shares, gathered, must
 * equal the whole batch one rank takes alone, and both must equal the
 * generator as docs/checkpoints.md specifies it, recomputed here (with
 * 128-bit arithmetic for the token-file windows, at steps large enough to
 * overflow 64 bits). Then every bad token file and argument is refused
 * with its message. Runs on any number of ranks that divides 8.
 */

#include "test_util.h"

#include "braid/rt/data.h"

#include <stdlib.h>
#include <unistd.h>

#define SEQ 16
#define BATCH 8

static int rank, size;

static uint64_t sm(uint64_t z) { return braid_rt_splitmix64(z); }

/* Token j (0..SEQ) of synthetic sample (step, i), as documented. */
static int32_t synthetic_token(uint64_t seed, int64_t vocab, uint64_t step,
                               uint64_t i, uint64_t j) {
  uint64_t k = sm(sm(sm(seed) ^ step) ^ i);
  return (int32_t)(sm(k + j) % (uint64_t)vocab);
}

static uint32_t file_token(uint64_t k, int64_t vocab) {
  return (uint32_t)((k * 2654435761u + 12345) % (uint64_t)vocab);
}

/* Writes n tokens of `bytes` bytes each: file_token(k). Rank 0 only. */
static void write_tokens(const char *path, int bytes, uint64_t n,
                         int64_t vocab) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL, "create '%s'", path);
  for (uint64_t k = 0; k < n; ++k) {
    uint32_t t = file_token(k, vocab);
    unsigned char le[4] = {(unsigned char)t, (unsigned char)(t >> 8),
                           (unsigned char)(t >> 16), (unsigned char)(t >> 24)};
    CHECK(fwrite(le, 1, (size_t)bytes, f) == (size_t)bytes, "write");
  }
  CHECK(fclose(f) == 0, "close");
}

/* Checks that this rank's share equals the whole batch, that the gathered
   shares do too, and that the whole batch matches `expected`. */
static void check_split(braid_rt_data_t *d, uint64_t step,
                        void (*expected)(uint64_t step, uint64_t i,
                                         int32_t *tokens, int32_t *labels)) {
  int32_t whole_t[BATCH * SEQ], whole_l[BATCH * SEQ];
  CHECK_OK(braid_rt_data_batch(d, step, 0, BATCH, whole_t, whole_l));
  for (int i = 0; i < BATCH; ++i) {
    int32_t t[SEQ], l[SEQ];
    expected(step, (uint64_t)i, t, l);
    CHECK(memcmp(t, whole_t + i * SEQ, sizeof(t)) == 0 &&
              memcmp(l, whole_l + i * SEQ, sizeof(l)) == 0,
          "step %llu sample %d differs from the documented generator",
          (unsigned long long)step, i);
    for (int j = 0; j + 1 < SEQ; ++j)
      CHECK(whole_l[i * SEQ + j] == whole_t[i * SEQ + j + 1], "labels shift");
  }
  int share = BATCH / size;
  int32_t mine_t[BATCH * SEQ], mine_l[BATCH * SEQ];
  CHECK_OK(braid_rt_data_batch(d, step, rank * share, share, mine_t, mine_l));
  double send[2 * BATCH * SEQ], all[2 * BATCH * SEQ];
  int n = share * SEQ;
  for (int k = 0; k < n; ++k) {
    send[k] = mine_t[k];
    send[n + k] = mine_l[k];
  }
  CHECK_OK(braid_rt_all_gather_f64(braid_rt_context_world(test_ctx), send, all,
                                   (size_t)(2 * n), NULL));
  for (int r = 0; r < size; ++r)
    for (int k = 0; k < n; ++k) {
      CHECK(all[r * 2 * n + k] == whole_t[r * n + k], "token %d of rank %d", k,
            r);
      CHECK(all[r * 2 * n + n + k] == whole_l[r * n + k], "label %d of rank %d",
            k, r);
    }
}

static uint64_t g_seed = 1234;
static int64_t g_vocab = 50257;

static void expected_synthetic(uint64_t step, uint64_t i, int32_t *t,
                               int32_t *l) {
  for (int j = 0; j < SEQ; ++j) {
    t[j] = synthetic_token(g_seed, g_vocab, step, i, (uint64_t)j);
    l[j] = synthetic_token(g_seed, g_vocab, step, i, (uint64_t)j + 1);
  }
}

static uint64_t g_ntokens;

static void expected_file(uint64_t step, uint64_t i, int32_t *t, int32_t *l) {
  unsigned __int128 w = ((unsigned __int128)step * BATCH + i) * SEQ;
  uint64_t start = (uint64_t)(w % (g_ntokens - SEQ));
  for (int j = 0; j < SEQ; ++j) {
    t[j] = (int32_t)file_token(start + (uint64_t)j, g_vocab);
    l[j] = (int32_t)file_token(start + (uint64_t)j + 1, g_vocab);
  }
}

static const uint64_t steps[] = {0, 1, 7, 1000, (uint64_t)1 << 60,
                                 UINT64_MAX};

static void check_sources(braid_rt_data_options_t *opts) {
  braid_rt_data_t *d;
  CHECK_OK(braid_rt_data_open_synthetic(test_ctx, opts, g_seed, g_vocab, &d));
  CHECK(braid_rt_data_num_tokens(d) == 0, "synthetic has no file");
  for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); ++s)
    check_split(d, steps[s], expected_synthetic);
  /* Another seed gives other data. */
  braid_rt_data_t *other;
  CHECK_OK(braid_rt_data_open_synthetic(test_ctx, opts, g_seed + 1, g_vocab,
                                        &other));
  int32_t t1[SEQ], l1[SEQ], t2[SEQ], l2[SEQ];
  CHECK_OK(braid_rt_data_batch(d, 3, 2, 1, t1, l1));
  CHECK_OK(braid_rt_data_batch(other, 3, 2, 1, t2, l2));
  CHECK(memcmp(t1, t2, sizeof(t1)) != 0, "seeds differ");
  braid_rt_data_close(other);
  braid_rt_data_close(d);

  /* Token files: uint16 and uint32, 1000 tokens (windows wrap around). */
  for (int bytes = 2; bytes <= 4; bytes += 2) {
    char path[64];
    snprintf(path, sizeof(path), "data_test_np%d_u%d.bin", size, 8 * bytes);
    g_vocab = bytes == 2 ? 50257 : 100000;
    g_ntokens = 1000;
    if (rank == 0)
      write_tokens(path, bytes, g_ntokens, g_vocab);
    CHECK_OK(braid_rt_barrier(braid_rt_context_world(test_ctx), NULL));
    CHECK_OK(braid_rt_data_open_tokens(test_ctx, opts, path, bytes, g_vocab,
                                       &d));
    CHECK(braid_rt_data_num_tokens(d) == g_ntokens, "%llu tokens",
          (unsigned long long)braid_rt_data_num_tokens(d));
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); ++s)
      check_split(d, steps[s], expected_file);
    braid_rt_data_close(d);
  }
  g_vocab = 50257;
}

static void check_errors(braid_rt_data_options_t *opts) {
  braid_rt_data_t *d = (braid_rt_data_t *)&d;
  char path[64];
  snprintf(path, sizeof(path), "data_test_np%d_bad.bin", size);
  unsigned char bytes[4 * (SEQ + 1) + 1];
  memset(bytes, 0, sizeof(bytes));
  /* Each rank writes its own file, so no barrier is needed. */
  snprintf(path, sizeof(path), "data_test_np%d_r%d_bad.bin", size, rank);
  char fragment[256];

  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(bytes, 1, 2 * (SEQ + 1) + 1, f) == 2 * (SEQ + 1) + 1 &&
            fclose(f) == 0,
        "write");
  snprintf(fragment, sizeof(fragment),
           "token file '%s': its size, %d bytes, is not a multiple of 2-byte "
           "tokens",
           path, 2 * (SEQ + 1) + 1);
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_tokens(test_ctx, opts, path, 2, 100, &d),
              BRAID_RT_DATA_CORRUPT, fragment);
  CHECK(d == NULL, "*out_data after a failure");

  f = fopen(path, "wb");
  CHECK(f && fwrite(bytes, 1, 4 * SEQ, f) == 4 * SEQ && fclose(f) == 0,
        "write");
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_tokens(test_ctx, opts, path, 4, 100, &d),
              BRAID_RT_DATA_CORRUPT,
              "16 tokens are too few for one sequence of 16 tokens and its "
              "next-token labels (17 needed)");

  bytes[2 * 9] = 100; /* token 9 = 100 (uint16) */
  f = fopen(path, "wb");
  CHECK(f && fwrite(bytes, 1, 2 * (SEQ + 1), f) == 2 * (SEQ + 1) &&
            fclose(f) == 0,
        "write");
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_tokens(test_ctx, opts, path, 2, 100, &d),
              BRAID_RT_DATA_CORRUPT,
              "token 9 is 100, not below the vocabulary size 100");
  /* The same file under a larger vocabulary is fine, and its only sample
     is the whole file. */
  CHECK_OK(braid_rt_data_open_tokens(test_ctx, opts, path, 2, 101, &d));
  int32_t t[SEQ], l[SEQ];
  CHECK_OK(braid_rt_data_batch(d, 5, 3, 1, t, l));
  CHECK(t[9] == 100 && l[8] == 100 && t[0] == 0, "the only window");
  CHECK_FAILS(test_ctx, braid_rt_data_batch(d, 0, 7, 2, t, l),
              BRAID_RT_INVALID_ARGUMENT,
              "samples [7, 9) are outside the global batch of 8");
  CHECK_FAILS(test_ctx, braid_rt_data_batch(d, 0, 0, 1, NULL, l),
              BRAID_RT_INVALID_ARGUMENT, "out_tokens or out_labels is NULL");
  /* A file that shrinks after opening is reported, not read past. */
  CHECK(truncate(path, 8) == 0, "truncate");
  CHECK_FAILS(test_ctx, braid_rt_data_batch(d, 0, 0, 1, t, l),
              BRAID_RT_DATA_CORRUPT, "the file is shorter than when it was "
                                     "opened");
  braid_rt_data_close(d);
  remove(path);

  CHECK_FAILS(test_ctx,
              braid_rt_data_open_tokens(test_ctx, opts, "no/such/tokens.bin",
                                        2, 100, &d),
              BRAID_RT_IO_ERROR,
              "token file 'no/such/tokens.bin': cannot open: No such file");
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_tokens(test_ctx, opts, path, 3, 100, &d),
              BRAID_RT_INVALID_ARGUMENT, "token_bytes is 3; it must be 2");
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_tokens(test_ctx, opts, path, 2, 70000, &d),
              BRAID_RT_INVALID_ARGUMENT,
              "a vocabulary of 70000 does not fit uint16 tokens");
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_synthetic(test_ctx, opts, 1, 0, &d),
              BRAID_RT_INVALID_ARGUMENT, "vocab 0 is not in [1, 2^31 - 1]");
  braid_rt_data_options_t bad = *opts;
  bad.seq_len = 0;
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_synthetic(test_ctx, &bad, 1, 10, &d),
              BRAID_RT_INVALID_ARGUMENT,
              "seq_len 0 and global_batch 8 must be positive");
  bad = *opts;
  bad.version = 7;
  CHECK_FAILS(test_ctx,
              braid_rt_data_open_synthetic(test_ctx, &bad, 1, 10, &d),
              BRAID_RT_INVALID_ARGUMENT, "use braid_rt_data_options_init");
  CHECK_FAILS(NULL, braid_rt_data_batch(NULL, 0, 0, 1, t, l),
              BRAID_RT_INVALID_ARGUMENT, "the source is NULL");
}

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  rank = braid_rt_context_rank(test_ctx);
  size = braid_rt_context_size(test_ctx);
  CHECK(BATCH % size == 0, "run on a number of ranks dividing %d", BATCH);
  braid_rt_data_options_t opts;
  braid_rt_data_options_init(&opts);
  opts.seq_len = SEQ;
  opts.global_batch = BATCH;
  check_sources(&opts);
  check_errors(&opts);
  CHECK_OK(braid_rt_barrier(braid_rt_context_world(test_ctx), NULL));
  if (rank == 0)
    printf("data_test on %d ranks: all checks passed\n", size);
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}

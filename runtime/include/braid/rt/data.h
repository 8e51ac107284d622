/*===- data.h - Training data: synthetic or a binary token file ----------===*/
/*
 * A data source yields, for each training step, a global batch of
 * `global_batch` samples of `seq_len` tokens each, with labels = the next
 * tokens. Sample (step, i) is a pure function of the source and (step, i),
 * so a rank that takes samples [first, first + count) of the step's batch
 * gets exactly those rows of the batch a single rank would take, whatever
 * the split:
 *
 *   synthetic: token j of sample (step, i), for 0 <= j <= seq_len, is
 *     splitmix64(k + j) mod vocab, with
 *     k = splitmix64(splitmix64(splitmix64(seed) ^ step) ^ i);
 *     tokens are t[0..seq_len), labels t[1..seq_len].
 *   token file: a flat array of n little-endian unsigned tokens (uint16 or
 *     uint32); sample (step, i) is the window starting at
 *     w = ((step * global_batch + i) * seq_len) mod (n - seq_len)
 *     (computed exactly, without overflow): tokens file[w .. w + seq_len),
 *     labels file[w + 1 .. w + seq_len].
 *
 * docs/checkpoints.md has more. Thread-compatible: one thread at a time per
 * source.
 */
#ifndef BRAID_RT_DATA_H
#define BRAID_RT_DATA_H

#include "braid/rt/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_rt_data braid_rt_data_t; /* opaque */

#define BRAID_RT_DATA_OPTIONS_VERSION 1

typedef struct {
  /* sizeof(braid_rt_data_options_t) as the caller compiled it. */
  size_t size;
  /* BRAID_RT_DATA_OPTIONS_VERSION. */
  uint32_t version;
  /* Tokens per sample (> 0). */
  int64_t seq_len;
  /* Samples per step over all ranks (> 0). */
  int64_t global_batch;
} braid_rt_data_options_t;

/* Fills `out_opts` with seq_len 0 and global_batch 0, which the caller must
   set. */
void braid_rt_data_options_init(braid_rt_data_options_t *out_opts);

/* Opens the synthetic source of `seed` over tokens [0, vocab) (vocab in
   1..2^31-1). Not collective. The caller owns *out_data and releases it
   with braid_rt_data_close. */
braid_rt_status_t braid_rt_data_open_synthetic(braid_rt_context_t *ctx,
                                               const braid_rt_data_options_t *opts,
                                               uint64_t seed, int64_t vocab,
                                               braid_rt_data_t **out_data);

/* Opens the token file `path` of `token_bytes`-byte tokens (2: uint16, 4:
   uint32), each < vocab (1..2^31-1). Reads the whole file once to check
   every token; later batches read only their windows. Fails with IO_ERROR
   if the file cannot be read, DATA_CORRUPT if its size is not a multiple of
   token_bytes, it holds fewer than seq_len + 1 tokens, or a token is >=
   vocab (the message names the file, the token's index and value). Not
   collective. The caller owns *out_data. */
braid_rt_status_t braid_rt_data_open_tokens(braid_rt_context_t *ctx,
                                            const braid_rt_data_options_t *opts,
                                            const char *path, int token_bytes,
                                            int64_t vocab,
                                            braid_rt_data_t **out_data);

/* Fills samples [first_sample, first_sample + count) of step `step`'s
   global batch (first_sample + count <= global_batch): count * seq_len
   tokens into out_tokens and as many labels into out_labels, row-major
   [count][seq_len]. DATA_CORRUPT if a token file changed since it was
   opened and a window now holds a token >= vocab or cannot be read. */
braid_rt_status_t braid_rt_data_batch(braid_rt_data_t *data, uint64_t step,
                                      int64_t first_sample, int64_t count,
                                      int32_t *out_tokens,
                                      int32_t *out_labels);

/* The number of tokens of a token file; 0 for a synthetic source. */
uint64_t braid_rt_data_num_tokens(const braid_rt_data_t *data);

/* Releases the source. NULL is a no-op. */
void braid_rt_data_close(braid_rt_data_t *data);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_DATA_H */

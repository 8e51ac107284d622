/*===- checkpoint_corrupt_test.c - Damaged files are refused, by name ----===*/
/*
 * One rank writes a small checkpoint, then damages copies of it and crafts
 * files by hand: truncations at several points, a flipped byte in the data,
 * every single-bit flip in the header, bad JSON, overlapping or gapped data
 * offsets, an unknown dtype, a bad header length, a missing or wrong
 * checksum. Each must fail with DATA_CORRUPT and a message naming the file
 * and the problem; a header flip that is not refused must leave every
 * tensor exactly as written. Also: a safetensors file from another tool
 * (no checksums, F64 and I64 tensors) reads.
 */

#include "test_util.h"

#include "braid/rt/checkpoint.h"

#include <stdlib.h>

static const char *const good_path = "corrupt_test_good.safetensors";
static const char *const bad_path = "corrupt_test_bad.safetensors";

static float a_values[6] = {1.5f, -2, 3.25f, 4, -5.5f, 6};
static float b_values[4] = {0.125f, 7, -8, 9};

static unsigned char *slurp(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL, "cannot open '%s'", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *bytes = malloc((size_t)size + 1);
  CHECK(bytes && fread(bytes, 1, (size_t)size, f) == (size_t)size, "read");
  fclose(f);
  *out_size = (size_t)size;
  return bytes;
}

static void spill(const char *path, const void *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0, "write '%s'",
        path);
}

/* A file of the given header text (length prefix added) and data. */
static void craft(const char *header, const void *data, size_t data_len) {
  size_t n = strlen(header);
  unsigned char *bytes = malloc(8 + n + data_len + 1);
  CHECK(bytes, "malloc");
  for (int i = 0; i < 8; ++i)
    bytes[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(bytes + 8, header, n);
  if (data_len)
    memcpy(bytes + 8 + n, data, data_len);
  spill(bad_path, bytes, 8 + n + data_len);
  free(bytes);
}

/* Opening bad_path must fail with DATA_CORRUPT naming the file and
   containing `fragment`. */
static void open_refused(const char *fragment) {
  braid_rt_checkpoint_reader_t *r = (braid_rt_checkpoint_reader_t *)&r;
  char prefix[256];
  snprintf(prefix, sizeof(prefix), "checkpoint '%s': ", bad_path);
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_open(test_ctx, bad_path, &r),
              BRAID_RT_DATA_CORRUPT, fragment);
  CHECK(strncmp(braid_rt_context_last_error(test_ctx), prefix,
                strlen(prefix)) == 0,
        "message '%s' does not start with '%s'",
        braid_rt_context_last_error(test_ctx), prefix);
  CHECK(r == NULL, "*out_reader not NULL after a failure");
}

static void write_good(void) {
  braid_rt_checkpoint_writer_t *w;
  CHECK_OK(braid_rt_checkpoint_writer_create(
      test_ctx, braid_rt_context_world(test_ctx), good_path, &w));
  int64_t a_shape[2] = {2, 3}, b_shape[1] = {4}, zero[2] = {0, 0};
  CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, "a", 2, a_shape, zero,
                                              a_shape, a_values));
  CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, "b", 1, b_shape, zero,
                                              b_shape, b_values));
  CHECK_OK(braid_rt_checkpoint_writer_set_metadata(w, "model", "tiny"));
  CHECK_OK(braid_rt_checkpoint_writer_commit(w));
  braid_rt_checkpoint_writer_destroy(w);
}

/* Reads `path` whole: 1 if it opens, verifies and holds exactly the good
   tensors; 0 if it is refused with DATA_CORRUPT (anything else fails the
   test); -1 if it reads but differs. */
static int read_back(const char *path) {
  braid_rt_checkpoint_reader_t *r;
  braid_rt_status_t s = braid_rt_checkpoint_open(test_ctx, path, &r);
  if (s == BRAID_RT_OK) {
    s = braid_rt_checkpoint_verify(r);
    if (s != BRAID_RT_OK)
      braid_rt_checkpoint_close(r);
  }
  if (s != BRAID_RT_OK) {
    CHECK(s == BRAID_RT_DATA_CORRUPT, "%s: %s", braid_rt_status_string(s),
          braid_rt_context_last_error(test_ctx));
    return 0;
  }
  int same = braid_rt_checkpoint_num_tensors(r) == 2;
  int64_t a_shape[2] = {2, 3}, b_shape[1] = {4}, zero[2] = {0, 0};
  float a[6], b[4];
  same = same &&
         braid_rt_checkpoint_read_block_f32(r, "a", 2, a_shape, zero, a_shape,
                                            a) == BRAID_RT_OK &&
         braid_rt_checkpoint_read_block_f32(r, "b", 1, b_shape, zero, b_shape,
                                            b) == BRAID_RT_OK &&
         memcmp(a, a_values, sizeof(a)) == 0 &&
         memcmp(b, b_values, sizeof(b)) == 0;
  braid_rt_checkpoint_close(r);
  return same ? 1 : -1;
}

static void check_damaged_copies(void) {
  size_t size;
  unsigned char *good = slurp(good_path, &size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = header_len << 8 | good[i];
  size_t data_start = 8 + (size_t)header_len;
  CHECK(data_start + 40 == size, "%zu bytes, header %llu", size,
        (unsigned long long)header_len);
  CHECK(read_back(good_path) == 1, "the good file");

  /* Truncations. */
  struct {
    size_t keep;
    const char *fragment;
  } cuts[] = {
      {0, "the file is 0 bytes, too short for the 8-byte header length"},
      {5, "the file is 5 bytes, too short"},
      {8, "runs past the end of the file (8 bytes)"},
      {8 + (size_t)header_len / 2, "runs past the end of the file"},
      {data_start, "out of range of the 0-byte data section (truncated "
                   "file?)"},
      {data_start + 3, "out of range of the 3-byte data section"},
      {size - 1, "out of range of the 39-byte data section"},
  };
  for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); ++i) {
    spill(bad_path, good, cuts[i].keep);
    open_refused(cuts[i].fragment);
  }

  /* A flipped byte in the data opens (the header is fine) but neither
     verifies nor reads; the other tensor still reads. */
  unsigned char *copy = malloc(size);
  CHECK(copy, "malloc");
  memcpy(copy, good, size);
  copy[data_start + 5] ^= 0x40; /* inside "a", which comes first */
  spill(bad_path, copy, size);
  braid_rt_checkpoint_reader_t *r;
  CHECK_OK(braid_rt_checkpoint_open(test_ctx, bad_path, &r));
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_verify(r), BRAID_RT_DATA_CORRUPT,
              "tensor 'a': its data hashes to");
  int64_t a_shape[2] = {2, 3}, b_shape[1] = {4}, zero[2] = {0, 0};
  float a[6], b[4];
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_read_block_f32(r, "a", 2, a_shape, zero,
                                                 a_shape, a),
              BRAID_RT_DATA_CORRUPT, "the file is corrupt");
  CHECK_OK(braid_rt_checkpoint_read_block_f32(r, "b", 1, b_shape, zero,
                                              b_shape, b));
  CHECK(memcmp(b, b_values, sizeof(b)) == 0, "b");
  braid_rt_checkpoint_close(r);

  /* Every single-bit flip of the length and the header is refused, or
     leaves every tensor as written (a flip in a user metadata value cannot
     be noticed). */
  int refused = 0, harmless = 0;
  for (size_t at = 0; at < data_start; ++at)
    for (int bit = 0; bit < 8; ++bit) {
      memcpy(copy, good, size);
      copy[at] ^= (unsigned char)(1u << bit);
      spill(bad_path, copy, size);
      int outcome = read_back(bad_path);
      CHECK(outcome != -1, "flipping bit %d of byte %zu ('%c') gives a "
            "readable file with other tensors", bit, at, good[at]);
      CHECK(outcome == 0 || at >= 8, "a flipped length bit was accepted");
      outcome ? ++harmless : ++refused;
    }
  CHECK(refused > 7 * harmless, "%d flips refused, %d harmless", refused,
        harmless);
  printf("header bit flips: %d refused, %d harmless\n", refused, harmless);
  free(copy);
  free(good);
}

static void check_crafted(void) {
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  craft("{\"a\":", data, 8);
  open_refused("the header is not valid JSON: at byte 5: expected a value");
  craft("[]", NULL, 0);
  open_refused("the header is not a JSON object");
  /* Found with fuzz_checkpoint.c (its seed wrap-2^64 holds it): 2^32 *
     2^32 elements wrapped to 0, the tensor passed for empty, and reading
     a block of it read out of bounds. */
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
        "\"data_offsets\":[0,0]}}",
        NULL, 0);
  open_refused("tensor 'a' has more than 2^40 elements");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        data, 12);
  open_refused("tensors 'a' and 'b' overlap in the data section");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
        data, 20);
  open_refused("a gap of 4 bytes before tensor 'b'");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        data, 12);
  open_refused("the data section has 12 bytes but the tensors cover 8");
  craft("{\"a\":{\"dtype\":\"F8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
        data, 2);
  open_refused("tensor 'a' has unknown dtype 'F8' (known: F64 F32 F16 BF16 "
               "I64 I32)");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("tensor 'a': data_offsets [0, 8] hold 8 bytes but F32[3] "
               "needs 12");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("tensor 'a': dimension 0 of its shape is not an integer");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
        data, 8);
  open_refused("data_offsets [8, 0] are out of range");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", data,
        8);
  open_refused("data_offsets must be two non-negative integers");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],"
        "\"x\":1}}",
        data, 8);
  open_refused("exactly the keys dtype, shape and data_offsets");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
        "1,2],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("tensor 'a' has 17 dimensions");
  craft("{\"__metadata__\":{\"k\":1}}", NULL, 0);
  open_refused("__metadata__ value 'k' is not a string");
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("duplicate key \"a\"");
  /* Braid checkpoints need their checksums. */
  craft("{\"__metadata__\":{\"braid.format\":\"braid-checkpoint-1\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("tensor 'a' has no checksum");
  craft("{\"__metadata__\":{\"braid.format\":\"braid-checkpoint-1\","
        "\"braid.fnv1a64.a\":\"0123\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("the checksum of tensor 'a' is not 16 lowercase hex digits");
  craft("{\"__metadata__\":{\"braid.format\":\"braid-checkpoint-1\","
        "\"braid.fnv1a64.zz\":\"0123456789abcdef\"}}",
        NULL, 0);
  open_refused("a checksum for tensor 'zz', which the file does not hold");
  craft("{\"__metadata__\":{\"braid.format\":\"braid-checkpoint-9\"}}", NULL,
        0);
  open_refused("unknown checkpoint format 'braid-checkpoint-9'");
  craft("{\"__metadata__\":{\"braid.fnv1a64.a\":\"0123456789abcdef\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        data, 8);
  open_refused("metadata keys starting with 'braid.' but no braid.format");
  unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}'};
  spill(bad_path, huge, 10);
  open_refused("header length 4294967295 runs past the end of the file (10 "
               "bytes) or exceeds 100000000");

  /* A safetensors file from another tool: no checksums, several dtypes. */
  double f64[2] = {0.5, -1.25};
  int64_t i64[1] = {7};
  unsigned char mixed[32];
  memcpy(mixed, f64, 16);
  memcpy(mixed + 16, i64, 8);
  memcpy(mixed + 24, data, 8);
  craft("{\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
        "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[24,32]}}"
        "      ",
        mixed, 32);
  braid_rt_checkpoint_reader_t *r;
  CHECK_OK(braid_rt_checkpoint_open(test_ctx, bad_path, &r));
  CHECK_OK(braid_rt_checkpoint_verify(r));
  int64_t two[1] = {2}, one[1] = {1}, zero[2] = {0, 1}, f_shape[2] = {1, 2},
          f_block[2] = {1, 1};
  float out[2];
  CHECK_OK(braid_rt_checkpoint_read_block_f32(r, "d", 1, two, zero, two, out));
  CHECK(out[0] == 0.5f && out[1] == -1.25f, "F64 converted");
  CHECK_OK(braid_rt_checkpoint_read_block_f32(r, "f", 2, f_shape, zero,
                                              f_block, out));
  CHECK(out[0] == 2, "block [0, 1] of f is %g", out[0]);
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_read_block_f32(r, "i", 1, one, zero, one,
                                                 out),
              BRAID_RT_INVALID_ARGUMENT,
              "tensor 'i' is I64; read_block_f32 reads F32 or F64");
  CHECK(braid_rt_checkpoint_metadata(r, "braid.format") == NULL, "no format");
  braid_rt_checkpoint_close(r);
}

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  CHECK(braid_rt_context_size(test_ctx) == 1, "run on one rank");
  write_good();
  check_damaged_copies();
  check_crafted();
  remove(bad_path);
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  printf("checkpoint_corrupt_test: all checks passed\n");
  return 0;
}

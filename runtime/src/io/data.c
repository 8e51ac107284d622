/*===- data.c - Training data: synthetic or a binary token file ----------===*/

#include "braid/rt/data.h"

#include "braid/rt/init.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct braid_rt_data {
  braid_rt_context_t *ctx;
  int64_t seq_len, global_batch, vocab;
  /* Synthetic: */
  uint64_t seed;
  /* Token file (fd >= 0): */
  int fd;
  char *path;
  int token_bytes;
  uint64_t num_tokens;
  unsigned char *window; /* (seq_len + 1) * token_bytes bytes */
};

void braid_rt_data_options_init(braid_rt_data_options_t *out_opts) {
  memset(out_opts, 0, sizeof(*out_opts));
  out_opts->size = sizeof(*out_opts);
  out_opts->version = BRAID_RT_DATA_OPTIONS_VERSION;
}

static braid_rt_status_t check_common(braid_rt_context_t *ctx,
                                      const char *what,
                                      const braid_rt_data_options_t *opts,
                                      int64_t vocab, const void *out) {
  if (!ctx || !opts || !out)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT, "%s: NULL argument",
                         what);
  if (opts->size < sizeof(braid_rt_data_options_t) ||
      opts->version != BRAID_RT_DATA_OPTIONS_VERSION)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s: options of size %zu, version %u; this runtime "
                         "expects size %zu, version %d (use "
                         "braid_rt_data_options_init)",
                         what, opts->size, (unsigned)opts->version,
                         sizeof(braid_rt_data_options_t),
                         BRAID_RT_DATA_OPTIONS_VERSION);
  if (opts->seq_len <= 0 || opts->seq_len > ((int64_t)1 << 30) ||
      opts->global_batch <= 0 || opts->global_batch > ((int64_t)1 << 40))
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s: seq_len %lld and global_batch %lld must be "
                         "positive (at most 2^30 and 2^40)",
                         what, (long long)opts->seq_len,
                         (long long)opts->global_batch);
  if (vocab <= 0 || vocab > INT32_MAX)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s: vocab %lld is not in [1, 2^31 - 1]", what,
                         (long long)vocab);
  return BRAID_RT_OK;
}

static braid_rt_data_t *new_source(braid_rt_context_t *ctx,
                                   const braid_rt_data_options_t *opts,
                                   int64_t vocab) {
  braid_rt_data_t *d = calloc(1, sizeof(*d));
  if (!d)
    return NULL;
  d->ctx = ctx;
  d->seq_len = opts->seq_len;
  d->global_batch = opts->global_batch;
  d->vocab = vocab;
  d->fd = -1;
  return d;
}

braid_rt_status_t braid_rt_data_open_synthetic(braid_rt_context_t *ctx,
                                               const braid_rt_data_options_t *opts,
                                               uint64_t seed, int64_t vocab,
                                               braid_rt_data_t **out_data) {
  braid_rt_status_t s = check_common(ctx, "braid_rt_data_open_synthetic", opts,
                                     vocab, out_data);
  if (s != BRAID_RT_OK)
    return s;
  *out_data = NULL;
  braid_rt_data_t *d = new_source(ctx, opts, vocab);
  if (!d)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_data_open_synthetic: out of memory");
  d->seed = seed;
  *out_data = d;
  return BRAID_RT_OK;
}

/* Token i of a little-endian token array. */
static uint32_t token_at(const unsigned char *p, int token_bytes, size_t i) {
  p += i * (size_t)token_bytes;
  return token_bytes == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                          : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int read_at(int fd, void *buf, size_t n, uint64_t offset) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = pread(fd, p, n, (off_t)offset);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return k == 0 ? -2 : -1;
    p += k;
    n -= (size_t)k;
    offset += (uint64_t)k;
  }
  return 0;
}

/* Reads the whole file once, in chunks, and checks every token. */
static braid_rt_status_t scan_tokens(braid_rt_data_t *d) {
  enum { CHUNK = 1 << 20 };
  unsigned char *buf = malloc(CHUNK);
  if (!buf)
    return braid_rt_fail(d->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "token file '%s': out of memory", d->path);
  uint64_t bytes = d->num_tokens * (uint64_t)d->token_bytes;
  for (uint64_t at = 0; at < bytes; at += CHUNK) {
    size_t n = bytes - at < CHUNK ? (size_t)(bytes - at) : CHUNK;
    if (read_at(d->fd, buf, n, at) != 0) {
      free(buf);
      return braid_rt_fail(d->ctx, BRAID_RT_IO_ERROR,
                           "token file '%s': cannot read at byte %llu: %s",
                           d->path, (unsigned long long)at,
                           errno ? strerror(errno) : "unexpected end of file");
    }
    for (size_t i = 0; i < n / (size_t)d->token_bytes; ++i) {
      uint32_t t = token_at(buf, d->token_bytes, i);
      if ((int64_t)t >= d->vocab) {
        free(buf);
        return braid_rt_fail(d->ctx, BRAID_RT_DATA_CORRUPT,
                             "token file '%s': token %llu is %u, not below "
                             "the vocabulary size %lld",
                             d->path,
                             (unsigned long long)(at / (uint64_t)d->token_bytes +
                                                  i),
                             (unsigned)t, (long long)d->vocab);
      }
    }
  }
  free(buf);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_data_open_tokens(braid_rt_context_t *ctx,
                                            const braid_rt_data_options_t *opts,
                                            const char *path, int token_bytes,
                                            int64_t vocab,
                                            braid_rt_data_t **out_data) {
  braid_rt_status_t s = check_common(ctx, "braid_rt_data_open_tokens", opts,
                                     vocab, out_data);
  if (s != BRAID_RT_OK)
    return s;
  *out_data = NULL;
  if (!path)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_data_open_tokens: the path is NULL");
  if (token_bytes != 2 && token_bytes != 4)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "token file '%s': token_bytes is %d; it must be 2 "
                         "(uint16) or 4 (uint32)",
                         path, token_bytes);
  if (token_bytes == 2 && vocab > 65536)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "token file '%s': a vocabulary of %lld does not fit "
                         "uint16 tokens",
                         path, (long long)vocab);
  braid_rt_data_t *d = new_source(ctx, opts, vocab);
  if (d) {
    d->path = malloc(strlen(path) + 1);
    d->window = malloc((size_t)(opts->seq_len + 1) * (size_t)token_bytes);
  }
  if (!d || !d->path || !d->window) {
    braid_rt_data_close(d);
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_data_open_tokens: out of memory");
  }
  strcpy(d->path, path);
  d->token_bytes = token_bytes;
  d->fd = open(path, O_RDONLY);
  struct stat st;
  if (d->fd < 0 || fstat(d->fd, &st) != 0) {
    s = braid_rt_fail(ctx, BRAID_RT_IO_ERROR, "token file '%s': cannot open: %s",
                      path, strerror(errno));
    braid_rt_data_close(d);
    return s;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (size % (uint64_t)token_bytes != 0)
    s = braid_rt_fail(ctx, BRAID_RT_DATA_CORRUPT,
                      "token file '%s': its size, %llu bytes, is not a "
                      "multiple of %d-byte tokens",
                      path, (unsigned long long)size, token_bytes);
  d->num_tokens = size / (uint64_t)token_bytes;
  if (s == BRAID_RT_OK && d->num_tokens < (uint64_t)opts->seq_len + 1)
    s = braid_rt_fail(ctx, BRAID_RT_DATA_CORRUPT,
                      "token file '%s': %llu tokens are too few for one "
                      "sequence of %lld tokens and its next-token labels "
                      "(%lld needed)",
                      path, (unsigned long long)d->num_tokens,
                      (long long)opts->seq_len,
                      (long long)opts->seq_len + 1);
  if (s == BRAID_RT_OK)
    s = scan_tokens(d);
  if (s != BRAID_RT_OK) {
    braid_rt_data_close(d);
    return s;
  }
  *out_data = d;
  return BRAID_RT_OK;
}

/* (a * b) mod m without overflow. */
static uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
#if defined(__SIZEOF_INT128__)
  return (uint64_t)((unsigned __int128)a * b % m);
#else
  uint64_t result = 0;
  a %= m;
  b %= m;
  while (b) {
    if (b & 1)
      result = result >= m - a ? result - (m - a) : result + a;
    a = a >= m - a ? a - (m - a) : a + a;
    b >>= 1;
  }
  return result;
#endif
}

/* The first token of sample (step, i) of a token file:
   ((step * global_batch + i) * seq_len) mod (n - seq_len). */
static uint64_t window_start(const braid_rt_data_t *d, uint64_t step,
                             uint64_t i) {
  uint64_t m = d->num_tokens - (uint64_t)d->seq_len;
  uint64_t sample = (mul_mod(step, (uint64_t)d->global_batch, m) + i % m) % m;
  return mul_mod(sample, (uint64_t)d->seq_len, m);
}

braid_rt_status_t braid_rt_data_batch(braid_rt_data_t *d, uint64_t step,
                                      int64_t first_sample, int64_t count,
                                      int32_t *out_tokens,
                                      int32_t *out_labels) {
  if (!d)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_data_batch: the source is NULL");
  if (first_sample < 0 || count < 0 || first_sample > d->global_batch ||
      count > d->global_batch - first_sample)
    return braid_rt_fail(d->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_data_batch: samples [%lld, %lld) are "
                         "outside the global batch of %lld",
                         (long long)first_sample,
                         (long long)first_sample + (long long)count,
                         (long long)d->global_batch);
  if (count > 0 && (!out_tokens || !out_labels))
    return braid_rt_fail(d->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_data_batch: out_tokens or out_labels is "
                         "NULL");
  size_t seq = (size_t)d->seq_len;
  for (int64_t s = 0; s < count; ++s) {
    uint64_t i = (uint64_t)(first_sample + s);
    int32_t *tokens = out_tokens + (size_t)s * seq;
    int32_t *labels = out_labels + (size_t)s * seq;
    if (d->fd < 0) {
      uint64_t k = braid_rt_splitmix64(
          braid_rt_splitmix64(braid_rt_splitmix64(d->seed) ^ step) ^ i);
      uint32_t prev = (uint32_t)(braid_rt_splitmix64(k) % (uint64_t)d->vocab);
      for (size_t j = 0; j < seq; ++j) {
        uint32_t next =
            (uint32_t)(braid_rt_splitmix64(k + j + 1) % (uint64_t)d->vocab);
        tokens[j] = (int32_t)prev;
        labels[j] = (int32_t)next;
        prev = next;
      }
      continue;
    }
    uint64_t w = window_start(d, step, i);
    int rc = read_at(d->fd, d->window, (seq + 1) * (size_t)d->token_bytes,
                     w * (uint64_t)d->token_bytes);
    if (rc != 0)
      return braid_rt_fail(d->ctx,
                           rc == -2 ? BRAID_RT_DATA_CORRUPT : BRAID_RT_IO_ERROR,
                           "token file '%s': cannot read tokens [%llu, %llu): "
                           "%s",
                           d->path, (unsigned long long)w,
                           (unsigned long long)(w + seq + 1),
                           rc == -2 ? "the file is shorter than when it was "
                                      "opened"
                                    : strerror(errno));
    for (size_t j = 0; j <= seq; ++j) {
      uint32_t t = token_at(d->window, d->token_bytes, j);
      if ((int64_t)t >= d->vocab)
        return braid_rt_fail(d->ctx, BRAID_RT_DATA_CORRUPT,
                             "token file '%s': token %llu is %u, not below "
                             "the vocabulary size %lld (the file changed "
                             "since it was opened)",
                             d->path, (unsigned long long)(w + j), (unsigned)t,
                             (long long)d->vocab);
      if (j < seq)
        tokens[j] = (int32_t)t;
      if (j > 0)
        labels[j - 1] = (int32_t)t;
    }
  }
  return BRAID_RT_OK;
}

uint64_t braid_rt_data_num_tokens(const braid_rt_data_t *d) {
  return d ? d->num_tokens : 0;
}

void braid_rt_data_close(braid_rt_data_t *d) {
  if (!d)
    return;
  if (d->fd >= 0)
    close(d->fd);
  free(d->path);
  free(d->window);
  free(d);
}

/*===- checkpoint_writer.c - Gather blocks and write one safetensors file ===*/
/*
 * Commit runs in four steps over the writer's communicator:
 *   1. every rank learns every rank's block list (all_gather of an encoded
 *      descriptor list) and checks, identically on every rank, that the
 *      blocks of each tensor agree on its shape and cover it exactly once
 *      identical copies are merged (the lowest rank's copy is used);
 *   2. rank 0 creates `path`.tmp and tells the others whether it could;
 *   3. for each tensor in name order, the owner of each distinct block
 *      sends it to rank 0 in chunks, in the same order on every rank;
 *      rank 0 assembles the tensor, hashes it and appends it to the file;
 *   4. rank 0 writes the final header over the placeholder one (checksums
 *      have a fixed width, so its length does not change), fsyncs, renames
 *      the file into place and broadcasts its status and message.
 * Rank 0 thus holds one whole tensor at a time, never the whole checkpoint.
 */

#include "braid/rt/checkpoint.h"

#include "braid/rt/collectives.h"
#include "braid/rt/init.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DIMS BRAID_RT_CHECKPOINT_MAX_DIMS
#define MAX_NAME_BYTES 4096
/* Floats per message from a block's owner to rank 0. */
#define CHUNK_FLOATS ((uint64_t)1 << 20)
#define DATA_TAG 4242

typedef struct {
  char *name;
  int ndims;
  int64_t global[MAX_DIMS], offsets[MAX_DIMS], local[MAX_DIMS];
  const float *data;
} local_block_t;

struct braid_rt_checkpoint_writer {
  braid_rt_context_t *ctx;
  braid_rt_comm_t *comm;
  char *path;
  local_block_t *blocks;
  size_t num_blocks, blocks_capacity;
  char **meta_keys, **meta_values;
  size_t num_meta, meta_capacity;
  int committed;
  braid_rt_io_comm_t io; /* w->comm, for the collectives on host buffers */
};

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy)
    memcpy(copy, s, n);
  return copy;
}

braid_rt_status_t
braid_rt_checkpoint_writer_create(braid_rt_context_t *ctx,
                                  braid_rt_comm_t *comm, const char *path,
                                  braid_rt_checkpoint_writer_t **out_writer) {
  if (!ctx || !comm || !path || !out_writer)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_writer_create: NULL argument");
  *out_writer = NULL;
  if (!*path)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_writer_create: empty path");
  braid_rt_checkpoint_writer_t *w = calloc(1, sizeof(*w));
  if (w)
    w->path = copy_string(path);
  if (!w || !w->path) {
    free(w);
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_checkpoint_writer_create: out of memory");
  }
  w->ctx = ctx;
  w->comm = comm;
  braid_rt_io_comm_init(&w->io, ctx, comm);
  *out_writer = w;
  return BRAID_RT_OK;
}

void braid_rt_checkpoint_writer_destroy(braid_rt_checkpoint_writer_t *w) {
  if (!w)
    return;
  for (size_t i = 0; i < w->num_blocks; ++i)
    free(w->blocks[i].name);
  for (size_t i = 0; i < w->num_meta; ++i) {
    free(w->meta_keys[i]);
    free(w->meta_values[i]);
  }
  free(w->blocks);
  free(w->meta_keys);
  free(w->meta_values);
  free(w->path);
  braid_rt_io_comm_release(&w->io);
  free(w);
}

static int same_box(int ndims, const int64_t *off_a, const int64_t *loc_a,
                    const int64_t *off_b, const int64_t *loc_b) {
  for (int d = 0; d < ndims; ++d)
    if (off_a[d] != off_b[d] || loc_a[d] != loc_b[d])
      return 0;
  return 1;
}

braid_rt_status_t braid_rt_checkpoint_writer_add_f32(
    braid_rt_checkpoint_writer_t *w, const char *name, int ndims,
    const int64_t *global_shape, const int64_t *offsets,
    const int64_t *local_shape, const float *local_data) {
  if (!w)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_writer_add_f32: the writer is "
                         "NULL");
  braid_rt_context_t *ctx = w->ctx;
  if (!name)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': add_f32: the name is NULL",
                         w->path);
  size_t name_len = strlen(name);
  if (name_len == 0 || name_len > MAX_NAME_BYTES ||
      strcmp(name, "__metadata__") == 0 || !braid_rt_utf8_valid(name))
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': add_f32: tensor name '%.200s' is "
                         "not allowed (it must be 1 to %d bytes of UTF-8 and "
                         "not __metadata__)",
                         w->path, name, MAX_NAME_BYTES);
  if (w->committed)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': add_f32 of '%s' after commit",
                         w->path, name);
  if (ndims < 0 || ndims > MAX_DIMS)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': tensor '%s': %d dimensions; at "
                         "most %d are supported",
                         w->path, name, ndims, MAX_DIMS);
  if (ndims > 0 && (!global_shape || !offsets || !local_shape))
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': tensor '%s': a shape or offsets "
                         "array is NULL",
                         w->path, name);
  uint64_t volume = 1;
  for (int d = 0; d < ndims; ++d) {
    char g[256], o[256], l[256];
    braid_rt_format_shape(g, sizeof(g), ndims, global_shape);
    braid_rt_format_shape(o, sizeof(o), ndims, offsets);
    braid_rt_format_shape(l, sizeof(l), ndims, local_shape);
    if (global_shape[d] < 0 || global_shape[d] > ((int64_t)1 << 40) ||
        offsets[d] < 0 || local_shape[d] < 0 ||
        local_shape[d] > global_shape[d] ||
        offsets[d] > global_shape[d] - local_shape[d])
      return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                           "checkpoint '%s': tensor '%s': the block of shape "
                           "%s at offsets %s leaves the global shape %s in "
                           "dimension %d",
                           w->path, name, l, o, g, d);
    volume *= (uint64_t)global_shape[d];
    if (volume > ((uint64_t)1 << 40))
      return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                           "checkpoint '%s': tensor '%s': global shape %s has "
                           "more than 2^40 elements",
                           w->path, name, g);
  }
  if (!local_data && braid_rt_shape_volume(ndims, local_shape) > 0)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': tensor '%s': local_data is NULL",
                         w->path, name);
  for (size_t i = 0; i < w->num_blocks; ++i) {
    const local_block_t *b = &w->blocks[i];
    if (strcmp(b->name, name) == 0 && b->ndims == ndims &&
        memcmp(b->offsets, offsets, (size_t)ndims * sizeof(int64_t)) == 0) {
      char o[256];
      braid_rt_format_shape(o, sizeof(o), ndims, offsets);
      return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                           "checkpoint '%s': tensor '%s': this rank already "
                           "added the block at offsets %s",
                           w->path, name, o);
    }
  }
  if (w->num_blocks == w->blocks_capacity) {
    size_t cap = w->blocks_capacity ? 2 * w->blocks_capacity : 16;
    local_block_t *blocks = realloc(w->blocks, cap * sizeof(*blocks));
    if (!blocks)
      return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                           "checkpoint '%s': add_f32: out of memory", w->path);
    w->blocks = blocks;
    w->blocks_capacity = cap;
  }
  local_block_t *b = &w->blocks[w->num_blocks];
  memset(b, 0, sizeof(*b));
  b->name = copy_string(name);
  if (!b->name)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "checkpoint '%s': add_f32: out of memory", w->path);
  b->ndims = ndims;
  for (int d = 0; d < ndims; ++d) {
    b->global[d] = global_shape[d];
    b->offsets[d] = offsets[d];
    b->local[d] = local_shape[d];
  }
  b->data = local_data;
  ++w->num_blocks;
  return BRAID_RT_OK;
}

braid_rt_status_t
braid_rt_checkpoint_writer_set_metadata(braid_rt_checkpoint_writer_t *w,
                                        const char *key, const char *value) {
  if (!w)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_writer_set_metadata: the "
                         "writer is NULL");
  braid_rt_context_t *ctx = w->ctx;
  if (!key || !value)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': set_metadata: NULL key or value",
                         w->path);
  if (!*key || strncmp(key, "braid.", 6) == 0 || !braid_rt_utf8_valid(key) ||
      !braid_rt_utf8_valid(value))
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': metadata key '%.200s': keys must "
                         "be non-empty UTF-8, values UTF-8, and keys starting "
                         "with 'braid.' are reserved",
                         w->path, key);
  char *v = copy_string(value);
  if (!v)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "checkpoint '%s': set_metadata: out of memory",
                         w->path);
  for (size_t i = 0; i < w->num_meta; ++i)
    if (strcmp(w->meta_keys[i], key) == 0) {
      free(w->meta_values[i]);
      w->meta_values[i] = v;
      return BRAID_RT_OK;
    }
  if (w->num_meta == w->meta_capacity) {
    size_t cap = w->meta_capacity ? 2 * w->meta_capacity : 8;
    char **keys = realloc(w->meta_keys, cap * sizeof(*keys));
    if (keys)
      w->meta_keys = keys;
    char **values = keys ? realloc(w->meta_values, cap * sizeof(*values))
                         : NULL;
    if (values)
      w->meta_values = values;
    if (!keys || !values) {
      free(v);
      return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                           "checkpoint '%s': set_metadata: out of memory",
                           w->path);
    }
    w->meta_capacity = cap;
  }
  char *k = copy_string(key);
  if (!k) {
    free(v);
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "checkpoint '%s': set_metadata: out of memory",
                         w->path);
  }
  w->meta_keys[w->num_meta] = k;
  w->meta_values[w->num_meta] = v;
  ++w->num_meta;
  return BRAID_RT_OK;
}

/*===------------------------------------------------------------------===*/
/* Block descriptors: encoded for the all_gather, decoded on every rank.   */
/*===------------------------------------------------------------------===*/

/* A block as every rank sees it after the exchange. */
typedef struct {
  const char *name; /* points into the decoded descriptor bytes */
  int rank;         /* its owner in the communicator */
  size_t index;     /* its index in the owner's block list */
  int ndims;
  int64_t global[MAX_DIMS], offsets[MAX_DIMS], local[MAX_DIMS];
  int duplicate; /* an identical block of a lower rank is used instead */
} any_block_t;

/* A tensor of the checkpoint: blocks [first, first + count) of the sorted
   block list. */
typedef struct {
  size_t first, count;
  uint64_t begin, end; /* data offsets */
  uint64_t checksum;
} tensor_t;

static void put_u32(braid_rt_buffer_t *b, uint32_t v) {
  unsigned char bytes[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                            (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  braid_rt_buffer_put(b, bytes, 4);
}

static void put_i64(braid_rt_buffer_t *b, int64_t value) {
  uint64_t v = (uint64_t)value;
  put_u32(b, (uint32_t)v);
  put_u32(b, (uint32_t)(v >> 32));
}

/* Layout per block: u32 name length n, n name bytes and a NUL, u32 ndims,
   then global, offsets and local shape as i64 each. */
static void encode_blocks(const braid_rt_checkpoint_writer_t *w,
                          braid_rt_buffer_t *out) {
  put_u32(out, (uint32_t)w->num_blocks);
  for (size_t i = 0; i < w->num_blocks; ++i) {
    const local_block_t *b = &w->blocks[i];
    uint32_t n = (uint32_t)strlen(b->name);
    put_u32(out, n);
    braid_rt_buffer_put(out, b->name, n + 1);
    put_u32(out, (uint32_t)b->ndims);
    for (int d = 0; d < b->ndims; ++d)
      put_i64(out, b->global[d]);
    for (int d = 0; d < b->ndims; ++d)
      put_i64(out, b->offsets[d]);
    for (int d = 0; d < b->ndims; ++d)
      put_i64(out, b->local[d]);
  }
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static int64_t get_i64(const unsigned char *p) {
  return (int64_t)((uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32);
}

/* Bytes travel as doubles, each holding 4 bytes as an exact integer, since
   the collectives move f32 and f64. */
static size_t words_for(size_t bytes) { return (bytes + 3) / 4; }

static void bytes_to_words(const unsigned char *bytes, size_t n,
                           double *words) {
  for (size_t w = 0; w < words_for(n); ++w) {
    unsigned char q[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < 4 && 4 * w + i < n; ++i)
      q[i] = bytes[4 * w + i];
    words[w] = (double)get_u32(q);
  }
}

static void words_to_bytes(const double *words, size_t nwords,
                           unsigned char *bytes) {
  for (size_t w = 0; w < nwords; ++w) {
    uint32_t v = (uint32_t)words[w];
    bytes[4 * w] = (unsigned char)v;
    bytes[4 * w + 1] = (unsigned char)(v >> 8);
    bytes[4 * w + 2] = (unsigned char)(v >> 16);
    bytes[4 * w + 3] = (unsigned char)(v >> 24);
  }
}

/* Decodes rank `rank`'s descriptor (already checked to be well formed by
   its length; the encoder is ours) into blocks[*n...]. */
static void decode_blocks(const unsigned char *p, int rank,
                          any_block_t *blocks, size_t *n) {
  uint32_t count = get_u32(p);
  p += 4;
  for (uint32_t i = 0; i < count; ++i) {
    any_block_t *b = &blocks[(*n)++];
    memset(b, 0, sizeof(*b));
    uint32_t len = get_u32(p);
    p += 4;
    b->name = (const char *)p;
    p += len + 1;
    b->ndims = (int)get_u32(p);
    p += 4;
    for (int d = 0; d < b->ndims; ++d, p += 8)
      b->global[d] = get_i64(p);
    for (int d = 0; d < b->ndims; ++d, p += 8)
      b->offsets[d] = get_i64(p);
    for (int d = 0; d < b->ndims; ++d, p += 8)
      b->local[d] = get_i64(p);
    b->rank = rank;
    b->index = i;
  }
}

static int compare_int64s(const int64_t *a, const int64_t *b, int n) {
  for (int d = 0; d < n; ++d)
    if (a[d] != b[d])
      return a[d] < b[d] ? -1 : 1;
  return 0;
}

/* By name, then offsets, then local shape, then rank: identical copies end
   up adjacent, the lowest rank's first. */
static int compare_blocks(const void *pa, const void *pb) {
  const any_block_t *a = pa, *b = pb;
  int c = strcmp(a->name, b->name);
  if (c)
    return c;
  if (a->ndims != b->ndims)
    return a->ndims < b->ndims ? -1 : 1;
  if ((c = compare_int64s(a->offsets, b->offsets, a->ndims)))
    return c;
  if ((c = compare_int64s(a->local, b->local, a->ndims)))
    return c;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

static int boxes_overlap(const any_block_t *a, const any_block_t *b) {
  for (int d = 0; d < a->ndims; ++d)
    if (a->local[d] == 0 || b->local[d] == 0 ||
        a->offsets[d] >= b->offsets[d] + b->local[d] ||
        b->offsets[d] >= a->offsets[d] + a->local[d])
      return 0;
  return 1;
}

/* Groups the sorted blocks into tensors and checks each; the same on every
   rank, so every rank reaches the same verdict and message. */
static braid_rt_status_t check_coverage(braid_rt_checkpoint_writer_t *w,
                                        any_block_t *blocks, size_t nblocks,
                                        tensor_t *tensors,
                                        size_t *out_ntensors) {
  size_t nt = 0;
  for (size_t i = 0; i < nblocks;) {
    size_t j = i;
    while (j < nblocks && strcmp(blocks[j].name, blocks[i].name) == 0)
      ++j;
    const any_block_t *first = &blocks[i];
    char s1[256], s2[256], o1[256], o2[256];
    for (size_t k = i; k < j; ++k) {
      const any_block_t *b = &blocks[k];
      if (b->ndims != first->ndims ||
          compare_int64s(b->global, first->global, b->ndims) != 0) {
        braid_rt_format_shape(s1, sizeof(s1), first->ndims, first->global);
        braid_rt_format_shape(s2, sizeof(s2), b->ndims, b->global);
        return braid_rt_fail(w->ctx, BRAID_RT_INVALID_ARGUMENT,
                             "checkpoint '%s': tensor '%s': rank %d gives "
                             "global shape %s but rank %d gives %s",
                             w->path, b->name, first->rank, s1, b->rank, s2);
      }
      b = &blocks[k];
      if (k > i && same_box(b->ndims, b->offsets, b->local,
                            blocks[k - 1].offsets, blocks[k - 1].local))
        blocks[k].duplicate = 1;
    }
    uint64_t covered = 0;
    for (size_t a = i; a < j; ++a) {
      if (blocks[a].duplicate)
        continue;
      covered += braid_rt_shape_volume(blocks[a].ndims, blocks[a].local);
      for (size_t b = a + 1; b < j; ++b) {
        if (blocks[b].duplicate || !boxes_overlap(&blocks[a], &blocks[b]))
          continue;
        const any_block_t *x = &blocks[a], *y = &blocks[b];
        braid_rt_format_shape(o1, sizeof(o1), x->ndims, x->offsets);
        braid_rt_format_shape(s1, sizeof(s1), x->ndims, x->local);
        braid_rt_format_shape(o2, sizeof(o2), y->ndims, y->offsets);
        braid_rt_format_shape(s2, sizeof(s2), y->ndims, y->local);
        return braid_rt_fail(w->ctx, BRAID_RT_INVALID_ARGUMENT,
                             "checkpoint '%s': tensor '%s': the blocks at "
                             "offsets %s (shape %s, rank %d) and %s (shape "
                             "%s, rank %d) overlap",
                             w->path, x->name, o1, s1, x->rank, o2, s2,
                             y->rank);
      }
    }
    uint64_t volume = braid_rt_shape_volume(first->ndims, first->global);
    if (covered != volume) {
      braid_rt_format_shape(s1, sizeof(s1), first->ndims, first->global);
      return braid_rt_fail(w->ctx, BRAID_RT_INVALID_ARGUMENT,
                           "checkpoint '%s': tensor '%s' of shape %s: its "
                           "blocks cover %llu of its %llu elements",
                           w->path, first->name, s1,
                           (unsigned long long)covered,
                           (unsigned long long)volume);
    }
    tensors[nt].first = i;
    tensors[nt].count = j - i;
    ++nt;
    i = j;
  }
  *out_ntensors = nt;
  return BRAID_RT_OK;
}

/*===------------------------------------------------------------------===*/
/* Rank 0's file                                                           */
/*===------------------------------------------------------------------===*/

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The header, padded with spaces to a multiple of 8 bytes after the 8-byte
   length; `checksums` NULL writes zeros of the same width. */
static void build_header(const braid_rt_checkpoint_writer_t *w,
                         const any_block_t *blocks, const tensor_t *tensors,
                         size_t nt, int with_checksums,
                         braid_rt_buffer_t *out) {
  braid_rt_buffer_put_str(out, "{\"__metadata__\":{");
  braid_rt_buffer_put_json_string(out, BRAID_RT_CHECKPOINT_FORMAT_KEY);
  braid_rt_buffer_put_str(out, ":");
  braid_rt_buffer_put_json_string(out, BRAID_RT_CHECKPOINT_FORMAT);
  for (size_t t = 0; t < nt; ++t) {
    braid_rt_buffer_put_str(out, ",\"" BRAID_RT_CHECKPOINT_CHECKSUM_PREFIX);
    /* The prefix needs no escaping; append the escaped name without its
       opening quote. */
    braid_rt_buffer_t name = {0};
    braid_rt_buffer_put_json_string(&name, blocks[tensors[t].first].name);
    if (name.failed)
      out->failed = 1;
    else
      braid_rt_buffer_put(out, name.data + 1, name.size - 1);
    braid_rt_buffer_free(&name);
    braid_rt_buffer_printf(out, ":\"%016llx\"",
                           with_checksums
                               ? (unsigned long long)tensors[t].checksum
                               : 0ull);
  }
  /* User keys in sorted order, so that equal checkpoints are equal files. */
  char **order = malloc((w->num_meta + 1) * sizeof(*order));
  if (!order) {
    out->failed = 1;
    return;
  }
  if (w->num_meta) /* meta_keys is NULL without user keys */
    memcpy(order, w->meta_keys, w->num_meta * sizeof(*order));
  qsort(order, w->num_meta, sizeof(*order), compare_strings);
  for (size_t m = 0; m < w->num_meta; ++m) {
    size_t i = 0;
    while (w->meta_keys[i] != order[m])
      ++i;
    braid_rt_buffer_put_str(out, ",");
    braid_rt_buffer_put_json_string(out, w->meta_keys[i]);
    braid_rt_buffer_put_str(out, ":");
    braid_rt_buffer_put_json_string(out, w->meta_values[i]);
  }
  free(order);
  braid_rt_buffer_put_str(out, "}");
  for (size_t t = 0; t < nt; ++t) {
    const any_block_t *b = &blocks[tensors[t].first];
    braid_rt_buffer_put_str(out, ",");
    braid_rt_buffer_put_json_string(out, b->name);
    braid_rt_buffer_put_str(out, ":{\"dtype\":\"F32\",\"shape\":[");
    for (int d = 0; d < b->ndims; ++d)
      braid_rt_buffer_printf(out, "%s%lld", d ? "," : "",
                             (long long)b->global[d]);
    braid_rt_buffer_printf(out, "],\"data_offsets\":[%llu,%llu]}",
                           (unsigned long long)tensors[t].begin,
                           (unsigned long long)tensors[t].end);
  }
  braid_rt_buffer_put_str(out, "}");
  while (!out->failed && out->size % 8 != 0)
    braid_rt_buffer_put_str(out, " ");
}

static int write_all(int fd, const void *data, size_t n, uint64_t offset) {
  const char *p = data;
  while (n > 0) {
    ssize_t k = pwrite(fd, p, n, (off_t)offset);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += k;
    n -= (size_t)k;
    offset += (uint64_t)k;
  }
  return 0;
}

/* The state of rank 0's file; `status` sticks at the first failure, whose
   message is then in ctx's last error. */
typedef struct {
  int fd;
  char *tmp;
  braid_rt_status_t status;
} file_t;

static void file_fail_errno(braid_rt_checkpoint_writer_t *w, file_t *f,
                            const char *what) {
  if (f->status == BRAID_RT_OK)
    f->status = braid_rt_fail(w->ctx, BRAID_RT_IO_ERROR,
                              "checkpoint '%s': cannot %s '%s': %s", w->path,
                              what, f->tmp, strerror(errno));
}

/* Writes the 8-byte length and the header at the start of the file. */
static void write_header(braid_rt_checkpoint_writer_t *w, file_t *f,
                         const braid_rt_buffer_t *header) {
  unsigned char len[8];
  uint64_t n = header->size;
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)(n >> (8 * i));
  if (f->status == BRAID_RT_OK &&
      (write_all(f->fd, len, 8, 0) || write_all(f->fd, header->data, n, 8)))
    file_fail_errno(w, f, "write");
}

/* fsyncs the directory holding `path`, so that the rename is durable. Best
   effort: some file systems refuse to open or sync a directory. */
static void sync_directory(const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[4096];
  if (!slash)
    snprintf(dir, sizeof(dir), ".");
  else if ((size_t)(slash - path) < sizeof(dir))
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path),
             path);
  else
    return;
  int fd = open(dir, O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/*===------------------------------------------------------------------===*/
/* Commit                                                                  */
/*===------------------------------------------------------------------===*/

/* Every rank learns whether all are ok (sum of failures == 0). */
static braid_rt_status_t all_ok(braid_rt_checkpoint_writer_t *w, int ok,
                                int *out_all_ok) {
  double failures = ok ? 0 : 1;
  braid_rt_status_t s =
      braid_rt_io_all_reduce_sum_f64(&w->io, &failures, 1);
  *out_all_ok = failures == 0;
  return s;
}

/* Rank 0 says whether it may go on (1) or not (0); a failure of the
   broadcast itself is returned. */
static braid_rt_status_t share_flag(braid_rt_checkpoint_writer_t *w,
                                    int *flag) {
  double v = *flag;
  braid_rt_status_t s = braid_rt_io_broadcast_f64(&w->io, &v, 1, 0);
  *flag = v != 0;
  return s;
}

#define OUTCOME_WORDS (1 + BRAID_RT_IO_MESSAGE_CAPACITY / 4)

/* Every rank returns rank 0's status and message. */
static braid_rt_status_t share_outcome(braid_rt_checkpoint_writer_t *w,
                                       braid_rt_status_t status) {
  double words[OUTCOME_WORDS] = {0};
  int rank = braid_rt_comm_rank(w->comm);
  if (rank == 0) {
    words[0] = status;
    unsigned char message[BRAID_RT_IO_MESSAGE_CAPACITY] = {0};
    if (status != BRAID_RT_OK)
      snprintf((char *)message, sizeof(message), "%s",
               braid_rt_context_last_error(w->ctx));
    bytes_to_words(message, sizeof(message), words + 1);
  }
  braid_rt_status_t s =
      braid_rt_io_broadcast_f64(&w->io, words, OUTCOME_WORDS, 0);
  if (s != BRAID_RT_OK || rank == 0)
    return s != BRAID_RT_OK ? s : status;
  status = (braid_rt_status_t)(int)words[0];
  if (status != BRAID_RT_OK) {
    unsigned char message[BRAID_RT_IO_MESSAGE_CAPACITY + 4];
    words_to_bytes(words + 1, OUTCOME_WORDS - 1, message);
    message[BRAID_RT_IO_MESSAGE_CAPACITY - 1] = '\0';
    braid_rt_fail(w->ctx, status, "%s", (const char *)message);
  }
  return status;
}

/* Step 3 on a rank other than 0: send the blocks it owns, in order. */
static braid_rt_status_t send_blocks(braid_rt_checkpoint_writer_t *w,
                                     const any_block_t *blocks, size_t nblocks) {
  int rank = braid_rt_comm_rank(w->comm);
  for (size_t i = 0; i < nblocks; ++i) {
    const any_block_t *b = &blocks[i];
    if (b->rank != rank || b->duplicate)
      continue;
    const float *data = w->blocks[b->index].data;
    uint64_t n = braid_rt_shape_volume(b->ndims, b->local);
    for (uint64_t e = 0; e < n; e += CHUNK_FLOATS) {
      uint64_t k = n - e < CHUNK_FLOATS ? n - e : CHUNK_FLOATS;
      braid_rt_status_t s =
          braid_rt_io_send_f32(&w->io, data + e, (size_t)k, 0, DATA_TAG);
      if (s != BRAID_RT_OK)
        return s;
    }
  }
  return BRAID_RT_OK;
}

/* Step 3 on rank 0: assemble each tensor from its blocks and append it to
   the file. A failure to allocate or write is recorded in f->status and
   the blocks are still received, so that the other ranks can finish. */
static braid_rt_status_t receive_and_write(braid_rt_checkpoint_writer_t *w,
                                           file_t *f, const any_block_t *blocks,
                                           tensor_t *tensors, size_t nt,
                                           uint64_t data_start, float *chunk) {
  for (size_t t = 0; t < nt; ++t) {
    const any_block_t *first = &blocks[tensors[t].first];
    uint64_t volume = braid_rt_shape_volume(first->ndims, first->global);
    float *tensor = NULL;
    if (f->status == BRAID_RT_OK) {
      tensor = malloc(volume ? (size_t)volume * sizeof(float) : 1);
      if (!tensor)
        f->status = braid_rt_fail(w->ctx, BRAID_RT_OUT_OF_MEMORY,
                                  "checkpoint '%s': out of memory for tensor "
                                  "'%s' on rank 0",
                                  w->path, first->name);
    }
    for (size_t i = tensors[t].first;
         i < tensors[t].first + tensors[t].count; ++i) {
      const any_block_t *b = &blocks[i];
      if (b->duplicate)
        continue;
      uint64_t n = braid_rt_shape_volume(b->ndims, b->local);
      if (b->rank == 0) {
        if (tensor)
          braid_rt_block_to_tensor_f32(tensor, b->ndims, b->global,
                                       b->offsets, b->local, 0, n,
                                       w->blocks[b->index].data);
        continue;
      }
      for (uint64_t e = 0; e < n; e += CHUNK_FLOATS) {
        uint64_t k = n - e < CHUNK_FLOATS ? n - e : CHUNK_FLOATS;
        braid_rt_status_t s = braid_rt_io_recv_f32(&w->io, chunk, (size_t)k,
                                                   b->rank, DATA_TAG);
        if (s != BRAID_RT_OK) {
          free(tensor);
          return s;
        }
        if (tensor)
          braid_rt_block_to_tensor_f32(tensor, b->ndims, b->global,
                                       b->offsets, b->local, e, k, chunk);
      }
    }
    if (tensor && f->status == BRAID_RT_OK) {
      size_t bytes = (size_t)volume * sizeof(float);
      if (!braid_rt_little_endian()) {
        unsigned char *p = (unsigned char *)tensor;
        for (size_t i = 0; i < bytes; i += 4) {
          unsigned char t0 = p[i], t1 = p[i + 1];
          p[i] = p[i + 3], p[i + 1] = p[i + 2], p[i + 2] = t1, p[i + 3] = t0;
        }
      }
      tensors[t].checksum = braid_rt_fnv1a64((const char *)tensor, bytes);
      if (write_all(f->fd, tensor, bytes, data_start + tensors[t].begin))
        file_fail_errno(w, f, "write");
    }
    free(tensor);
  }
  return BRAID_RT_OK;
}

/* Rank 0: steps 2 to 4. Communication failures are returned at once (the
   communicator is then unusable); file failures go into the outcome. */
static braid_rt_status_t write_on_rank0(braid_rt_checkpoint_writer_t *w,
                                        const any_block_t *blocks,
                                        tensor_t *tensors, size_t nt) {
  file_t f = {-1, NULL, BRAID_RT_OK};
  braid_rt_buffer_t header = {0};
  float *chunk = NULL;
  uint64_t offset = 0;
  for (size_t t = 0; t < nt; ++t) {
    const any_block_t *b = &blocks[tensors[t].first];
    tensors[t].begin = offset;
    offset += braid_rt_shape_volume(b->ndims, b->global) * sizeof(float);
    tensors[t].end = offset;
  }
  build_header(w, blocks, tensors, nt, 0, &header);
  size_t tmp_len = strlen(w->path) + 5;
  f.tmp = malloc(tmp_len);
  chunk = malloc(CHUNK_FLOATS * sizeof(float));
  if (header.failed || !f.tmp || !chunk) {
    f.status = braid_rt_fail(w->ctx, BRAID_RT_OUT_OF_MEMORY,
                             "checkpoint '%s': out of memory on rank 0",
                             w->path);
  } else {
    snprintf(f.tmp, tmp_len, "%s.tmp", w->path);
    f.fd = open(f.tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f.fd < 0)
      file_fail_errno(w, &f, "create");
  }
  uint64_t data_start = 8 + header.size;
  write_header(w, &f, &header);

  int go = f.status == BRAID_RT_OK;
  braid_rt_status_t s = share_flag(w, &go);
  if (s == BRAID_RT_OK && go)
    s = receive_and_write(w, &f, blocks, tensors, nt, data_start, chunk);
  if (s == BRAID_RT_OK && f.status == BRAID_RT_OK) {
    braid_rt_buffer_t final_header = {0};
    build_header(w, blocks, tensors, nt, 1, &final_header);
    if (final_header.failed || final_header.size != header.size)
      f.status = braid_rt_fail(w->ctx, BRAID_RT_INTERNAL,
                               "checkpoint '%s': the final header could not "
                               "be built in place of the first",
                               w->path);
    write_header(w, &f, &final_header);
    braid_rt_buffer_free(&final_header);
    if (f.status == BRAID_RT_OK && fsync(f.fd) != 0)
      file_fail_errno(w, &f, "fsync");
  }
  if (f.fd >= 0 && close(f.fd) != 0)
    file_fail_errno(w, &f, "close");
  if (s == BRAID_RT_OK && f.status == BRAID_RT_OK) {
    if (rename(f.tmp, w->path) != 0)
      f.status = braid_rt_fail(w->ctx, BRAID_RT_IO_ERROR,
                               "checkpoint '%s': cannot rename '%s' over it: "
                               "%s",
                               w->path, f.tmp, strerror(errno));
    else
      sync_directory(w->path);
  }
  if (f.fd >= 0 && (s != BRAID_RT_OK || f.status != BRAID_RT_OK))
    unlink(f.tmp);
  free(f.tmp);
  free(chunk);
  braid_rt_buffer_free(&header);
  if (s != BRAID_RT_OK)
    return s;
  return share_outcome(w, f.status);
}

braid_rt_status_t
braid_rt_checkpoint_writer_commit(braid_rt_checkpoint_writer_t *w) {
  if (!w)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_writer_commit: the writer is "
                         "NULL");
  if (w->committed)
    return braid_rt_fail(w->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': commit called twice", w->path);
  w->committed = 1;
  braid_rt_context_t *ctx = w->ctx;
  int rank = braid_rt_comm_rank(w->comm), size = braid_rt_comm_size(w->comm);

  /* Step 1: exchange the descriptors. */
  braid_rt_buffer_t mine = {0};
  encode_blocks(w, &mine);
  double my_words = mine.failed ? -1 : (double)words_for(mine.size);
  double *counts = malloc((size_t)size * sizeof(double));
  double *send = NULL, *all = NULL;
  unsigned char *bytes = NULL;
  any_block_t *blocks = NULL;
  tensor_t *tensors = NULL;
  int ok = 0;
  braid_rt_status_t s;
  s = all_ok(w, counts != NULL && !mine.failed, &ok);
  if (s != BRAID_RT_OK)
    goto done;
  if (!ok) {
    s = braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                      "checkpoint '%s': a rank ran out of memory preparing "
                      "its block list",
                      w->path);
    goto done;
  }
  s = braid_rt_io_all_gather_f64(&w->io, &my_words, counts, 1);
  if (s != BRAID_RT_OK)
    goto done;
  size_t max_words = 0;
  for (int r = 0; r < size; ++r)
    if ((size_t)counts[r] > max_words)
      max_words = (size_t)counts[r];
  send = calloc(max_words + 1, sizeof(double));
  all = malloc(((size_t)size * max_words + 1) * sizeof(double));
  bytes = malloc((size_t)size * max_words * 4 + 1);
  if (send)
    bytes_to_words((const unsigned char *)mine.data, mine.size, send);
  s = all_ok(w, send && all && bytes, &ok);
  if (s != BRAID_RT_OK)
    goto done;
  if (!ok) {
    s = braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                      "checkpoint '%s': a rank ran out of memory for the "
                      "block lists (%zu bytes per rank)",
                      w->path, max_words * 4);
    goto done;
  }
  s = braid_rt_io_all_gather_f64(&w->io, send, all, max_words);
  if (s != BRAID_RT_OK)
    goto done;
  words_to_bytes(all, (size_t)size * max_words, bytes);
  size_t nblocks = 0;
  for (int r = 0; r < size; ++r)
    nblocks += get_u32(bytes + (size_t)r * max_words * 4);
  blocks = malloc((nblocks + 1) * sizeof(*blocks));
  tensors = malloc((nblocks + 1) * sizeof(*tensors));
  s = all_ok(w, blocks && tensors, &ok);
  if (s != BRAID_RT_OK)
    goto done;
  if (!ok) {
    s = braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                      "checkpoint '%s': a rank ran out of memory for %zu "
                      "block descriptors",
                      w->path, nblocks);
    goto done;
  }
  size_t n = 0;
  for (int r = 0; r < size; ++r)
    decode_blocks(bytes + (size_t)r * max_words * 4, r, blocks, &n);
  qsort(blocks, nblocks, sizeof(*blocks), compare_blocks);
  size_t nt = 0;
  s = check_coverage(w, blocks, nblocks, tensors, &nt);
  if (s != BRAID_RT_OK)
    goto done; /* the same verdict on every rank */

  /* Steps 2 to 4. */
  if (rank == 0) {
    s = write_on_rank0(w, blocks, tensors, nt);
  } else {
    int go = 0;
    s = share_flag(w, &go);
    if (s == BRAID_RT_OK && go)
      s = send_blocks(w, blocks, nblocks);
    if (s == BRAID_RT_OK)
      s = share_outcome(w, BRAID_RT_OK);
  }

done:
  braid_rt_buffer_free(&mine);
  free(counts);
  free(send);
  free(all);
  free(bytes);
  free(blocks);
  free(tensors);
  return s;
}

/*===- checkpoint_reader.c - Read blocks of a safetensors checkpoint -----===*/
/*
 * Opening reads and checks the header only; a tensor's data is read when a
 * block of it is asked for, and checked against its checksum the first
 * time. Every field of the file is untrusted: each check that fails says
 * which file and what is wrong, with DATA_CORRUPT.
 */

#include "braid/rt/checkpoint.h"

#include "braid/rt/init.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DIMS BRAID_RT_CHECKPOINT_MAX_DIMS
/* The bound the format's reference implementation (and Python's reader)
   puts on the header. */
#define MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000)

typedef enum { F64, F32, F16, BF16, I64, I32, NUM_DTYPES } dtype_t;
static const char *const dtype_names[NUM_DTYPES] = {"F64",  "F32", "F16",
                                                    "BF16", "I64", "I32"};
static const unsigned dtype_sizes[NUM_DTYPES] = {8, 4, 2, 2, 8, 4};

typedef struct {
  char *name;
  dtype_t dtype;
  int ndims;
  int64_t shape[MAX_DIMS];
  uint64_t begin, end;
  int has_checksum, verified;
  uint64_t checksum;
} tensor_t;

struct braid_rt_checkpoint_reader {
  braid_rt_context_t *ctx;
  char *path;
  int fd;
  uint64_t data_start, data_len;
  tensor_t *tensors; /* in data order */
  size_t num_tensors;
  tensor_t **by_name; /* sorted by name */
  char **meta_keys, **meta_values; /* sorted by key */
  size_t num_meta;
};

static braid_rt_status_t corrupt(braid_rt_checkpoint_reader_t *r,
                                 const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* DATA_CORRUPT with "checkpoint 'path': " before the message. */
static braid_rt_status_t corrupt(braid_rt_checkpoint_reader_t *r,
                                 const char *format, ...) {
  char message[BRAID_RT_IO_MESSAGE_CAPACITY];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return braid_rt_fail(r->ctx, BRAID_RT_DATA_CORRUPT, "checkpoint '%s': %s",
                       r->path, message);
}

void braid_rt_checkpoint_close(braid_rt_checkpoint_reader_t *r) {
  if (!r)
    return;
  if (r->fd >= 0)
    close(r->fd);
  for (size_t i = 0; i < r->num_tensors; ++i)
    free(r->tensors[i].name);
  for (size_t i = 0; i < r->num_meta; ++i) {
    free(r->meta_keys[i]);
    free(r->meta_values[i]);
  }
  free(r->tensors);
  free(r->by_name);
  free(r->meta_keys);
  free(r->meta_values);
  free(r->path);
  free(r);
}

/* Reads exactly n bytes at `offset`; -1 with errno, or -2 at end of file. */
static int read_all(int fd, void *buf, size_t n, uint64_t offset) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = pread(fd, p, n, (off_t)offset);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (k == 0)
      return -2;
    p += k;
    n -= (size_t)k;
    offset += (uint64_t)k;
  }
  return 0;
}

static int compare_by_begin(const void *pa, const void *pb) {
  const tensor_t *a = pa, *b = pb;
  if (a->begin != b->begin)
    return a->begin < b->begin ? -1 : 1;
  return (a->end > b->end) - (a->end < b->end);
}

static int compare_by_name(const void *pa, const void *pb) {
  return strcmp((*(tensor_t *const *)pa)->name, (*(tensor_t *const *)pb)->name);
}

static tensor_t *find_tensor(const braid_rt_checkpoint_reader_t *r,
                             const char *name) {
  size_t lo = 0, hi = r->num_tensors;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(r->by_name[mid]->name, name);
    if (c == 0)
      return r->by_name[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static long find_meta(const braid_rt_checkpoint_reader_t *r, const char *key) {
  size_t lo = 0, hi = r->num_meta;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(r->meta_keys[mid], key);
    if (c == 0)
      return (long)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* Parses one tensor entry of the header. */
static braid_rt_status_t parse_entry(braid_rt_checkpoint_reader_t *r,
                                     const char *name, const braid_json_t *v,
                                     tensor_t *t) {
  if (v->kind != BRAID_JSON_OBJECT || v->count != 3)
    return corrupt(r, "tensor '%.200s': its entry must be an object with "
                      "exactly the keys dtype, shape and data_offsets",
                   name);
  const braid_json_t *dtype = braid_json_get(v, "dtype");
  const braid_json_t *shape = braid_json_get(v, "shape");
  const braid_json_t *offsets = braid_json_get(v, "data_offsets");
  if (!dtype || !shape || !offsets)
    return corrupt(r, "tensor '%.200s': its entry must be an object with "
                      "exactly the keys dtype, shape and data_offsets",
                   name);
  if (dtype->kind != BRAID_JSON_STRING)
    return corrupt(r, "tensor '%.200s': dtype is not a string", name);
  int found = -1;
  for (int d = 0; d < NUM_DTYPES; ++d)
    if (strcmp(dtype->string, dtype_names[d]) == 0)
      found = d;
  if (found < 0)
    return corrupt(r, "tensor '%.200s' has unknown dtype '%.32s' (known: F64 "
                      "F32 F16 BF16 I64 I32)",
                   name, dtype->string);
  t->dtype = (dtype_t)found;
  if (shape->kind != BRAID_JSON_ARRAY)
    return corrupt(r, "tensor '%.200s': shape is not an array", name);
  if (shape->count > MAX_DIMS)
    return corrupt(r, "tensor '%.200s' has %zu dimensions; at most %d are "
                      "supported",
                   name, shape->count, MAX_DIMS);
  t->ndims = (int)shape->count;
  int empty = 0;
  for (int d = 0; d < t->ndims; ++d) {
    const braid_json_t *dim = &shape->items[d];
    if (dim->kind != BRAID_JSON_NUMBER || !dim->is_uint ||
        dim->uint_value > ((uint64_t)1 << 40))
      return corrupt(r, "tensor '%.200s': dimension %d of its shape is not "
                        "an integer in [0, 2^40]",
                     name, d);
    t->shape[d] = (int64_t)dim->uint_value;
    empty |= dim->uint_value == 0;
  }
  /* Bounded before each product, so that it cannot wrap: [2^32, 2^32]
     would wrap to 0 elements and pass for an empty tensor. */
  uint64_t volume = empty ? 0 : 1;
  for (int d = 0; d < t->ndims && !empty; ++d) {
    if ((uint64_t)t->shape[d] > ((uint64_t)1 << 40) / volume)
      return corrupt(r, "tensor '%.200s' has more than 2^40 elements", name);
    volume *= (uint64_t)t->shape[d];
  }
  if (offsets->kind != BRAID_JSON_ARRAY || offsets->count != 2 ||
      offsets->items[0].kind != BRAID_JSON_NUMBER ||
      !offsets->items[0].is_uint ||
      offsets->items[1].kind != BRAID_JSON_NUMBER ||
      !offsets->items[1].is_uint)
    return corrupt(r, "tensor '%.200s': data_offsets must be two "
                      "non-negative integers",
                   name);
  t->begin = offsets->items[0].uint_value;
  t->end = offsets->items[1].uint_value;
  if (t->begin > t->end || t->end > r->data_len)
    return corrupt(r, "tensor '%.200s': data_offsets [%llu, %llu] are out of "
                      "range of the %llu-byte data section (truncated file?)",
                   name, (unsigned long long)t->begin,
                   (unsigned long long)t->end,
                   (unsigned long long)r->data_len);
  uint64_t expected = volume * dtype_sizes[t->dtype];
  if (t->end - t->begin != expected) {
    char s[256];
    braid_rt_format_shape(s, sizeof(s), t->ndims, t->shape);
    return corrupt(r, "tensor '%.200s': data_offsets [%llu, %llu] hold %llu "
                      "bytes but %s%s needs %llu",
                   name, (unsigned long long)t->begin,
                   (unsigned long long)t->end,
                   (unsigned long long)(t->end - t->begin),
                   dtype_names[t->dtype], s, (unsigned long long)expected);
  }
  return BRAID_RT_OK;
}

static int parse_hex64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (strlen(s) != 16)
    return 0;
  for (int i = 0; i < 16; ++i) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                                  : -1;
    if (d < 0)
      return 0;
    v = v * 16 + (uint64_t)d;
  }
  *out = v;
  return 1;
}

/* Sorts the metadata by key (keys are unique: the parser refuses
   duplicates). */
static void sort_metadata(braid_rt_checkpoint_reader_t *r) {
  for (size_t i = 1; i < r->num_meta; ++i) {
    char *k = r->meta_keys[i], *v = r->meta_values[i];
    size_t j = i;
    while (j > 0 && strcmp(r->meta_keys[j - 1], k) > 0) {
      r->meta_keys[j] = r->meta_keys[j - 1];
      r->meta_values[j] = r->meta_values[j - 1];
      --j;
    }
    r->meta_keys[j] = k;
    r->meta_values[j] = v;
  }
}

/* Fills r from the parsed header. */
static braid_rt_status_t load_header(braid_rt_checkpoint_reader_t *r,
                                     const braid_json_t *root) {
  if (root->kind != BRAID_JSON_OBJECT)
    return corrupt(r, "the header is not a JSON object");
  const braid_json_t *meta = braid_json_get(root, "__metadata__");
  size_t ntensors = root->count - (meta ? 1 : 0);
  r->tensors = calloc(ntensors + 1, sizeof(*r->tensors));
  r->by_name = calloc(ntensors + 1, sizeof(*r->by_name));
  if (!r->tensors || !r->by_name)
    return braid_rt_fail(r->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "checkpoint '%s': out of memory", r->path);
  if (meta) {
    if (meta->kind != BRAID_JSON_OBJECT)
      return corrupt(r, "__metadata__ is not an object");
    r->meta_keys = calloc(meta->count + 1, sizeof(char *));
    r->meta_values = calloc(meta->count + 1, sizeof(char *));
    if (!r->meta_keys || !r->meta_values)
      return braid_rt_fail(r->ctx, BRAID_RT_OUT_OF_MEMORY,
                           "checkpoint '%s': out of memory", r->path);
    for (size_t i = 0; i < meta->count; ++i) {
      if (meta->items[i].kind != BRAID_JSON_STRING)
        return corrupt(r, "__metadata__ value '%.200s' is not a string",
                       meta->keys[i]);
      r->meta_keys[i] = malloc(strlen(meta->keys[i]) + 1);
      r->meta_values[i] = malloc(strlen(meta->items[i].string) + 1);
      ++r->num_meta;
      if (!r->meta_keys[i] || !r->meta_values[i])
        return braid_rt_fail(r->ctx, BRAID_RT_OUT_OF_MEMORY,
                             "checkpoint '%s': out of memory", r->path);
      strcpy(r->meta_keys[i], meta->keys[i]);
      strcpy(r->meta_values[i], meta->items[i].string);
    }
    sort_metadata(r);
  }
  for (size_t i = 0; i < root->count; ++i) {
    if (strcmp(root->keys[i], "__metadata__") == 0)
      continue;
    tensor_t *t = &r->tensors[r->num_tensors];
    braid_rt_status_t s = parse_entry(r, root->keys[i], &root->items[i], t);
    if (s != BRAID_RT_OK)
      return s;
    t->name = malloc(strlen(root->keys[i]) + 1);
    if (!t->name)
      return braid_rt_fail(r->ctx, BRAID_RT_OUT_OF_MEMORY,
                           "checkpoint '%s': out of memory", r->path);
    strcpy(t->name, root->keys[i]);
    ++r->num_tensors;
  }

  /* The tensors must tile the data section: no overlap, no gap, nothing
     after the last. */
  qsort(r->tensors, r->num_tensors, sizeof(*r->tensors), compare_by_begin);
  uint64_t covered = 0;
  for (size_t i = 0; i < r->num_tensors; ++i) {
    const tensor_t *t = &r->tensors[i];
    if (t->begin < covered)
      return corrupt(r, "tensors '%.200s' and '%.200s' overlap in the data "
                        "section",
                     r->tensors[i - 1].name, t->name);
    if (t->begin > covered)
      return corrupt(r, "a gap of %llu bytes before tensor '%.200s' in the "
                        "data section",
                     (unsigned long long)(t->begin - covered), t->name);
    covered = t->end;
  }
  if (covered != r->data_len)
    return corrupt(r, "the data section has %llu bytes but the tensors "
                      "cover %llu",
                   (unsigned long long)r->data_len,
                   (unsigned long long)covered);
  for (size_t i = 0; i < r->num_tensors; ++i)
    r->by_name[i] = &r->tensors[i];
  qsort(r->by_name, r->num_tensors, sizeof(*r->by_name), compare_by_name);

  /* A Braid checkpoint carries a checksum for each tensor, and nothing
     else under the reserved prefix. */
  const char *format =
      braid_rt_checkpoint_metadata(r, BRAID_RT_CHECKPOINT_FORMAT_KEY);
  int reserved = 0;
  for (size_t i = 0; i < r->num_meta; ++i)
    reserved |= strncmp(r->meta_keys[i], "braid.", 6) == 0;
  if (!reserved)
    return BRAID_RT_OK; /* a safetensors file from another tool */
  if (!format)
    return corrupt(r, "metadata keys starting with 'braid.' but no %s",
                   BRAID_RT_CHECKPOINT_FORMAT_KEY);
  if (strcmp(format, BRAID_RT_CHECKPOINT_FORMAT) != 0)
    return corrupt(r, "unknown checkpoint format '%.64s' (this runtime reads "
                      "'%s')",
                   format, BRAID_RT_CHECKPOINT_FORMAT);
  const size_t prefix_len = strlen(BRAID_RT_CHECKPOINT_CHECKSUM_PREFIX);
  for (size_t i = 0; i < r->num_meta; ++i) {
    const char *key = r->meta_keys[i];
    if (strncmp(key, "braid.", 6) != 0 ||
        strcmp(key, BRAID_RT_CHECKPOINT_FORMAT_KEY) == 0)
      continue;
    if (strncmp(key, BRAID_RT_CHECKPOINT_CHECKSUM_PREFIX, prefix_len) != 0)
      return corrupt(r, "unknown reserved metadata key '%.200s'", key);
    tensor_t *t = find_tensor(r, key + prefix_len);
    if (!t)
      return corrupt(r, "a checksum for tensor '%.200s', which the file does "
                        "not hold",
                     key + prefix_len);
    if (!parse_hex64(r->meta_values[i], &t->checksum))
      return corrupt(r, "the checksum of tensor '%.200s' is not 16 lowercase "
                        "hex digits",
                     t->name);
    t->has_checksum = 1;
  }
  for (size_t i = 0; i < r->num_tensors; ++i)
    if (!r->tensors[i].has_checksum)
      return corrupt(r, "tensor '%.200s' has no checksum", r->tensors[i].name);
  return BRAID_RT_OK;
}

braid_rt_status_t
braid_rt_checkpoint_open(braid_rt_context_t *ctx, const char *path,
                         braid_rt_checkpoint_reader_t **out_reader) {
  if (!ctx || !path || !out_reader)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_open: NULL argument");
  *out_reader = NULL;
  braid_rt_checkpoint_reader_t *r = calloc(1, sizeof(*r));
  if (r) {
    r->fd = -1;
    r->path = malloc(strlen(path) + 1);
  }
  if (!r || !r->path) {
    free(r);
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_checkpoint_open: out of memory");
  }
  strcpy(r->path, path);
  r->ctx = ctx;
  braid_rt_status_t s = BRAID_RT_OK;
  char *header = NULL;
  braid_json_t *root = NULL;

  r->fd = open(path, O_RDONLY);
  struct stat st;
  if (r->fd < 0 || fstat(r->fd, &st) != 0) {
    s = braid_rt_fail(ctx, BRAID_RT_IO_ERROR,
                      "checkpoint '%s': cannot open: %s", path,
                      strerror(errno));
    goto done;
  }
  uint64_t file_size = (uint64_t)st.st_size;
  unsigned char len_bytes[8];
  if (file_size < 8 || read_all(r->fd, len_bytes, 8, 0) != 0) {
    s = corrupt(r, "the file is %llu bytes, too short for the 8-byte header "
                   "length",
                (unsigned long long)file_size);
    goto done;
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = header_len << 8 | len_bytes[i];
  if (header_len > MAX_HEADER_BYTES || header_len > file_size - 8) {
    s = corrupt(r, "header length %llu runs past the end of the file (%llu "
                   "bytes) or exceeds %llu; truncated or not a safetensors "
                   "file",
                (unsigned long long)header_len,
                (unsigned long long)file_size,
                (unsigned long long)MAX_HEADER_BYTES);
    goto done;
  }
  header = malloc((size_t)header_len + 1);
  if (!header) {
    s = braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                      "checkpoint '%s': out of memory for a %llu-byte header",
                      path, (unsigned long long)header_len);
    goto done;
  }
  if (read_all(r->fd, header, (size_t)header_len, 8) != 0) {
    s = braid_rt_fail(ctx, BRAID_RT_IO_ERROR,
                      "checkpoint '%s': cannot read the header: %s", path,
                      strerror(errno));
    goto done;
  }
  r->data_start = 8 + header_len;
  r->data_len = file_size - r->data_start;
  char error[256];
  if (braid_json_parse(header, (size_t)header_len, &root, error,
                       sizeof(error)) != 0) {
    s = corrupt(r, "the header is not valid JSON: %s", error);
    goto done;
  }
  s = load_header(r, root);

done:
  free(header);
  braid_json_free(root);
  if (s != BRAID_RT_OK) {
    braid_rt_checkpoint_close(r);
    return s;
  }
  *out_reader = r;
  return BRAID_RT_OK;
}

/* Reads tensor t's bytes (malloc'ed into *out) and checks its checksum the
   first time. */
static braid_rt_status_t read_tensor(braid_rt_checkpoint_reader_t *r,
                                     tensor_t *t, unsigned char **out) {
  size_t n = (size_t)(t->end - t->begin);
  unsigned char *bytes = malloc(n ? n : 1);
  if (!bytes)
    return braid_rt_fail(r->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "checkpoint '%s': out of memory for tensor '%s' "
                         "(%zu bytes)",
                         r->path, t->name, n);
  int rc = read_all(r->fd, bytes, n, r->data_start + t->begin);
  if (rc != 0) {
    free(bytes);
    if (rc == -2)
      return corrupt(r, "tensor '%.200s': the file ends inside its data (it "
                        "was truncated after it was opened)",
                     t->name);
    return braid_rt_fail(r->ctx, BRAID_RT_IO_ERROR,
                         "checkpoint '%s': cannot read tensor '%s': %s",
                         r->path, t->name, strerror(errno));
  }
  if (t->has_checksum && !t->verified) {
    uint64_t h = braid_rt_fnv1a64((const char *)bytes, n);
    if (h != t->checksum) {
      free(bytes);
      return corrupt(r, "tensor '%.200s': its data hashes to %016llx but the "
                        "header says %016llx; the file is corrupt",
                     t->name, (unsigned long long)h,
                     (unsigned long long)t->checksum);
    }
    t->verified = 1;
  }
  *out = bytes;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_checkpoint_verify(braid_rt_checkpoint_reader_t *r) {
  if (!r)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_verify: the reader is NULL");
  for (size_t i = 0; i < r->num_tensors; ++i) {
    unsigned char *bytes = NULL;
    braid_rt_status_t s = read_tensor(r, &r->tensors[i], &bytes);
    free(bytes);
    if (s != BRAID_RT_OK)
      return s;
  }
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_checkpoint_read_block_f32(
    braid_rt_checkpoint_reader_t *r, const char *name, int ndims,
    const int64_t *global_shape, const int64_t *offsets,
    const int64_t *local_shape, float *out_data) {
  if (!r)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_read_block_f32: the reader is "
                         "NULL");
  if (!name || ndims < 0 || ndims > MAX_DIMS ||
      (ndims > 0 && (!global_shape || !offsets || !local_shape)))
    return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': read_block_f32: NULL name or "
                         "shape, or %d dimensions (at most %d)",
                         r->path, ndims, MAX_DIMS);
  tensor_t *t = find_tensor(r, name);
  if (!t)
    return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s' has no tensor '%s'", r->path, name);
  char expected[256], found[256], o[256], l[256];
  braid_rt_format_shape(expected, sizeof(expected), ndims, global_shape);
  braid_rt_format_shape(found, sizeof(found), t->ndims, t->shape);
  if (t->ndims != ndims ||
      memcmp(t->shape, global_shape, (size_t)ndims * sizeof(int64_t)) != 0)
    return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': tensor '%s' has shape %s but %s "
                         "was expected",
                         r->path, name, found, expected);
  if (t->dtype != F32 && t->dtype != F64)
    return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': tensor '%s' is %s; read_block_f32 "
                         "reads F32 or F64",
                         r->path, name, dtype_names[t->dtype]);
  for (int d = 0; d < ndims; ++d)
    if (offsets[d] < 0 || local_shape[d] < 0 ||
        local_shape[d] > global_shape[d] ||
        offsets[d] > global_shape[d] - local_shape[d]) {
      braid_rt_format_shape(o, sizeof(o), ndims, offsets);
      braid_rt_format_shape(l, sizeof(l), ndims, local_shape);
      return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                           "checkpoint '%s': tensor '%s': the block of shape "
                           "%s at offsets %s leaves its shape %s in dimension "
                           "%d",
                           r->path, name, l, o, found, d);
    }
  uint64_t n = braid_rt_shape_volume(ndims, local_shape);
  if (n > 0 && !out_data)
    return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s': read_block_f32 of '%s': out_data "
                         "is NULL",
                         r->path, name);
  unsigned char *bytes = NULL;
  braid_rt_status_t s = read_tensor(r, t, &bytes);
  if (s != BRAID_RT_OK)
    return s;
  /* Decode the whole tensor to host f32, then copy the block out. */
  uint64_t volume = braid_rt_shape_volume(t->ndims, t->shape);
  float *values = t->dtype == F32 ? (float *)(void *)bytes
                                  : malloc(volume ? volume * sizeof(float) : 1);
  if (!values) {
    free(bytes);
    return braid_rt_fail(r->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "checkpoint '%s': out of memory converting '%s'",
                         r->path, name);
  }
  unsigned size = dtype_sizes[t->dtype];
  for (uint64_t i = 0; i < volume; ++i) {
    const unsigned char *p = bytes + i * size;
    uint64_t bits = 0;
    for (int k = (int)size - 1; k >= 0; --k)
      bits = bits << 8 | p[k];
    if (t->dtype == F32) {
      uint32_t b32 = (uint32_t)bits;
      memcpy(&values[i], &b32, 4);
    } else {
      double d;
      memcpy(&d, &bits, 8);
      values[i] = (float)d;
    }
  }
  braid_rt_tensor_to_block_f32(values, ndims, global_shape, offsets,
                               local_shape, 0, n, out_data);
  if ((void *)values != (void *)bytes)
    free(values);
  free(bytes);
  return BRAID_RT_OK;
}

size_t braid_rt_checkpoint_num_tensors(const braid_rt_checkpoint_reader_t *r) {
  return r ? r->num_tensors : 0;
}

const char *braid_rt_checkpoint_tensor_name(const braid_rt_checkpoint_reader_t *r,
                                            size_t i) {
  return r && i < r->num_tensors ? r->tensors[i].name : NULL;
}

braid_rt_status_t
braid_rt_checkpoint_tensor_shape(braid_rt_checkpoint_reader_t *r,
                                 const char *name, int *out_ndims,
                                 int64_t *out_shape) {
  if (!r || !name || !out_ndims || !out_shape)
    return braid_rt_fail(r ? r->ctx : NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_checkpoint_tensor_shape: NULL argument");
  const tensor_t *t = find_tensor(r, name);
  if (!t)
    return braid_rt_fail(r->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "checkpoint '%s' has no tensor '%s'", r->path, name);
  *out_ndims = t->ndims;
  memcpy(out_shape, t->shape, (size_t)t->ndims * sizeof(int64_t));
  return BRAID_RT_OK;
}

const char *braid_rt_checkpoint_metadata(const braid_rt_checkpoint_reader_t *r,
                                         const char *key) {
  if (!r || !key)
    return NULL;
  long i = find_meta(r, key);
  return i < 0 ? NULL : r->meta_values[i];
}

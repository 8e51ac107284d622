/*===- internal.h - Private helpers of the checkpoint and data library ---===*/
/*
 * braid_rt_io is written against the runtime's public API (communicators,
 * collectives and memory.h) so that it works over every backend; the only
 * private entry point it uses is braid_rt_fail, which each backend has
 * (src/common/backend/errors.c) to record a context's last error.
 */
#ifndef BRAID_RT_IO_INTERNAL_H
#define BRAID_RT_IO_INTERNAL_H

#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/status.h"

#include <stddef.h>
#include <stdint.h>

/* Records a printf-style message as ctx's last error (the context-less
   buffer when ctx is NULL) and returns `status`. */
braid_rt_status_t braid_rt_fail(braid_rt_context_t *ctx,
                                braid_rt_status_t status, const char *format,
                                ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The longest message the runtime keeps (src/cpu/internal.h). */
#define BRAID_RT_IO_MESSAGE_CAPACITY 512

/*--- A growable byte buffer; `failed` sticks once an allocation fails. ---*/

typedef struct {
  char *data;
  size_t size, capacity;
  int failed;
} braid_rt_buffer_t;

void braid_rt_buffer_put(braid_rt_buffer_t *b, const void *bytes, size_t n);
void braid_rt_buffer_put_str(braid_rt_buffer_t *b, const char *s);
void braid_rt_buffer_printf(braid_rt_buffer_t *b, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends `s` as a JSON string literal (quotes, escapes). */
void braid_rt_buffer_put_json_string(braid_rt_buffer_t *b, const char *s);
void braid_rt_buffer_free(braid_rt_buffer_t *b);

/*--- A strict JSON parser (RFC 8259) for safetensors headers. ---*/

typedef enum {
  BRAID_JSON_NULL,
  BRAID_JSON_BOOL,
  BRAID_JSON_NUMBER,
  BRAID_JSON_STRING,
  BRAID_JSON_ARRAY,
  BRAID_JSON_OBJECT,
} braid_json_kind_t;

typedef struct braid_json braid_json_t;
struct braid_json {
  braid_json_kind_t kind;
  int boolean;
  /* Numbers: nonzero when the literal is a non-negative integer without
     fraction or exponent that fits in uint64_t, held in `uint_value`. */
  int is_uint;
  uint64_t uint_value;
  /* Strings: NUL-terminated UTF-8 (a string holding U+0000 is refused). */
  char *string;
  /* Arrays and objects: `count` items; objects also have keys. */
  size_t count;
  braid_json_t *items;
  char **keys;
};

/* Parses `len` bytes of `text` as one JSON value, surrounded by optional
   whitespace. Refuses anything RFC 8259 does not allow (trailing commas,
   comments, leading zeros, raw control characters in strings, invalid
   UTF-8, lone surrogates), duplicate keys in an object, and nesting deeper
   than 64. On success returns 0 and sets *out (free with braid_json_free);
   on failure returns -1 and writes "at byte N: what" to `error`. */
int braid_json_parse(const char *text, size_t len, braid_json_t **out,
                     char *error, size_t error_capacity);

/* The value of `key` in object `obj`, or NULL. */
const braid_json_t *braid_json_get(const braid_json_t *obj, const char *key);

void braid_json_free(braid_json_t *value);

/* Nonzero if `s` (NUL-terminated) is valid UTF-8. */
int braid_rt_utf8_valid(const char *s);

/*--- The writer's collectives on host buffers (host_collectives.c). ---*/

/* A communicator with, where device memory is not host memory, a device
   buffer that the calls below stage host buffers through (grown as
   needed; braid_rt_io_comm_release frees it). */
typedef struct {
  braid_rt_context_t *ctx;
  braid_rt_comm_t *comm;
  void *device;
  size_t capacity;
} braid_rt_io_comm_t;

void braid_rt_io_comm_init(braid_rt_io_comm_t *c, braid_rt_context_t *ctx,
                           braid_rt_comm_t *comm);
void braid_rt_io_comm_release(braid_rt_io_comm_t *c);

/* The blocking collectives of collectives.h on host buffers, on every
   backend; each returns when its result is in `buf` / `recv`. */
braid_rt_status_t braid_rt_io_all_reduce_sum_f64(braid_rt_io_comm_t *c,
                                                 double *buf, size_t count);
braid_rt_status_t braid_rt_io_broadcast_f64(braid_rt_io_comm_t *c, double *buf,
                                            size_t count, int root);
braid_rt_status_t braid_rt_io_all_gather_f64(braid_rt_io_comm_t *c,
                                             const double *send, double *recv,
                                             size_t send_count);
braid_rt_status_t braid_rt_io_send_f32(braid_rt_io_comm_t *c, const float *buf,
                                       size_t count, int peer, int tag);
braid_rt_status_t braid_rt_io_recv_f32(braid_rt_io_comm_t *c, float *buf,
                                       size_t count, int peer, int tag);

/*--- Shared by the writer and the reader. ---*/

/* Copies elements [first, first + count) of a block, in the block's
   row-major order, between the contiguous buffer `run` and a row-major
   tensor of shape `global` in which the block has shape `local` at
   `offsets` (ndims each): into the tensor, or out of it. */
void braid_rt_block_to_tensor_f32(float *tensor, int ndims,
                                  const int64_t *global,
                                  const int64_t *offsets,
                                  const int64_t *local, uint64_t first,
                                  uint64_t count, const float *run);
void braid_rt_tensor_to_block_f32(const float *tensor, int ndims,
                                  const int64_t *global,
                                  const int64_t *offsets,
                                  const int64_t *local, uint64_t first,
                                  uint64_t count, float *run);

/* The number of elements of a shape (1 for ndims 0). */
uint64_t braid_rt_shape_volume(int ndims, const int64_t *shape);

/* Writes "[2, 3]" into out. */
void braid_rt_format_shape(char *out, size_t capacity, int ndims,
                           const int64_t *shape);

/* Nonzero on a little-endian host. */
int braid_rt_little_endian(void);

#endif /* BRAID_RT_IO_INTERNAL_H */

/*===- fuzz_checkpoint.c - libFuzzer harness for the checkpoint reader ----===*/
/*
 * A checkpoint is a file users hand the runtime: opening it must check the
 * header length, the JSON, every entry's dtype, shape and offsets, the
 * tiling of the data section and the checksums, and refuse what is wrong
 * with DATA_CORRUPT and a message, never a crash, a hang or a sanitizer
 * report. Each input is written to a memory file and opened by its
 * /proc/self/fd path (the reader takes a path); what opens is read as
 * braid-eval and programs do: names, shapes, metadata, verify, every
 * F32/F64 tensor whole and a corner block of it. Built with
 * -fsanitize=fuzzer,address,undefined (scripts/fuzz.sh runs it; ctest
 * runs a smoke).
 */
#define _GNU_SOURCE /* memfd_create */
#include "braid/rt/checkpoint.h"
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The reader's only use of its context is braid_rt_fail, defined by the
   backend; here it keeps the message and checks that it is one. */
static char last_error[BRAID_RT_IO_MESSAGE_CAPACITY];

braid_rt_status_t braid_rt_fail(braid_rt_context_t *ctx,
                                braid_rt_status_t status, const char *format,
                                ...) {
  (void)ctx;
  va_list args;
  va_start(args, format);
  int n = vsnprintf(last_error, sizeof(last_error), format, args);
  va_end(args);
  if (n <= 0 || status == BRAID_RT_OK)
    __builtin_trap(); /* a failure without a message or a status */
  return status;
}

static int fd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fd < 0) {
    fd = memfd_create("braid-fuzz-checkpoint", 0);
    if (fd < 0)
      abort();
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 ||
      (size && pwrite(fd, data, size, 0) != (ssize_t)size))
    abort();

  static int dummy;
  braid_rt_context_t *ctx = (braid_rt_context_t *)&dummy;
  braid_rt_checkpoint_reader_t *r = NULL;
  if (braid_rt_checkpoint_open(ctx, path, &r) != BRAID_RT_OK) {
    if (r)
      __builtin_trap(); /* a reader left behind by a failure */
    return 0;
  }
  (void)braid_rt_checkpoint_metadata(r, BRAID_RT_CHECKPOINT_FORMAT_KEY);
  (void)braid_rt_checkpoint_verify(r);
  size_t n = braid_rt_checkpoint_num_tensors(r);
  for (size_t i = 0; i < n; ++i) {
    const char *name = braid_rt_checkpoint_tensor_name(r, i);
    int ndims = -1;
    int64_t shape[BRAID_RT_CHECKPOINT_MAX_DIMS];
    if (!name ||
        braid_rt_checkpoint_tensor_shape(r, name, &ndims, shape) !=
            BRAID_RT_OK ||
        ndims < 0 || ndims > BRAID_RT_CHECKPOINT_MAX_DIMS)
      __builtin_trap(); /* a listed tensor that cannot be looked up */
    /* The whole tensor, then the block of extent 1 at its far corner. */
    uint64_t volume = braid_rt_shape_volume(ndims, shape);
    float *out = malloc(volume ? volume * sizeof(float) : 1);
    if (!out)
      abort();
    int64_t zero[BRAID_RT_CHECKPOINT_MAX_DIMS] = {0};
    (void)braid_rt_checkpoint_read_block_f32(r, name, ndims, shape, zero, shape,
                                             out);
    int64_t corner[BRAID_RT_CHECKPOINT_MAX_DIMS],
        one[BRAID_RT_CHECKPOINT_MAX_DIMS];
    int empty = 0;
    for (int d = 0; d < ndims; ++d) {
      empty |= shape[d] == 0;
      corner[d] = shape[d] ? shape[d] - 1 : 0;
      one[d] = 1;
    }
    if (!empty)
      (void)braid_rt_checkpoint_read_block_f32(r, name, ndims, shape, corner,
                                               one, out);
    free(out);
  }
  braid_rt_checkpoint_close(r);
  return 0;
}

/*===- buffers.c - Device buffers of generated programs ------------------===*/

#include "internal.h"

#include "braid/rt/kernels.h"

#include <stdio.h>
#include <stdlib.h>

braid_rt_stream_t *braid_rt_program_stream(void) { return NULL; }

void *braid_rt_program_alloc(size_t bytes) {
  /* Whole floats, so that the zero fill below covers every byte. */
  size_t rounded = (bytes + 63) / 64 * 64;
  if (!rounded)
    rounded = 64;
  void *p = NULL;
  braid_rt_status_t status = bytes > SIZE_MAX - 64
                                 ? BRAID_RT_OUT_OF_MEMORY
                                 : braid_rt_memory_alloc(rounded, &p);
  if (status == BRAID_RT_UNSUPPORTED) {
    fprintf(stderr, "error: no device to run on: this program was compiled "
                    "for a GPU (braidc --target cuda), and this machine has "
                    "no usable one (no device, or no driver)\n");
    exit(1);
  }
  if (status != BRAID_RT_OK) {
    fprintf(stderr, "error: out of memory allocating %zu bytes\n", bytes);
    exit(1);
  }
  /* All-zero bits: 0.0f, and 0 as i32 or i64. */
  braid_rt_fill_f32(braid_rt_program_stream(), 0.0f,
                    (int64_t)(rounded / sizeof(float)), (float *)p);
  return p;
}

float *braid_rt_program_alloc_f32(int64_t count) {
  return (float *)braid_rt_program_alloc((size_t)count * sizeof(float));
}

int32_t *braid_rt_program_alloc_i32(int64_t count) {
  return (int32_t *)braid_rt_program_alloc((size_t)count * sizeof(int32_t));
}

int64_t *braid_rt_program_alloc_i64(int64_t count) {
  return (int64_t *)braid_rt_program_alloc((size_t)count * sizeof(int64_t));
}

void braid_rt_program_free(void *p) { braid_rt_memory_free(p); }

float *braid_rt_program_buffer_f32(float **buffer, int64_t count) {
  if (!*buffer)
    *buffer = braid_rt_program_alloc_f32(count);
  return *buffer;
}

int32_t *braid_rt_program_buffer_i32(int32_t **buffer, int64_t count) {
  if (!*buffer)
    *buffer = braid_rt_program_alloc_i32(count);
  return *buffer;
}

int64_t *braid_rt_program_buffer_i64(int64_t **buffer, int64_t count) {
  if (!*buffer)
    *buffer = braid_rt_program_alloc_i64(count);
  return *buffer;
}

uint16_t *braid_rt_program_buffer_bf16(uint16_t **buffer, int64_t count) {
  if (!*buffer)
    *buffer =
        (uint16_t *)braid_rt_program_alloc((size_t)count * sizeof(uint16_t));
  return *buffer;
}

void braid_rt_program_copy_i64(const int64_t *x, int64_t count, int64_t *y) {
  braid_rt_program_check(braid_rt_memory_copy(braid_rt_program_stream(), y, x,
                                              (size_t)count * sizeof(int64_t)),
                         "copying i64 elements");
}

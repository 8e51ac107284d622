/*===- util.c - Shapes and blocks shared by checkpoint writer and reader -===*/

#include "internal.h"

#include <stdio.h>
#include <string.h>

uint64_t braid_rt_shape_volume(int ndims, const int64_t *shape) {
  uint64_t volume = 1;
  for (int d = 0; d < ndims; ++d)
    volume *= (uint64_t)shape[d];
  return volume;
}

void braid_rt_format_shape(char *out, size_t capacity, int ndims,
                           const int64_t *shape) {
  size_t used = (size_t)snprintf(out, capacity, "[");
  for (int d = 0; d < ndims && used < capacity; ++d)
    used += (size_t)snprintf(out + used, capacity - used, "%s%lld",
                             d ? ", " : "", (long long)shape[d]);
  if (used < capacity)
    snprintf(out + used, capacity - used, "]");
}

int braid_rt_little_endian(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

/* The run of the block's elements starting at `e` (before `end`) that is
   contiguous in the tensor: sets *index to the tensor's flat index of
   element e and returns the run's length. */
static uint64_t segment(int ndims, const int64_t *global,
                        const int64_t *offsets, const int64_t *local,
                        uint64_t e, uint64_t end, uint64_t *index) {
  if (ndims == 0) {
    *index = 0;
    return 1;
  }
  uint64_t row_len = (uint64_t)local[ndims - 1];
  uint64_t row = e / row_len, col = e % row_len;
  /* Unravel `row` over the block's leading dimensions, last first. */
  uint64_t at = (uint64_t)offsets[ndims - 1] + col;
  uint64_t stride = (uint64_t)global[ndims - 1], rest = row;
  for (int d = ndims - 2; d >= 0; --d) {
    uint64_t i = rest % (uint64_t)local[d];
    rest /= (uint64_t)local[d];
    at += ((uint64_t)offsets[d] + i) * stride;
    stride *= (uint64_t)global[d];
  }
  *index = at;
  uint64_t n = row_len - col;
  return n < end - e ? n : end - e;
}

void braid_rt_block_to_tensor_f32(float *tensor, int ndims,
                                  const int64_t *global,
                                  const int64_t *offsets,
                                  const int64_t *local, uint64_t first,
                                  uint64_t count, const float *run) {
  for (uint64_t e = first, index; e < first + count;) {
    uint64_t n = segment(ndims, global, offsets, local, e, first + count,
                         &index);
    memcpy(tensor + index, run + (e - first), (size_t)n * sizeof(float));
    e += n;
  }
}

void braid_rt_tensor_to_block_f32(const float *tensor, int ndims,
                                  const int64_t *global,
                                  const int64_t *offsets,
                                  const int64_t *local, uint64_t first,
                                  uint64_t count, float *run) {
  for (uint64_t e = first, index; e < first + count;) {
    uint64_t n = segment(ndims, global, offsets, local, e, first + count,
                         &index);
    memcpy(run + (e - first), tensor + index, (size_t)n * sizeof(float));
    e += n;
  }
}

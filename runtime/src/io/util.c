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

void braid_rt_copy_block_f32(float *tensor, int ndims, const int64_t *global,
                             const int64_t *offsets, const int64_t *local,
                             uint64_t first, uint64_t count, float *run,
                             int to_global) {
  if (count == 0)
    return;
  if (ndims == 0) {
    if (to_global)
      tensor[0] = run[0];
    else
      run[0] = tensor[0];
    return;
  }
  uint64_t row_len = (uint64_t)local[ndims - 1];
  uint64_t e = first, end = first + count;
  while (e < end) {
    uint64_t row = e / row_len, col = e % row_len;
    /* The tensor's flat index of the block's element (row, col): unravel
       `row` over the block's leading dimensions, last first. */
    uint64_t index = 0, stride = (uint64_t)global[ndims - 1], rest = row;
    index = (uint64_t)offsets[ndims - 1] + col;
    for (int d = ndims - 2; d >= 0; --d) {
      uint64_t i = rest % (uint64_t)local[d];
      rest /= (uint64_t)local[d];
      index += ((uint64_t)offsets[d] + i) * stride;
      stride *= (uint64_t)global[d];
    }
    uint64_t n = row_len - col;
    if (n > end - e)
      n = end - e;
    float *dst = to_global ? tensor + index : run + (e - first);
    const float *src = to_global ? run + (e - first) : tensor + index;
    memcpy(dst, src, (size_t)n * sizeof(float));
    e += n;
  }
}

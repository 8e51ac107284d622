/*===- blocks.c - This rank's block of a sharded tensor ------------------===*/

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include <string.h>

void braid_rt_program_block(int64_t rank, const int64_t *global,
                            const int64_t *spec, int64_t *local,
                            int64_t *offsets) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  const int64_t *p = spec;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = *p++, count = 1, index = 0;
    for (int64_t k = 0; k < n; ++k, ++p) {
      count *= s->dims[*p];
      index = index * s->dims[*p] + s->coords[*p];
    }
    local[d] = global[d] / count;
    offsets[d] = index * local[d];
  }
}

void braid_rt_program_block_runs(int64_t rank, const int64_t *global,
                                 const int64_t *spec,
                                 void (*fn)(void *, int64_t, int64_t, int64_t),
                                 void *ctx) {
  int64_t local[16], offsets[16], idx[16], strides[16];
  braid_rt_program_block(rank, global, spec, local, offsets);
  if (rank == 0) {
    fn(ctx, 0, 0, 1);
    return;
  }
  int64_t runs = 1;
  for (int64_t d = 0; d < rank; ++d) {
    idx[d] = 0;
    if (d < rank - 1)
      runs *= local[d];
  }
  strides[rank - 1] = 1;
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * global[d + 1];
  int64_t len = local[rank - 1];
  for (int64_t r = 0; r < runs; ++r) {
    int64_t g = 0;
    for (int64_t d = 0; d < rank; ++d)
      g += (offsets[d] + idx[d]) * strides[d];
    fn(ctx, g, r * len, len);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++idx[d] < local[d])
        break;
      idx[d] = 0;
    }
  }
}

typedef struct {
  int kind;
  double a, b;
  uint64_t key;
  float *out;
} init_run_t;

static void init_run(void *ctx, int64_t g, int64_t l, int64_t n) {
  init_run_t *c = (init_run_t *)ctx;
  enum { CHUNK = 4096 };
  double values[CHUNK];
  for (int64_t first = 0; first < n; first += CHUNK) {
    int64_t m = n - first < CHUNK ? n - first : CHUNK;
    braid_rt_init_fill_f64((braid_rt_init_kind_t)c->kind, c->a, c->b, c->key,
                           (uint64_t)(g + first), (size_t)m, values);
    for (int64_t i = 0; i < m; ++i)
      c->out[l + first + i] = (float)values[i];
  }
}

void braid_rt_program_init_block_f32(uint64_t seed, const char *name,
                                     int kind, double a, double b,
                                     int64_t rank, const int64_t *global,
                                     const int64_t *spec, float *out) {
  int64_t local[16], offsets[16], count = 1;
  braid_rt_program_block(rank, global, spec, local, offsets);
  for (int64_t d = 0; d < rank; ++d)
    count *= local[d];
  size_t bytes = (size_t)count * sizeof(float);
  init_run_t c = {kind, a, b, braid_rt_init_key(seed, name),
                  (float *)braid_rt_program_map(out, bytes, /*read=*/0,
                                                "initial values")};
  braid_rt_program_block_runs(rank, global, spec, init_run, &c);
  braid_rt_program_unmap(c.out, out, bytes, /*write=*/1, "initial values");
}

typedef struct {
  const char *whole;
  char *block;
  size_t size;
} copy_run_t;

static void copy_run(void *ctx, int64_t g, int64_t l, int64_t n) {
  copy_run_t *c = (copy_run_t *)ctx;
  memcpy(c->block + l * c->size, c->whole + g * c->size, n * c->size);
}

void braid_rt_program_extract_block(const void *whole, size_t size,
                                    int64_t rank, const int64_t *global,
                                    const int64_t *spec, void *block) {
  int64_t local[16], offsets[16], count = 1, whole_count = 1;
  braid_rt_program_block(rank, global, spec, local, offsets);
  for (int64_t d = 0; d < rank; ++d) {
    count *= local[d];
    whole_count *= global[d];
  }
  size_t bytes = (size_t)count * size, whole_bytes = (size_t)whole_count * size;
  void *whole_view =
      braid_rt_program_map(whole, whole_bytes, /*read=*/1, "an input");
  copy_run_t c = {
      (const char *)whole_view,
      (char *)braid_rt_program_map(block, bytes, /*read=*/0, "a block"), size};
  braid_rt_program_block_runs(rank, global, spec, copy_run, &c);
  braid_rt_program_unmap(c.block, block, bytes, /*write=*/1, "a block");
  braid_rt_program_unmap(whole_view, whole, whole_bytes, /*write=*/0,
                         "an input");
}

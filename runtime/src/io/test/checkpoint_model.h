/*===- checkpoint_model.h - The tensors the checkpoint tests move --------===*/
/*
 * A small model's parameters and optimizer state, each laid out on a dp x tp
 * mesh the way a tensor-parallel program holds them: split along `tp_dim`
 * over tp (uneven where the size does not divide), along `dp_dim` over dp
 * (ZeRO-style optimizer state), and replicated over every axis it is not
 * split on. Element values are a pure function of (name, global index), so
 * any reader can check any block.
 */
#ifndef BRAID_RT_IO_CHECKPOINT_MODEL_H
#define BRAID_RT_IO_CHECKPOINT_MODEL_H

#include "braid/rt/init.h"

#include <stdint.h>
#include <string.h>

typedef struct {
  const char *name;
  int ndims;
  int64_t shape[3];
  int tp_dim, dp_dim; /* -1: not split over that axis */
} model_tensor_t;

static const model_tensor_t model_tensors[] = {
    {"h.0.attn.q.weight", 2, {8, 12}, 1, -1},
    {"h.0.attn.o.weight", 2, {12, 8}, 0, -1},
    {"h.0.ln.weight", 1, {8}, -1, -1},
    {"h.0.attn.q.weight.adamw.m", 2, {8, 12}, 1, 0},
    {"h.0.mlp.w3", 3, {3, 4, 5}, 2, 1},
    {"lr_scale", 0, {0}, -1, -1},
    /* Blocks of more than one message (1 << 20 floats) each. */
    {"wte", 2, {2, 1048600}, 0, -1},
};
#define NUM_MODEL_TENSORS (sizeof(model_tensors) / sizeof(model_tensors[0]))

/* Element `index` of tensor `name`: a multiple of 1/64 in [-512, 512),
   exact in f32. */
static inline float model_value(const char *name, uint64_t index) {
  uint64_t key = braid_rt_fnv1a64(name, strlen(name));
  uint64_t bits = braid_rt_splitmix64(key + index);
  return (float)((double)(int64_t)(bits % 65536) / 64.0 - 512.0);
}

/* The range [*begin, *end) of part `part` of `n` parts of a dimension of
   size `size`: contiguous, as even as possible. */
static inline void split_range(int64_t size, int part, int n, int64_t *begin,
                               int64_t *end) {
  *begin = size * part / n;
  *end = size * (part + 1) / n;
}

/* The block of tensor `t` held by mesh coordinates (d, p) on a dp x tp
   mesh: offsets and shape. */
static inline void model_block(const model_tensor_t *t, int dp, int tp, int d,
                               int p, int64_t *offsets, int64_t *local) {
  for (int k = 0; k < t->ndims; ++k) {
    offsets[k] = 0;
    local[k] = t->shape[k];
  }
  int64_t b, e;
  if (t->tp_dim >= 0) {
    split_range(t->shape[t->tp_dim], p, tp, &b, &e);
    offsets[t->tp_dim] = b;
    local[t->tp_dim] = e - b;
  }
  if (t->dp_dim >= 0) {
    split_range(t->shape[t->dp_dim], d, dp, &b, &e);
    offsets[t->dp_dim] = b;
    local[t->dp_dim] = e - b;
  }
}

static inline uint64_t volume_of(int ndims, const int64_t *shape) {
  uint64_t v = 1;
  for (int k = 0; k < ndims; ++k)
    v *= (uint64_t)shape[k];
  return v;
}

/* Global flat index of element `e` (row-major within the block). */
static inline uint64_t global_index(const model_tensor_t *t,
                                    const int64_t *offsets,
                                    const int64_t *local, uint64_t e) {
  uint64_t index = 0;
  uint64_t rest = e;
  uint64_t stride = 1;
  for (int k = t->ndims - 1; k >= 0; --k) {
    uint64_t i = rest % (uint64_t)local[k];
    rest /= (uint64_t)local[k];
    index += ((uint64_t)offsets[k] + i) * stride;
    stride *= (uint64_t)t->shape[k];
  }
  return index;
}

/* Fills a block with the model's values. */
static inline void model_fill(const model_tensor_t *t, const int64_t *offsets,
                              const int64_t *local, float *out) {
  uint64_t n = volume_of(t->ndims, local);
  for (uint64_t e = 0; e < n; ++e)
    out[e] = model_value(t->name, global_index(t, offsets, local, e));
}

#endif /* BRAID_RT_IO_CHECKPOINT_MODEL_H */

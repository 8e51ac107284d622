/*===- init.h - Deterministic parameter initialisation -------------------===*/
/*
 * Initial parameter values are a pure function of (seed, full parameter
 * name, element index), so that braid-eval, the single-device program and
 * every rank of a sharded program produce identical values without talking
 * to each other. The algorithm is specified in docs/model-representation.md.
 */
#ifndef BRAID_RT_INIT_H
#define BRAID_RT_INIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  BRAID_RT_INIT_ZEROS = 0,
  BRAID_RT_INIT_ONES = 1,
  BRAID_RT_INIT_CONSTANT = 2, /* a */
  BRAID_RT_INIT_NORMAL = 3,   /* mean 0, standard deviation a */
  BRAID_RT_INIT_UNIFORM = 4,  /* [a, b) */
} braid_rt_init_kind_t;

/* The SplitMix64 finaliser (Steele, Lea and Flood 2014). Pure. */
uint64_t braid_rt_splitmix64(uint64_t z);

/* 64-bit FNV-1a hash of `len` bytes. Pure. */
uint64_t braid_rt_fnv1a64(const char *bytes, size_t len);

/* The stream key of parameter `name` (NUL-terminated) under `seed`. */
uint64_t braid_rt_init_key(uint64_t seed, const char *name);

/* Writes elements [first, first + count) of the row-major tensor initialised
   by (kind, a, b) under `key` to `out_values`, in double precision. Any
   sub-range gives the same values as the whole. Thread-safe. */
void braid_rt_init_fill_f64(braid_rt_init_kind_t kind, double a, double b,
                            uint64_t key, uint64_t first, size_t count,
                            double *out_values);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_INIT_H */

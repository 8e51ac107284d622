/*===- init.c - Initial values of parameters and integer inputs ----------===*/
/*
 * The values are computed on the host in double, as braid-eval computes
 * them, and staged to the device buffer (staging.c).
 */

#include "internal.h"

void braid_rt_program_init_f32(uint64_t seed, const char *name, int kind,
                               double a, double b, int64_t count, float *out) {
  enum { CHUNK = 4096 };
  double values[CHUNK];
  size_t bytes = (size_t)count * sizeof(float);
  float *host =
      (float *)braid_rt_program_map(out, bytes, /*read=*/0, "initial values");
  uint64_t key = braid_rt_init_key(seed, name);
  for (int64_t first = 0; first < count; first += CHUNK) {
    int64_t n = count - first < CHUNK ? count - first : CHUNK;
    braid_rt_init_fill_f64((braid_rt_init_kind_t)kind, a, b, key,
                           (uint64_t)first, (size_t)n, values);
    for (int64_t i = 0; i < n; ++i)
      host[first + i] = (float)values[i];
  }
  braid_rt_program_unmap(host, out, bytes, /*write=*/1, "initial values");
}

void braid_rt_program_init_ids(uint64_t seed, const char *name, int64_t range,
                               int64_t count, void *out, int bytes) {
  enum { CHUNK = 4096 };
  double values[CHUNK];
  size_t size = (size_t)count * (size_t)bytes;
  void *host = braid_rt_program_map(out, size, /*read=*/0, "integer inputs");
  uint64_t key = braid_rt_init_key(seed, name);
  for (int64_t first = 0; first < count; first += CHUNK) {
    int64_t n = count - first < CHUNK ? count - first : CHUNK;
    braid_rt_init_fill_f64(BRAID_RT_INIT_UNIFORM, 0.0, (double)range, key,
                           (uint64_t)first, (size_t)n, values);
    for (int64_t i = 0; i < n; ++i) {
      if (bytes == 4)
        ((int32_t *)host)[first + i] = (int32_t)values[i];
      else
        ((int64_t *)host)[first + i] = (int64_t)values[i];
    }
  }
  braid_rt_program_unmap(host, out, size, /*write=*/1, "integer inputs");
}

void braid_rt_program_init_ids_i32(uint64_t seed, const char *name,
                                   int64_t range, int64_t count,
                                   int32_t *out) {
  braid_rt_program_init_ids(seed, name, range, count, out, 4);
}

void braid_rt_program_init_ids_i64(uint64_t seed, const char *name,
                                   int64_t range, int64_t count,
                                   int64_t *out) {
  braid_rt_program_init_ids(seed, name, range, count, out, 8);
}

/*===- init.c - Deterministic parameter initialisation -------------------===*/

#include "braid/rt/init.h"

#include <math.h>

uint64_t braid_rt_splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t braid_rt_fnv1a64(const char *bytes, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= (unsigned char)bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t braid_rt_init_key(uint64_t seed, const char *name) {
  size_t len = 0;
  while (name[len])
    ++len;
  return braid_rt_splitmix64(seed ^ braid_rt_fnv1a64(name, len));
}

/* A double in (0, 1) from counter `i` of stream `key`: never 0, so that the
   logarithm in Box-Muller is finite. */
static double unit(uint64_t key, uint64_t i) {
  uint64_t bits = braid_rt_splitmix64(key + i);
  return ((double)(bits >> 11) + 0.5) * 0x1.0p-53;
}

void braid_rt_init_fill_f64(braid_rt_init_kind_t kind, double a, double b,
                            uint64_t key, uint64_t first, size_t count,
                            double *out_values) {
  const double two_pi = 6.283185307179586476925286766559;
  for (size_t n = 0; n < count; ++n) {
    uint64_t e = first + n;
    double v = 0.0;
    switch (kind) {
    case BRAID_RT_INIT_ZEROS:
      v = 0.0;
      break;
    case BRAID_RT_INIT_ONES:
      v = 1.0;
      break;
    case BRAID_RT_INIT_CONSTANT:
      v = a;
      break;
    case BRAID_RT_INIT_NORMAL:
      v = a * sqrt(-2.0 * log(unit(key, 2 * e))) *
          cos(two_pi * unit(key, 2 * e + 1));
      break;
    case BRAID_RT_INIT_UNIFORM:
      v = a + (b - a) * unit(key, 2 * e);
      break;
    }
    out_values[n] = v;
  }
}

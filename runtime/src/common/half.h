/*===- half.h - bf16 and fp16 conversions, host and device ---------------===*/
/*
 * The 16-bit wire formats of the compressed collectives, rounding to
 * nearest even (NaN stays NaN, overflow goes to infinity), exact back to
 * f32. Pure bit manipulation in static inline functions, __host__
 * __device__ under nvcc, so that the public functions of collectives.h
 * (half.c), the CPU backend's ring and the CUDA backend's kernels
 * (runtime/src/cuda/comm/compressed_kernels.cu) round alike, bit for bit.
 */
#ifndef BRAID_RT_COMMON_HALF_H
#define BRAID_RT_COMMON_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define BRAID_RT_HALF_FN static inline __host__ __device__
#else
#define BRAID_RT_HALF_FN static inline
#endif

BRAID_RT_HALF_FN uint32_t braid_rt_half_bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  return u;
}

BRAID_RT_HALF_FN float braid_rt_half_float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof(x));
  return x;
}

BRAID_RT_HALF_FN uint16_t braid_rt_half_f32_to_bf16(float x) {
  uint32_t u = braid_rt_half_bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
    return (uint16_t)((u >> 16) | 0x0040u);
  /* Adds half an ulp of bf16, minus one unless the kept lsb is odd: ties go
     to the even neighbour; a carry into the exponent rounds up correctly,
     up to infinity. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

BRAID_RT_HALF_FN float braid_rt_half_bf16_to_f32(uint16_t h) {
  return braid_rt_half_float_of((uint32_t)h << 16);
}

BRAID_RT_HALF_FN uint16_t braid_rt_half_f32_to_f16(float x) {
  uint32_t u = braid_rt_half_bits_of(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) /* >= 65520: rounds to infinity (or is one) */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* below 2^-14: a subnormal of f16, or zero */
    if (a < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself ties to 0
                            below) */
      return sign;
    uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(a >> 23); /* 14..24: to units of 2^-24 */
    uint32_t kept = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
      ++kept;
    return (uint16_t)(sign | kept);
  }
  /* A normal f16: rebias the exponent (127 -> 15), round 13 bits away. */
  uint32_t r = a - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(sign | (r >> 13));
}

BRAID_RT_HALF_FN float braid_rt_half_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) /* infinity or NaN */
    return braid_rt_half_float_of(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24, exact */
    float v = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return braid_rt_half_float_of(sign | ((exponent + 112u) << 23) |
                                (mantissa << 13));
}

/* Format 0 bf16, 1 fp16: what a compressed collective sends. */
BRAID_RT_HALF_FN uint16_t braid_rt_half_narrow(int format, float x) {
  return format ? braid_rt_half_f32_to_f16(x) : braid_rt_half_f32_to_bf16(x);
}

BRAID_RT_HALF_FN float braid_rt_half_widen(int format, uint16_t h) {
  return format ? braid_rt_half_f16_to_f32(h) : braid_rt_half_bf16_to_f32(h);
}

#endif /* BRAID_RT_COMMON_HALF_H */

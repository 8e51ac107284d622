/*===- elementwise_math.h - Per-element math of the CPU kernels ----------===*/
/*
 * The value of one element of each elementwise op on the CPU backend, as
 * `static inline` functions shared by the runtime's kernels
 * (runtime/src/cpu/kernels/elementwise.c) and by the loops braidc generates
 * for fused regions (braid.fused, docs/codegen.md#fusion), so that a fused
 * program computes every element with the same formulas, rounded at the
 * same places, as the kernels it replaces: fusion is bit-identical.
 *
 * No function here calls the C library's transcendental functions in f32:
 * a vectorized loop would call glibc's vector expf (libmvec) on most
 * elements and the scalar expf on the loop's remainder, and the two differ
 * in the last bit on about 4% of inputs, so results would depend on where
 * an element falls in a loop (and on the thread count). braid_rt_expf is
 * plain arithmetic instead, the same scalar or vectorized. Exact GELU
 * evaluates erf in double (vectorized or not, see elementwise.c); fusion
 * leaves it alone.
 *
 * Contraction into fused multiply-adds would round differently depending
 * on what surrounds an expression (a kernel's loop or a fused one), so it
 * is off for the code that includes this header.
 */
#ifndef BRAID_RT_ELEMENTWISE_MATH_H
#define BRAID_RT_ELEMENTWISE_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF

/* e^x to within 2 ulp (Cephes' expf: x = k ln 2 + r, |r| <= ln 2 / 2, a
   degree-5 polynomial, 2^k as two normal factors so that results down to
   the subnormals round once more at most). inf above 88.72, 0 below
   -103.98, NaN for NaN. Branch-free, so loops vectorize. */
static inline float braid_rt_expf(float x) {
  const float hi = 88.72283935546875f, lo = -103.97208404541015625f;
  float xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  /* Round to nearest through the 1.5 * 2^23 shifter (|x log2 e| < 2^22). */
  const float shifter = 12582912.0f;
  float t = xc * 1.44269504088896341f;
  t = t + shifter;
  float kf = t - shifter;
  float r = xc - kf * 0.693359375f;
  r = r - kf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float r2 = r * r;
  float y = p * r2;
  y = y + r;
  y = y + 1.0f;
  int32_t k = (int32_t)kf;
  int32_t k1 = k / 2, k2 = k - k1;
  uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, sizeof s1);
  memcpy(&s2, &b2, sizeof s2);
  y = y * s1;
  y = y * s2;
  return x > hi ? INFINITY : y;
}

/* sigmoid(z) and 1 - sigmoid(z) without overflow or cancellation. Beyond
   |z| = 88, exp(-z) would overflow: sigmoid is then 0 or 1 to within
   1e-38. */
static inline void braid_rt_sigmoid_pair(float z, float *s,
                                         float *one_minus_s) {
  z = z < -88.0f ? -88.0f : z > 88.0f ? 88.0f : z;
  float e = braid_rt_expf(-z);
  *s = 1.0f / (1.0f + e);
  *one_minus_s = e * *s;
}

static inline float braid_rt_neg_of(float x) { return -x; }
/* The nearest bf16 value (ties to even), still as a float: adding 0x7fff
   plus the kept lowest bit, then clearing the low 16 bits, rounds half an
   ulp up unless that makes an even result odd; a carry into the exponent
   rounds up to the next binade, or to infinity. NaN stays NaN. */
static inline float braid_rt_round_bf16_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return x;
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&x, &u, sizeof(x));
  return x;
}
/* The 16 bits of the nearest bf16 value (ties to even; exact for a float
   holding a bf16 value); a NaN stays a quiet NaN. As the CUDA kernels'
   bf16Of and the CPU GEMM's to_bf16, bit for bit. */
static inline uint16_t braid_rt_bf16_bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* The float value of bf16 bits `h` (exact). */
static inline float braid_rt_float_of_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, sizeof(x));
  return x;
}
static inline float braid_rt_exp_of(float x) { return braid_rt_expf(x); }
static inline float braid_rt_sqrt_of(float x) { return sqrtf(x); }
static inline float braid_rt_rsqrt_of(float x) {
  return (float)(1.0 / sqrt((double)x));
}
static inline float braid_rt_relu_of(float x) { return x > 0.0f ? x : 0.0f; }

static inline float braid_rt_silu_of(float x) {
  float s, oms;
  braid_rt_sigmoid_pair(x, &s, &oms);
  return x * s;
}

/* The tanh GELU's u = sqrt(2/pi) (x + 0.044715 x^3), doubled. */
static inline float braid_rt_gelu_tanh_2u(float x) {
  const float c2 = 1.5957691216057308f; /* 2 sqrt(2/pi) */
  return c2 * (x + 0.044715f * x * x * x);
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u): nothing cancels for negative x. */
static inline float braid_rt_gelu_tanh_of(float x) {
  float s, oms;
  braid_rt_sigmoid_pair(braid_rt_gelu_tanh_2u(x), &s, &oms);
  return x * s;
}

static inline float braid_rt_relu_grad_of(float x, float dy) {
  return x > 0.0f ? dy : 0.0f;
}

static inline float braid_rt_silu_grad_of(float x, float dy) {
  float s, oms;
  braid_rt_sigmoid_pair(x, &s, &oms);
  return dy * s * (1.0f + x * oms);
}

/* With s = sigmoid(2u): 0.5 (1 + t) = s and 0.5 (1 - t^2) = 2 s (1 - s). */
static inline float braid_rt_gelu_tanh_grad_of(float x, float dy) {
  const float c = 0.7978845608028654f, a = 0.044715f; /* sqrt(2/pi) */
  float s, oms;
  braid_rt_sigmoid_pair(braid_rt_gelu_tanh_2u(x), &s, &oms);
  return dy * (s + 2.0f * x * s * oms * c * (1.0f + 3.0f * a * x * x));
}

#endif /* BRAID_RT_ELEMENTWISE_MATH_H */

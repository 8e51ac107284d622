/*===- half.c - bf16 and fp16, rounded to nearest even -------------------===*/
/*
 * The 16-bit wire formats of the compressed collectives (collectives.h),
 * from half.h, which the CUDA kernels share, so both backends and the
 * evaluator round alike.
 */

#include "braid/rt/collectives.h"

#include "half.h"

uint16_t braid_rt_f32_to_bf16(float x) { return braid_rt_half_f32_to_bf16(x); }

float braid_rt_bf16_to_f32(uint16_t h) { return braid_rt_half_bf16_to_f32(h); }

uint16_t braid_rt_f32_to_f16(float x) { return braid_rt_half_f32_to_f16(x); }

float braid_rt_f16_to_f32(uint16_t h) { return braid_rt_half_f16_to_f32(h); }

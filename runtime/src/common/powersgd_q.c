/*===- powersgd_q.c - PowerSGD's first Q ---------------------------------===*/
/*
 * Host code shared by both backends: every rank must start Q alike.
 */

#include "braid/rt/collectives.h"
#include "braid/rt/init.h"

void braid_rt_powersgd_init_q(float *q, size_t cols, size_t rank,
                              uint64_t seed) {
  for (size_t i = 0; i < cols * rank; ++i) {
    uint64_t bits = braid_rt_splitmix64(seed ^ braid_rt_splitmix64(i + 1));
    q[i] = (float)((double)(bits >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

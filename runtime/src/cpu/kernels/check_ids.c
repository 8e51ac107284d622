/*===- check_ids.c - Id range checks on the CPU backend ------------------===*/
/*
 * Host memory: the check runs now, and the first bad id is the answer;
 * nothing is left for braid_rt_poll_bad_ids.
 */

#include "braid/rt/kernels.h"

#include <stddef.h>

braid_rt_status_t braid_rt_check_ids(braid_rt_stream_t *stream,
                                     const void *ids, int ids_i64,
                                     int64_t count, int64_t range,
                                     int64_t site, braid_rt_bad_id_t *bad) {
  (void)stream;
  for (int64_t i = 0; i < count; ++i) {
    int64_t id = ids_i64 ? ((const int64_t *)ids)[i]
                         : (int64_t)((const int32_t *)ids)[i];
    if (id < 0 || id >= range) {
      if (bad) {
        bad->site = site;
        bad->id = id;
        bad->position = i;
        bad->count = count;
        bad->range = range;
      }
      return BRAID_RT_INVALID_ARGUMENT;
    }
  }
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_poll_bad_ids(braid_rt_stream_t *stream,
                                        braid_rt_bad_id_t *bad) {
  (void)stream;
  (void)bad;
  return BRAID_RT_OK;
}

/*===- errors.c - How a generated program reports errors and ends --------===*/

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

int braid_rt_program_rank = -1;
void (*braid_rt_program_end_all)(int status) = NULL;

void braid_rt_program_exit_error(void) {
  fflush(stderr);
  if (braid_rt_program_end_all)
    braid_rt_program_end_all(1);
  exit(1);
}

int64_t braid_rt_program_id(const void *ids, int ids_i64, int64_t i) {
  return ids_i64 ? ((const int64_t *)ids)[i]
                 : (int64_t)((const int32_t *)ids)[i];
}

void braid_rt_program_bad_id(const char *what, int64_t id, int64_t i,
                             int64_t count, int64_t range, const char *where) {
  if (braid_rt_program_rank >= 0)
    fprintf(stderr,
            "error: rank %d: %s: %s %lld is outside [0, %lld) at position "
            "%lld of %lld on this rank\n",
            braid_rt_program_rank, where, what, (long long)id,
            (long long)range, (long long)i, (long long)count);
  else
    fprintf(stderr,
            "error: %s: %s %lld is outside [0, %lld) at position %lld of "
            "%lld\n",
            where, what, (long long)id, (long long)range, (long long)i,
            (long long)count);
  braid_rt_program_exit_error();
}

void braid_rt_program_check_ids(const char *what, const void *ids,
                                int ids_i64, int64_t count, int64_t range,
                                const char *where) {
  size_t bytes = (size_t)count * (ids_i64 ? sizeof(int64_t) : sizeof(int32_t));
  const void *host = braid_rt_program_map(ids, bytes, /*read=*/1, what);
  for (int64_t i = 0; i < count; ++i) {
    int64_t id = braid_rt_program_id(host, ids_i64, i);
    if (id < 0 || id >= range)
      braid_rt_program_bad_id(what, id, i, count, range, where);
  }
  braid_rt_program_unmap((void *)host, (void *)ids, bytes, /*write=*/0, what);
}

void braid_rt_program_check(braid_rt_status_t status, const char *where) {
  if (status == BRAID_RT_OK)
    return;
  if (braid_rt_program_rank >= 0)
    fprintf(stderr, "error: rank %d: %s: %s\n", braid_rt_program_rank, where,
            braid_rt_status_string(status));
  else
    fprintf(stderr, "error: %s: %s\n", where, braid_rt_status_string(status));
  braid_rt_program_exit_error();
}

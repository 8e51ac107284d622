/*===- errors.c - How a generated program reports errors and ends --------===*/

#include "internal.h"

#include "braid/rt/kernels.h"

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

/* The places that check ids, so that a check a device backend reports at the
   next poll is named as the host backend names it at once. The strings are
   the generated program's literals (or the program runtime's): one entry per
   call site. */
enum { kMaxIdSites = 1024 };
static struct { const char *what, *where; } id_sites[kMaxIdSites];
static int64_t num_id_sites;

static int64_t id_site(const char *what, const char *where) {
  for (int64_t i = 0; i < num_id_sites; ++i)
    if (id_sites[i].what == what && id_sites[i].where == where)
      return i;
  if (num_id_sites == kMaxIdSites)
    return -1;
  id_sites[num_id_sites].what = what;
  id_sites[num_id_sites].where = where;
  return num_id_sites++;
}

static void report_bad_id(const braid_rt_bad_id_t *bad) {
  int known = bad->site >= 0 && bad->site < num_id_sites;
  braid_rt_program_bad_id(known ? id_sites[bad->site].what : "id", bad->id,
                          bad->position, bad->count, bad->range,
                          known ? id_sites[bad->site].where : "a checked op");
}

void braid_rt_program_check_ids(const char *what, const void *ids,
                                int ids_i64, int64_t count, int64_t range,
                                const char *where) {
  braid_rt_bad_id_t bad;
  braid_rt_status_t status =
      braid_rt_check_ids(braid_rt_program_stream(), ids, ids_i64, count, range,
                         id_site(what, where), &bad);
  if (status == BRAID_RT_INVALID_ARGUMENT)
    report_bad_id(&bad);
  braid_rt_program_check(status, where);
}

void braid_rt_program_poll_bad_ids(void) {
  braid_rt_bad_id_t bad;
  braid_rt_status_t status =
      braid_rt_poll_bad_ids(braid_rt_program_stream(), &bad);
  if (status == BRAID_RT_INVALID_ARGUMENT)
    report_bad_id(&bad);
  braid_rt_program_check(status, "checking ids");
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

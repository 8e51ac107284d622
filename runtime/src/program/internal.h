/*===- internal.h - Shared state of the program runtime ------------------===*/
#ifndef BRAID_RT_PROGRAM_INTERNAL_H
#define BRAID_RT_PROGRAM_INTERNAL_H

#include "braid/rt/program.h"

#ifdef BRAID_RT_PROGRAM_SPMD
#include "braid/rt/program_spmd.h"

/* The program's one context and mesh, and its communicators by group. */
typedef struct {
  braid_rt_context_t *ctx;
  braid_rt_mesh_t *mesh;
  int rank;
  int ndims;
  int64_t dims[BRAID_RT_PROGRAM_MAX_AXES];
  int64_t coords[BRAID_RT_PROGRAM_MAX_AXES];
  braid_rt_comm_t *comms[1 << BRAID_RT_PROGRAM_MAX_AXES];
} braid_rt_program_spmd_t;

extern braid_rt_program_spmd_t braid_rt_program_spmd;

/* Prints `where` and the context's last error, then ends every rank: with
   BRAID_RT_PROGRAM_EXIT_COMM after a timeout or a communication failure,
   else with status 1. */
void braid_rt_program_spmd_fail(braid_rt_status_t status, const char *where);

static inline void braid_rt_program_spmd_check(braid_rt_status_t status,
                                               const char *where) {
  if (status != BRAID_RT_OK)
    braid_rt_program_spmd_fail(status, where);
}

/* The group of every axis of the mesh. */
static inline int64_t braid_rt_program_world_mask(void) {
  return ((int64_t)1 << braid_rt_program_spmd.ndims) - 1;
}
#endif

#endif /* BRAID_RT_PROGRAM_INTERNAL_H */

/*===- mesh_shape.h - Mesh shape checks shared by the backends ----------===*/
/* Internal to the runtime: what braid_rt_mesh_create checks on every
   backend before it makes any communicator. */
#ifndef BRAID_RT_COMMON_MESH_SHAPE_H
#define BRAID_RT_COMMON_MESH_SHAPE_H

#include "braid/rt/mesh.h"
#include "braid/rt/status.h"

#include <stddef.h>
#include <stdint.h>

/* The longest axis name is one less. */
#define BRAID_RT_MESH_NAME_CAPACITY 32

/* Checks a mesh for a world of `world_size` ranks: 1 to
   BRAID_RT_MESH_MAX_DIMS axes, sizes of at least 1 whose product fits in
   64 bits and equals world_size, distinct non-empty names shorter than
   BRAID_RT_MESH_NAME_CAPACITY. INVALID_ARGUMENT with a message in `error`
   otherwise. */
braid_rt_status_t braid_rt_mesh_check_shape(int ndims, const int64_t *dims,
                                            const char *const *names,
                                            int world_size, char *error,
                                            size_t error_size);

#endif /* BRAID_RT_COMMON_MESH_SHAPE_H */

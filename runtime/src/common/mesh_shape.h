/*===- mesh_shape.h - Mesh shape checks shared by the backends ----------===*/
/* Internal to the runtime: what braid_rt_mesh_create checks on every
   backend before it makes any communicator, and how a mesh numbers its
   ranks and splits into axis groups. */
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

/* The row-major coordinates of `rank` on a mesh of `ndims` axes of sizes
   `dims`, into out_coords[0..ndims). */
void braid_rt_mesh_rank_coords(int ndims, const int64_t *dims, int64_t rank,
                               int64_t *out_coords);

/* The color and key that split the world into the communicator over the
   axes in `mask` (bit i: axis i): ranks that agree on every coordinate
   outside the group share a color, and the key is the row-major index over
   the group's coordinates, so that ranks are numbered as mesh.h says. */
void braid_rt_mesh_split_key(int ndims, const int64_t *dims,
                             const int64_t *coords, unsigned mask,
                             int *out_color, int *out_key);

#endif /* BRAID_RT_COMMON_MESH_SHAPE_H */

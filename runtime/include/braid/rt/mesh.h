/*===- mesh.h - Device meshes and their communicators --------------------===*/
/*
 * A mesh arranges the world's ranks in an n-dimensional grid with named
 * axes, e.g. dp x tp x pp = 2 x 2 x 2. World rank r has the row-major
 * coordinates of r: on that mesh rank 5 = 1*4 + 0*2 + 1 is (dp 1, tp 0, pp 1).
 *
 * A communicator connects the ranks that share their coordinates on every
 * axis outside a chosen group of axes: over {tp}, ranks (d, *, p) form one
 * communicator of size 2. Within it ranks are numbered row-major over the
 * group's coordinates. The world communicator belongs to the context.
 */
#ifndef BRAID_RT_MESH_H
#define BRAID_RT_MESH_H

#include "braid/rt/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_rt_mesh braid_rt_mesh_t; /* opaque */
typedef struct braid_rt_comm braid_rt_comm_t; /* opaque */

#define BRAID_RT_MESH_MAX_DIMS 8

/* Creates a mesh of `ndims` (1..BRAID_RT_MESH_MAX_DIMS) axes with sizes
   `dims` and names `names` (distinct, non-empty; copied). The product of the
   sizes must equal the world size. Not collective. The caller owns *out_mesh
   and must destroy it before the context. */
braid_rt_status_t braid_rt_mesh_create(braid_rt_context_t *ctx, int ndims,
                                       const int64_t *dims,
                                       const char *const *names,
                                       braid_rt_mesh_t **out_mesh);

/* Releases the mesh and every communicator obtained from it. Collective over
   all ranks when any communicator was created. NULL is a no-op. */
braid_rt_status_t braid_rt_mesh_destroy(braid_rt_mesh_t *mesh);

/* The number of axes, the size and name of `axis` (unchecked: 0 <= axis <
   ndims), and this rank's coordinate along it. Infallible. */
int braid_rt_mesh_ndims(const braid_rt_mesh_t *mesh);
int64_t braid_rt_mesh_dim(const braid_rt_mesh_t *mesh, int axis);
const char *braid_rt_mesh_axis_name(const braid_rt_mesh_t *mesh, int axis);
int64_t braid_rt_mesh_coord(const braid_rt_mesh_t *mesh, int axis);

/* The index of the axis called `name`. */
braid_rt_status_t braid_rt_mesh_axis_index(const braid_rt_mesh_t *mesh,
                                           const char *name, int *out_axis);

/* The coordinates of world rank `rank`, ndims values into `out_coords`. */
braid_rt_status_t braid_rt_mesh_coords_of(const braid_rt_mesh_t *mesh,
                                          int rank, int64_t *out_coords);

/* The communicator over the axes `axes[0..naxes)` (strictly increasing; none
   gives a communicator of this rank alone). Created on first use, which is
   collective over all ranks (every rank must ask for the same group in the
   same order); later calls return the cached one. The mesh owns *out_comm. */
braid_rt_status_t braid_rt_mesh_comm(braid_rt_mesh_t *mesh, int naxes,
                                     const int *axes,
                                     braid_rt_comm_t **out_comm);

/* The communicator of all ranks. The context owns it. Infallible. */
braid_rt_comm_t *braid_rt_context_world(braid_rt_context_t *ctx);

/* This rank's rank in `comm` and the number of ranks in it. Infallible. */
int braid_rt_comm_rank(const braid_rt_comm_t *comm);
int braid_rt_comm_size(const braid_rt_comm_t *comm);

/* "world" or "mesh axes {dp,tp}": how errors name the communicator. */
const char *braid_rt_comm_name(const braid_rt_comm_t *comm);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_MESH_H */

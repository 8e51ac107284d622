/*===- meshes.c - Device meshes and their communicator cache, shared -----===*/
/*
 * Meshes on every backend: the shape checks, coordinates, axis names, and
 * the communicator of each group of axes, made on first use by the
 * backend's split (backend.h) and cached per group. Compiled into each
 * backend.
 */

#include "internal.h"
#include "mesh_shape.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESH_NAME_CAPACITY BRAID_RT_MESH_NAME_CAPACITY

struct braid_rt_mesh {
  braid_rt_context_t *ctx;
  int ndims;
  int64_t dims[BRAID_RT_MESH_MAX_DIMS];
  char names[BRAID_RT_MESH_MAX_DIMS][MESH_NAME_CAPACITY];
  int64_t coords[BRAID_RT_MESH_MAX_DIMS]; /* of this rank */
  /* The communicator over each group of axes, indexed by the group's bit
     mask; created on first use. */
  braid_rt_comm_t *comms[1u << BRAID_RT_MESH_MAX_DIMS];
};

braid_rt_status_t braid_rt_mesh_create(braid_rt_context_t *ctx, int ndims,
                                       const int64_t *dims,
                                       const char *const *names,
                                       braid_rt_mesh_t **out_mesh) {
  if (!ctx || !out_mesh)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_create: ctx or out_mesh is NULL");
  *out_mesh = NULL;
  char error[384];
  if (braid_rt_mesh_check_shape(ndims, dims, names, ctx->world.size, error,
                                sizeof(error)) != BRAID_RT_OK)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_create: %s", error);

  braid_rt_mesh_t *mesh = calloc(1, sizeof(*mesh));
  if (!mesh)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_mesh_create: out of memory");
  mesh->ctx = ctx;
  mesh->ndims = ndims;
  for (int i = 0; i < ndims; ++i) {
    mesh->dims[i] = dims[i];
    snprintf(mesh->names[i], MESH_NAME_CAPACITY, "%s", names[i]);
  }
  braid_rt_mesh_rank_coords(ndims, mesh->dims, ctx->world.rank, mesh->coords);
  ++ctx->live_meshes;
  *out_mesh = mesh;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_mesh_destroy(braid_rt_mesh_t *mesh) {
  if (!mesh)
    return BRAID_RT_OK;
  braid_rt_status_t status = braid_rt_backend_mesh_release_begin(mesh->ctx);
  for (size_t i = 0; i < sizeof(mesh->comms) / sizeof(mesh->comms[0]); ++i) {
    braid_rt_comm_t *comm = mesh->comms[i];
    if (!comm)
      continue;
    braid_rt_status_t released = braid_rt_backend_comm_release(comm);
    if (released != BRAID_RT_OK && status == BRAID_RT_OK)
      status = released;
    free(comm);
  }
  --mesh->ctx->live_meshes;
  free(mesh);
  return status;
}

int braid_rt_mesh_ndims(const braid_rt_mesh_t *mesh) { return mesh->ndims; }

int64_t braid_rt_mesh_dim(const braid_rt_mesh_t *mesh, int axis) {
  return mesh->dims[axis];
}

const char *braid_rt_mesh_axis_name(const braid_rt_mesh_t *mesh, int axis) {
  return mesh->names[axis];
}

int64_t braid_rt_mesh_coord(const braid_rt_mesh_t *mesh, int axis) {
  return mesh->coords[axis];
}

braid_rt_status_t braid_rt_mesh_axis_index(const braid_rt_mesh_t *mesh,
                                           const char *name, int *out_axis) {
  if (!mesh || !name || !out_axis)
    return braid_rt_fail(mesh ? mesh->ctx : NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_axis_index: NULL argument");
  for (int i = 0; i < mesh->ndims; ++i) {
    if (strcmp(mesh->names[i], name) == 0) {
      *out_axis = i;
      return BRAID_RT_OK;
    }
  }
  return braid_rt_fail(mesh->ctx, BRAID_RT_INVALID_ARGUMENT,
                       "braid_rt_mesh_axis_index: the mesh has no axis '%s'",
                       name);
}

braid_rt_status_t braid_rt_mesh_coords_of(const braid_rt_mesh_t *mesh, int rank,
                                          int64_t *out_coords) {
  if (!mesh || !out_coords)
    return braid_rt_fail(mesh ? mesh->ctx : NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_coords_of: NULL argument");
  if (rank < 0 || rank >= mesh->ctx->world.size)
    return braid_rt_fail(mesh->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_coords_of: rank %d is not in 0..%d",
                         rank, mesh->ctx->world.size - 1);
  braid_rt_mesh_rank_coords(mesh->ndims, mesh->dims, rank, out_coords);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_mesh_comm(braid_rt_mesh_t *mesh, int naxes,
                                     const int *axes,
                                     braid_rt_comm_t **out_comm) {
  if (!mesh || !out_comm || (naxes > 0 && !axes))
    return braid_rt_fail(mesh ? mesh->ctx : NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_comm: NULL argument");
  *out_comm = NULL;
  if (naxes < 0 || naxes > mesh->ndims)
    return braid_rt_fail(mesh->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_mesh_comm: %d axes requested of a mesh "
                         "with %d",
                         naxes, mesh->ndims);
  unsigned mask = 0;
  char name[sizeof(((braid_rt_comm_t *)0)->name)];
  size_t used = (size_t)snprintf(name, sizeof(name), "mesh axes {");
  for (int i = 0; i < naxes; ++i) {
    if (axes[i] < 0 || axes[i] >= mesh->ndims)
      return braid_rt_fail(mesh->ctx, BRAID_RT_INVALID_ARGUMENT,
                           "braid_rt_mesh_comm: axis %d is not in 0..%d",
                           axes[i], mesh->ndims - 1);
    /* Increasing order fixes the rank order within the group; a permuted
       list would suggest an order that the cache could not honour. */
    if (i > 0 && axes[i] <= axes[i - 1])
      return braid_rt_fail(mesh->ctx, BRAID_RT_INVALID_ARGUMENT,
                           "braid_rt_mesh_comm: axes must be strictly "
                           "increasing; got %d after %d",
                           axes[i], axes[i - 1]);
    mask |= 1u << axes[i];
    used += (size_t)snprintf(name + used, sizeof(name) - used, "%s%s",
                             i ? "," : "", mesh->names[axes[i]]);
  }
  snprintf(name + used, sizeof(name) - used, "}");

  if (!mesh->comms[mask]) {
    braid_rt_comm_t *comm = calloc(1, sizeof(*comm));
    if (!comm)
      return braid_rt_fail(mesh->ctx, BRAID_RT_OUT_OF_MEMORY,
                           "braid_rt_mesh_comm: out of memory");
    comm->ctx = mesh->ctx;
    snprintf(comm->name, sizeof(comm->name), "%s", name);
    /* Ranks agreeing on the coordinates outside `mask` share a color and
       are ordered by their row-major index over the axes in `mask`. */
    int color = 0, key = 0;
    braid_rt_mesh_split_key(mesh->ndims, mesh->dims, mesh->coords, mask, &color,
                            &key);
    comm->rank = key;
    comm->size = 1;
    for (int i = 0; i < mesh->ndims; ++i)
      if (mask & (1u << i))
        comm->size *= (int)mesh->dims[i];
    braid_rt_status_t status = braid_rt_backend_comm_split(comm, color, key);
    if (status != BRAID_RT_OK) {
      free(comm);
      return status;
    }
    mesh->comms[mask] = comm;
  }
  *out_comm = mesh->comms[mask];
  return BRAID_RT_OK;
}

braid_rt_comm_t *braid_rt_context_world(braid_rt_context_t *ctx) {
  return &ctx->world;
}

int braid_rt_comm_rank(const braid_rt_comm_t *comm) { return comm->rank; }

int braid_rt_comm_size(const braid_rt_comm_t *comm) { return comm->size; }

const char *braid_rt_comm_name(const braid_rt_comm_t *comm) {
  return comm->name;
}

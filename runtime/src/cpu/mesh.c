/*===- mesh.c - Axis-group communicators over MPI (CPU) ------------------===*/
/*
 * What meshes need of MPI; the meshes themselves and their communicator
 * cache are shared by the backends (common/backend/meshes.c).
 */

#include "internal.h"

/* The communicator of the ranks passing `color`, ordered by `key`. */
static braid_rt_status_t split_world(braid_rt_comm_t *comm, int color,
                                     int key) {
  braid_rt_context_t *ctx = comm->ctx;
  BRAID_MPI_CHECK(ctx, MPI_Comm_split(ctx->world.mpi, color, key, &comm->mpi));
  /* Split communicators inherit the world's handler; say so explicitly since
     everything relies on errors being returned. */
  BRAID_MPI_CHECK(ctx, MPI_Comm_set_errhandler(comm->mpi, MPI_ERRORS_RETURN));
  BRAID_MPI_CHECK(ctx, MPI_Comm_rank(comm->mpi, &comm->rank));
  BRAID_MPI_CHECK(ctx, MPI_Comm_size(comm->mpi, &comm->size));
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_backend_comm_split(braid_rt_comm_t *comm, int color,
                                              int key) {
  comm->mpi = MPI_COMM_NULL;
  braid_rt_status_t status = split_world(comm, color, key);
  if (status != BRAID_RT_OK && comm->mpi != MPI_COMM_NULL)
    MPI_Comm_free(&comm->mpi);
  return status;
}

braid_rt_status_t braid_rt_backend_mesh_release_begin(braid_rt_context_t *ctx) {
  (void)ctx;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_backend_comm_release(braid_rt_comm_t *comm) {
  int code = MPI_Comm_free(&comm->mpi);
  if (code != MPI_SUCCESS)
    return braid_rt_fail_mpi(comm->ctx, code, "MPI_Comm_free",
                             "braid_rt_mesh_destroy");
  return BRAID_RT_OK;
}

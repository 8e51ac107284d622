/*===- context.c - Context, streams and error messages (CPU, MPI) --------===*/

#include "internal.h"

#include "braid/rt/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

braid_rt_status_t braid_rt_backend_check_comm(braid_rt_comm_t *comm,
                                              const char *what) {
  (void)comm;
  (void)what;
  return BRAID_RT_OK;
}

/* MPI takes host memory, which is all there is here. */
braid_rt_status_t braid_rt_backend_check_buffer(braid_rt_comm_t *comm,
                                                const char *what,
                                                const void *buf,
                                                const char *buf_name) {
  (void)comm;
  (void)what;
  (void)buf;
  (void)buf_name;
  return BRAID_RT_OK;
}

/* Connects `ctx` to the other ranks. MPI_Init has run. */
static braid_rt_status_t connect_world(braid_rt_context_t *ctx) {
  braid_rt_comm_t *world = &ctx->world;
  world->ctx = ctx;
  /* A private duplicate: our error handler and our messages must not
     interfere with the program's own use of MPI_COMM_WORLD. */
  BRAID_MPI_CHECK(ctx, MPI_Comm_dup(MPI_COMM_WORLD, &world->mpi));
  BRAID_MPI_CHECK(ctx, MPI_Comm_set_errhandler(world->mpi, MPI_ERRORS_RETURN));
  BRAID_MPI_CHECK(ctx, MPI_Comm_rank(world->mpi, &world->rank));
  BRAID_MPI_CHECK(ctx, MPI_Comm_size(world->mpi, &world->size));
  snprintf(world->name, sizeof(world->name), "world");
  /* Trace timestamps count from here on every rank. */
  BRAID_MPI_CHECK(ctx, MPI_Barrier(world->mpi));
  ctx->trace_events.origin_s = braid_rt_now_seconds();
  return BRAID_RT_OK;
}

/* Whether a test that finds nothing to do gives the core away: OpenMPI's
   mpi_yield_when_idle, which OpenMPI turns on when a machine's ranks
   outnumber its cores (braid-run sets it then too), read through the MPI
   tool interface after MPI_Init. 0 where the variable does not exist. */
static int mpi_yields_when_idle(void) {
  int provided, index, count, size, yields = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
    return 0;
  char name[64], desc[1];
  int name_len = sizeof(name), desc_len = sizeof(desc), verbosity, bind, scope;
  MPI_Datatype type;
  MPI_T_enum enumtype;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype,
                          desc, &desc_len, &bind, &scope) == MPI_SUCCESS &&
      MPI_Type_size(type, &size) == MPI_SUCCESS && size > 0 && size <= 8 &&
      MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
    /* A bool (OpenMPI's MPI_C_BOOL) or an integer: nonzero is on. */
    unsigned char value[8] = {0};
    if (count == 1 && MPI_T_cvar_read(handle, value) == MPI_SUCCESS)
      for (int i = 0; i < size; ++i)
        yields |= value[i] != 0;
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return yields;
}

braid_rt_status_t braid_rt_context_create(const braid_rt_context_options_t *opts,
                                          int *argc, char ***argv,
                                          braid_rt_context_t **out_ctx) {
  braid_rt_context_options_t options;
  braid_rt_status_t status = braid_rt_context_prepare(opts, out_ctx, &options);
  if (status != BRAID_RT_OK)
    return status;
  opts = &options;

  int initialized = 0;
  status = braid_rt_mpi_state(&initialized);
  if (status != BRAID_RT_OK)
    return status;

  braid_rt_context_t *ctx = calloc(1, sizeof(*ctx));
  if (!ctx)
    return braid_rt_fail(NULL, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_context_create: out of memory");
  ctx->timeout_s = opts->collective_timeout_s;
  ctx->trace = opts->trace != 0;
  ctx->world.mpi = MPI_COMM_NULL;

  if (!initialized) {
    /* OpenMPI's default non-blocking all_reduce on a few ranks runs at about
       0.4x the blocking MPI_Allreduce on one machine; the ring algorithm
       matches it (docs/runtime.md). A setting from the user wins. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "ring", 0);
    status = braid_rt_mpi_start(argc, argv);
    if (status != BRAID_RT_OK) {
      free(ctx);
      return status;
    }
    ctx->owns_mpi = 1;
  }
  status = connect_world(ctx);
  if (status != BRAID_RT_OK) {
    braid_rt_keep_context_less_error(ctx);
    if (ctx->world.mpi != MPI_COMM_NULL)
      MPI_Comm_free(&ctx->world.mpi);
    free(ctx);
    return status;
  }
  ctx->progress_yields = mpi_yields_when_idle();
  *out_ctx = ctx;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_context_destroy(braid_rt_context_t *ctx) {
  if (!ctx)
    return BRAID_RT_OK;
  if (ctx->live_meshes > 0)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_destroy: %d mesh(es) still alive; "
                         "destroy them first",
                         ctx->live_meshes);
  BRAID_MPI_CHECK(ctx, MPI_Comm_free(&ctx->world.mpi));
  int owns_mpi = ctx->owns_mpi;
  braid_rt_trace_clear(ctx);
  free(ctx);
  if (owns_mpi) {
    int code = MPI_Finalize();
    if (code != MPI_SUCCESS)
      return braid_rt_fail_mpi(NULL, code, "MPI_Finalize", __func__);
  }
  return BRAID_RT_OK;
}

void braid_rt_context_abort(braid_rt_context_t *ctx, int exit_code) {
  MPI_Abort(ctx ? ctx->world.mpi : MPI_COMM_WORLD, exit_code);
  /* MPI_Abort does not return; should an implementation return anyway, the
     caller was promised that this process ends. */
  exit(exit_code);
}

braid_rt_status_t braid_rt_stream_create(braid_rt_context_t *ctx,
                                         braid_rt_stream_t **out_stream) {
  if (!ctx || !out_stream)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_stream_create: ctx or out_stream is NULL");
  *out_stream = malloc(sizeof(braid_rt_stream_t));
  if (!*out_stream)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_stream_create: out of memory");
  (*out_stream)->ctx = ctx;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_stream_synchronize(braid_rt_stream_t *stream) {
  /* CPU calls complete before they return: nothing is ever pending. */
  (void)stream;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_stream_destroy(braid_rt_stream_t *stream) {
  free(stream);
  return BRAID_RT_OK;
}

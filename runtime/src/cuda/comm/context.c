/*===- context.c - Context, device, streams and errors (CUDA, NCCL) ------===*/

#include "internal.h"

#include "braid/rt/trace.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The live context: a NULL stream names its compute stream. A process has
   at most one (MPI starts once). */
static braid_rt_context_t *live_context;

/* The function name of a call's source text. */
static int name_length(const char *call) { return (int)strcspn(call, "("); }

braid_rt_status_t braid_rt_fail_cuda(braid_rt_context_t *ctx, cudaError_t code,
                                     const char *call, const char *where) {
  braid_rt_status_t status = code == cudaErrorMemoryAllocation
                                 ? BRAID_RT_OUT_OF_MEMORY
                                 : BRAID_RT_COMM_FAILURE;
  return braid_rt_fail(ctx, status, "%s: %.*s failed: %s (%s)", where,
                       name_length(call), call, cudaGetErrorString(code),
                       cudaGetErrorName(code));
}

braid_rt_status_t braid_rt_fail_nccl(braid_rt_context_t *ctx, ncclResult_t code,
                                     ncclComm_t comm, const char *call,
                                     const char *where) {
  /* NCCL's last error says more than its error string ("peer 3 closed the
     connection"); it is per thread, which is ours. */
  const char *detail = ncclGetLastError(comm);
  return braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE, "%s: %.*s failed: %s%s%s",
                       where, name_length(call), call, ncclGetErrorString(code),
                       detail && detail[0] ? ": " : "", detail ? detail : "");
}

braid_rt_stream_t *braid_rt_resolve_stream(braid_rt_context_t *ctx,
                                           braid_rt_stream_t *stream) {
  return stream ? stream : &ctx->default_stream;
}

braid_rt_status_t braid_rt_backend_check_comm(braid_rt_comm_t *comm,
                                              const char *what) {
  if (comm->broken)
    return braid_rt_fail(comm->ctx, BRAID_RT_COMM_FAILURE,
                         "%s over %s: the communicator was aborted after an "
                         "earlier failure",
                         what, comm->name);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_backend_check_buffer(braid_rt_comm_t *comm,
                                                const char *what,
                                                const void *buf,
                                                const char *buf_name) {
  /* NCCL reads device memory only; a host pointer would fault on the
     device, far from the call that passed it. */
  struct cudaPointerAttributes attributes;
  cudaError_t code = cudaPointerGetAttributes(&attributes, buf);
  if (code != cudaSuccess) {
    cudaGetLastError(); /* not sticky: clear it */
    return braid_rt_fail_cuda(comm->ctx, code, "cudaPointerGetAttributes",
                              what);
  }
  if (attributes.type != cudaMemoryTypeDevice &&
      attributes.type != cudaMemoryTypeManaged)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: %s is host memory; the CUDA backend "
                         "communicates device memory (memory.h)",
                         what, comm->name, buf_name);
  return BRAID_RT_OK;
}

void braid_rt_comm_abort(braid_rt_comm_t *comm) {
  if (comm->broken)
    return;
  comm->broken = 1;
  /* Stops NCCL's kernels and proxy threads, so that the streams drain and
     the process can end; the result cannot improve anything now. A
     creation that failed at once left no communicator. */
  if (comm->nccl)
    ncclCommAbort(comm->nccl);
  comm->nccl = NULL;
}

braid_rt_status_t braid_rt_nccl_settle(braid_rt_comm_t *comm,
                                       ncclResult_t result, const char *call,
                                       const char *what) {
  braid_rt_context_t *ctx = comm->ctx;
  if (result != ncclSuccess && result != ncclInProgress) {
    braid_rt_status_t status =
        braid_rt_fail_nccl(ctx, result, comm->nccl, call, what);
    braid_rt_comm_abort(comm);
    return status;
  }
  double start_s = braid_rt_now_seconds();
  while (result == ncclInProgress) {
    ncclResult_t code = ncclCommGetAsyncError(comm->nccl, &result);
    if (code != ncclSuccess)
      result = code;
    if (result == ncclSuccess)
      break;
    if (result != ncclInProgress) {
      braid_rt_status_t status =
          braid_rt_fail_nccl(ctx, result, comm->nccl, call, what);
      braid_rt_comm_abort(comm);
      return status;
    }
    if (braid_rt_cuda_timed_out(start_s, braid_rt_now_seconds(),
                                ctx->timeout_s)) {
      braid_rt_comm_abort(comm);
      return braid_rt_fail(ctx, BRAID_RT_TIMEOUT,
                           "%s: %.*s over %s (rank %d of %d, world rank %d) "
                           "did not complete within %g s; the communicator "
                           "was aborted",
                           what, name_length(call), call, comm->name,
                           comm->rank, comm->size, ctx->world.rank,
                           ctx->timeout_s);
    }
    sched_yield();
  }
  return BRAID_RT_OK;
}

static const char *plain_getenv(const char *name) { return getenv(name); }

#ifdef BRAID_RT_CUDA_SINGLE_PROCESS
int braid_mpi_single_state;

/* The single-process build has no way to reach other ranks: refuse to be
   one of several rather than train alone. */
static braid_rt_status_t check_single_process(void) {
  char message[BRAID_RT_ERROR_CAPACITY];
  int size = 1;
  const char *source = NULL;
  if (braid_rt_cuda_world_size_from_env(plain_getenv, &size, &source, message,
                                        sizeof(message)) != BRAID_RT_OK)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: %s", message);
  if (size > 1)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: %s=%d asks for %d ranks "
                         "but this program was linked with the "
                         "single-process CUDA runtime (braid_rt_cuda_single, "
                         "no MPI); link braid_rt_cuda to run several",
                         source, size, size);
  return BRAID_RT_OK;
}
#endif

/* Binds this process to its device: the local rank from the launcher (or
   from MPI's shared-memory split), then the device count. */
static braid_rt_status_t bind_device(braid_rt_context_t *ctx) {
  char message[BRAID_RT_ERROR_CAPACITY];
  int local_rank = -1;
  const char *source = NULL;
  if (braid_rt_cuda_local_rank_from_env(plain_getenv, &local_rank, &source,
                                        message,
                                        sizeof(message)) != BRAID_RT_OK)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: rank %d: %s",
                         ctx->world.rank, message);
  /* The ranks sharing this node, for the message and for launchers that set
     no variable. */
  MPI_Comm node = MPI_COMM_NULL;
  int node_rank = 0, node_size = 1;
  BRAID_MPI_CHECK(ctx,
                  MPI_Comm_split_type(ctx->mpi, MPI_COMM_TYPE_SHARED,
                                      ctx->world.rank, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  if (local_rank < 0) {
    local_rank = node_rank;
#ifndef BRAID_RT_CUDA_SINGLE_PROCESS
    source = "MPI_Comm_split_type";
#endif
  }
  ctx->local_rank = local_rank;

  int device_count = 0;
  cudaError_t code = cudaGetDeviceCount(&device_count);
  char cuda_error[160] = "";
  if (code != cudaSuccess) {
    snprintf(cuda_error, sizeof(cuda_error), "cudaGetDeviceCount: %s (%s)",
             cudaGetErrorString(code), cudaGetErrorName(code));
    cudaGetLastError();
    device_count = 0;
  }
  if (braid_rt_cuda_choose_device(
          ctx->world.rank, local_rank, node_size, source, device_count,
          cuda_error[0] ? cuda_error : NULL, getenv("CUDA_VISIBLE_DEVICES"),
          &ctx->device, message, sizeof(message)) != BRAID_RT_OK)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: %s", message);
  BRAID_CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
  return BRAID_RT_OK;
}

/* The communicator config every communicator is created with: non-blocking,
   so that creation, splits and connections are polled with the timeout
   instead of hanging on a dead peer. */
static ncclConfig_t nonblocking_config(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

/* Creates the world communicator: rank 0's unique id reaches every rank
   over MPI. */
static braid_rt_status_t connect_world(braid_rt_context_t *ctx) {
  braid_rt_comm_t *world = &ctx->world;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (world->rank == 0) {
    ncclResult_t code = ncclGetUniqueId(&id);
    if (code != ncclSuccess)
      return braid_rt_fail_nccl(ctx, code, NULL, "ncclGetUniqueId",
                                "braid_rt_context_create");
  }
  BRAID_MPI_CHECK(ctx, MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, ctx->mpi));
  ncclConfig_t config = nonblocking_config();
  ncclResult_t code = ncclCommInitRankConfig(&world->nccl, world->size, id,
                                             world->rank, &config);
  braid_rt_status_t status = braid_rt_nccl_settle(
      world, code, "ncclCommInitRankConfig", "braid_rt_context_create");
  if (status != BRAID_RT_OK)
    return status;
  ctx->comms = world;
  return BRAID_RT_OK;
}

/* Keeps what is freed to the device's default memory pool, which every
   cudaMallocAsync of the runtime draws from (compressed.c's ring staging
   each call, the kernels' scratch each op): at CUDA's default threshold, 0,
   the pool hands its free memory back to the driver at each
   synchronisation and the next step maps it again. A threshold, not a
   buffer kept per call site, since it covers both; the cost is that the
   pool keeps its peak (the most staging and scratch live at once) out of
   cudaMalloc's reach, where programs allocate their buffers (memory.cu).
   Devices without pools (cudaMallocAsync fails there anyway) are left
   alone. */
static braid_rt_status_t keep_pool_memory(braid_rt_context_t *ctx) {
  int pools = 0;
  BRAID_CUDA_CHECK(ctx, cudaDeviceGetAttribute(&pools,
                                               cudaDevAttrMemoryPoolsSupported,
                                               ctx->device));
  if (!pools)
    return BRAID_RT_OK;
  cudaMemPool_t pool;
  BRAID_CUDA_CHECK(ctx, cudaDeviceGetDefaultMemPool(&pool, ctx->device));
  uint64_t threshold = UINT64_MAX;
  BRAID_CUDA_CHECK(ctx, cudaMemPoolSetAttribute(
                            pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  return BRAID_RT_OK;
}

/* Everything of `ctx` below the world communicator. */
static braid_rt_status_t create_streams(braid_rt_context_t *ctx) {
  braid_rt_status_t status = keep_pool_memory(ctx);
  if (status != BRAID_RT_OK)
    return status;
  /* Non-blocking: neither stream synchronises with CUDA's legacy default
     stream, which other libraries may use. */
  BRAID_CUDA_CHECK(
      ctx, cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking));
  BRAID_CUDA_CHECK(
      ctx, cudaStreamCreateWithFlags(&ctx->comm_stream, cudaStreamNonBlocking));
  BRAID_CUDA_CHECK(
      ctx, cudaEventCreateWithFlags(&ctx->ready, cudaEventDisableTiming));
  BRAID_CUDA_CHECK(ctx, cudaMalloc((void **)&ctx->scratch, sizeof(float)));
  BRAID_CUDA_CHECK(ctx, cudaMalloc((void **)&ctx->tags,
                                   BRAID_RT_MAX_TRANSFERS * sizeof(int64_t)));
  ctx->free_slots = malloc(BRAID_RT_MAX_TRANSFERS * sizeof(int));
  if (!ctx->free_slots)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_context_create: out of memory");
  for (int i = 0; i < BRAID_RT_MAX_TRANSFERS; ++i)
    ctx->free_slots[i] = BRAID_RT_MAX_TRANSFERS - 1 - i;
  ctx->num_free_slots = BRAID_RT_MAX_TRANSFERS;
  ctx->default_stream.ctx = ctx;
  ctx->default_stream.cuda = ctx->compute;
  ctx->default_stream.owned = 0;
  return BRAID_RT_OK;
}

/* Releases what create_streams and connect_world made; safe on a partly
   built context. Communicators that failed were aborted already. */
static braid_rt_status_t release(braid_rt_context_t *ctx) {
  braid_rt_status_t status = BRAID_RT_OK;
  if (ctx->world.nccl && !ctx->world.broken) {
    braid_rt_status_t s =
        braid_rt_nccl_settle(&ctx->world, ncclCommFinalize(ctx->world.nccl),
                             "ncclCommFinalize", "braid_rt_context_destroy");
    if (s == BRAID_RT_OK)
      ncclCommDestroy(ctx->world.nccl);
    else
      status = s;
  }
  if (ctx->scratch)
    cudaFree(ctx->scratch);
  if (ctx->powersgd_blas)
    cublasDestroy(ctx->powersgd_blas);
  if (ctx->powersgd_p)
    cudaFreeAsync(ctx->powersgd_p, ctx->comm_stream);
  if (ctx->tags)
    cudaFree(ctx->tags);
  free(ctx->free_slots);
  if (ctx->ready)
    cudaEventDestroy(ctx->ready);
  if (ctx->comm_stream)
    cudaStreamDestroy(ctx->comm_stream);
  if (ctx->compute)
    cudaStreamDestroy(ctx->compute);
  if (ctx->mpi != MPI_COMM_NULL)
    MPI_Comm_free(&ctx->mpi);
  return status;
}

braid_rt_status_t
braid_rt_context_create(const braid_rt_context_options_t *opts, int *argc,
                        char ***argv, braid_rt_context_t **out_ctx) {
  braid_rt_context_options_t options;
  braid_rt_status_t status = braid_rt_context_prepare(opts, out_ctx, &options);
  if (status != BRAID_RT_OK)
    return status;
  opts = &options;
  if (live_context)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: this process has a "
                         "context already; the CUDA backend allows one");
#ifdef BRAID_RT_CUDA_SINGLE_PROCESS
  status = check_single_process();
  if (status != BRAID_RT_OK)
    return status;
#endif

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
  ctx->mpi = MPI_COMM_NULL;
  ctx->world.ctx = ctx;
  snprintf(ctx->world.name, sizeof(ctx->world.name), "world");

  if (!initialized) {
    /* OpenMPI starts a singleton without mpirun, so a one-rank run needs no
       launcher. MPI only bootstraps and gathers traces here. */
    status = braid_rt_mpi_start(argc, argv);
    if (status != BRAID_RT_OK) {
      free(ctx);
      return status;
    }
    ctx->owns_mpi = 1;
  }
  /* A private duplicate: our error handler must not change the program's
     MPI_COMM_WORLD. */
  int code = MPI_Comm_dup(MPI_COMM_WORLD, &ctx->mpi);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_set_errhandler(ctx->mpi, MPI_ERRORS_RETURN);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_rank(ctx->mpi, &ctx->world.rank);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_size(ctx->mpi, &ctx->world.size);
  status = code == MPI_SUCCESS
               ? BRAID_RT_OK
               : braid_rt_fail_mpi(ctx, code, "MPI_Comm_dup", __func__);
  if (status == BRAID_RT_OK) {
    status = bind_device(ctx);
    if (status == BRAID_RT_OK)
      status = create_streams(ctx);
    /* The world communicator needs every rank; one that has no device must
       not leave the others waiting for it until the timeout. */
    if (ctx->mpi != MPI_COMM_NULL) {
      int ok = status == BRAID_RT_OK, all_ok = 0;
      code = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, ctx->mpi);
      if (status == BRAID_RT_OK && (code != MPI_SUCCESS || !all_ok))
        status = code != MPI_SUCCESS
                     ? braid_rt_fail_mpi(ctx, code, "MPI_Allreduce", __func__)
                     : braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE,
                                     "braid_rt_context_create: rank %d is "
                                     "ready but another rank could not set "
                                     "up its device (its message says why)",
                                     ctx->world.rank);
    }
  }
  if (status == BRAID_RT_OK)
    status = connect_world(ctx);
  if (status == BRAID_RT_OK) {
    /* Trace timestamps count from here on every rank. */
    code = MPI_Barrier(ctx->mpi);
    if (code != MPI_SUCCESS)
      status = braid_rt_fail_mpi(ctx, code, "MPI_Barrier", __func__);
    ctx->trace_events.origin_s = braid_rt_now_seconds();
  }
  if (status != BRAID_RT_OK) {
    braid_rt_keep_context_less_error(ctx);
    release(ctx);
    /* Every rank fails alike (the device check is agreed on), so all of
       them finalise and a program that prints the message and exits ends
       cleanly under mpirun. */
    if (ctx->owns_mpi)
      MPI_Finalize();
    free(ctx);
    return status;
  }
  live_context = ctx;
  braid_rt_cuda_set_default_stream(ctx->compute);
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
  braid_rt_status_t status = braid_rt_drain(ctx, NULL);
  braid_rt_status_t released = release(ctx);
  if (status == BRAID_RT_OK)
    status = released;
  if (status != BRAID_RT_OK)
    braid_rt_keep_context_less_error(ctx);
  int owns_mpi = ctx->owns_mpi;
  braid_rt_trace_clear(ctx);
  live_context = NULL;
  braid_rt_cuda_set_default_stream(0);
  free(ctx);
  if (owns_mpi) {
    int code = MPI_Finalize();
    if (code != MPI_SUCCESS && status == BRAID_RT_OK)
      return braid_rt_fail_mpi(NULL, code, "MPI_Finalize", __func__);
  }
  return status;
}

void braid_rt_context_abort(braid_rt_context_t *ctx, int exit_code) {
  /* Aborting the communicators first stops NCCL kernels that wait for a
     dead peer, so that nothing outlives MPI_Abort on the device. */
  if (ctx)
    for (braid_rt_comm_t *comm = ctx->comms; comm; comm = comm->next_live)
      braid_rt_comm_abort(comm);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(ctx && ctx->mpi != MPI_COMM_NULL ? ctx->mpi : MPI_COMM_WORLD,
              exit_code);
  exit(exit_code);
}

braid_rt_status_t braid_rt_stream_create(braid_rt_context_t *ctx,
                                         braid_rt_stream_t **out_stream) {
  if (!ctx || !out_stream)
    return braid_rt_fail(ctx, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_stream_create: ctx or out_stream is NULL");
  braid_rt_stream_t *stream = calloc(1, sizeof(*stream));
  if (!stream)
    return braid_rt_fail(ctx, BRAID_RT_OUT_OF_MEMORY,
                         "braid_rt_stream_create: out of memory");
  cudaError_t code =
      cudaStreamCreateWithFlags(&stream->cuda, cudaStreamNonBlocking);
  if (code != cudaSuccess) {
    free(stream);
    return braid_rt_fail_cuda(ctx, code, "cudaStreamCreateWithFlags",
                              "braid_rt_stream_create");
  }
  stream->ctx = ctx;
  stream->owned = 1;
  *out_stream = stream;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_stream_synchronize(braid_rt_stream_t *stream) {
  braid_rt_context_t *ctx = stream ? stream->ctx : live_context;
  if (!ctx) {
    /* No context: kernels on CUDA's default stream (kernel tests). */
    cudaError_t code = cudaStreamSynchronize(0);
    return code == cudaSuccess
               ? BRAID_RT_OK
               : braid_rt_fail_cuda(NULL, code, "cudaStreamSynchronize",
                                    "braid_rt_stream_synchronize");
  }
  return braid_rt_drain(ctx, stream);
}

braid_rt_status_t braid_rt_stream_destroy(braid_rt_stream_t *stream) {
  if (!stream)
    return BRAID_RT_OK;
  braid_rt_status_t status = braid_rt_stream_synchronize(stream);
  if (stream->owned) {
    cudaStreamDestroy(stream->cuda);
    free(stream);
  }
  return status;
}

int braid_rt_cuda_device(const braid_rt_context_t *ctx) { return ctx->device; }

int braid_rt_cuda_local_rank(const braid_rt_context_t *ctx) {
  return ctx->local_rank;
}

/*===- fake_device.c - A host-memory CUDA, cuBLAS and NCCL for one rank --===*/
/*
 * The CUDA runtime and NCCL calls braid_rt_cuda makes, implemented on the
 * host for a single rank, so that the backend's own logic (context
 * creation, non-blocking communicators, splits, events, deferred and
 * grouped transfers, timeouts, aborts, teardown) runs in ctest on machines
 * without a GPU. "Device" memory is host memory; every operation runs when
 * it is issued, so the fake cannot tell whether the streams were ordered
 * right: that needs a GPU. What it can tell:
 *
 *  - a transfer of the rank to itself without its match in the same group
 *    fails ncclGroupEnd with ncclInvalidUsage, as NCCL does ("Trying to
 *    send to self without a matching recv");
 *  - a host function (cudaLaunchHostFunc) runs on a thread of its own and
 *    holds up its stream, what is recorded on it and what waits for those
 *    events, until it returns: work that cannot start, as behind a peer
 *    that never comes (the operations themselves still run at once, so
 *    their data is not checked there);
 *  - a communicator is never used, finalised or destroyed after it was
 *    aborted, never destroyed unfinalised, and never finalised while an
 *    operation can never complete: such a call ends the process with a
 *    message naming it;
 *  - creation, splits and finalisation report ncclInProgress first, so the
 *    non-blocking paths are polled.
 *
 * BRAID_FAKE_NCCL_ASYNC_ERROR=1 makes ncclCommGetAsyncError report
 * ncclRemoteError once a communicator has run an operation.
 *
 * Built with BRAID_FAKE_NCCL_MPI (braid_rt_cuda_fake_device_mpi), NCCL runs
 * over MPI instead, on any number of ranks under mpirun: a communicator is
 * an MPI communicator (the world's duplicate, ncclCommSplit an
 * MPI_Comm_split), the collectives are MPI's, and a group's transfers to
 * other ranks are non-blocking MPI messages waited for at ncclGroupEnd (in
 * order between two ranks, as NCCL delivers them); transfers to oneself
 * still match within the group. So the backend's multi-rank logic (the
 * compressed ring, splits) runs here, each rank's device memory its host
 * memory. The host waits for a group's messages at ncclGroupEnd, where
 * NCCL would queue them on a stream: a program whose ranks issue their
 * transfers in different orders (comm_test.c's default mode) can hang
 * here; the ring, each hop one send and one receive on every rank, cannot.
 */

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "powersgd_math.h"

#ifdef BRAID_FAKE_NCCL_MPI
#include <mpi.h>
#endif

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what) {
  fprintf(stderr, "fake device: %s\n", what);
  fflush(NULL);
  abort();
}

/*--- CUDA ------------------------------------------------------------------*/

/* Set when a host function returns; a stream or event behind one that has
   not returned is held up. */
typedef struct {
  _Atomic int done;
} gate_t;

struct CUstream_st {
  gate_t *gate; /* the last host function issued to it, or what it waits for */
};

struct CUevent_st {
  gate_t *gate; /* what held up its stream when it was recorded */
};

static int held(gate_t *gate) { return gate && !atomic_load(&gate->done); }

#define MAX_BUFFERS 4096
static struct {
  char *ptr;
  size_t bytes;
} buffers[MAX_BUFFERS];

static struct CUstream_st legacy_stream;

static struct CUstream_st *resolve(cudaStream_t s) {
  return s ? s : &legacy_stream;
}

cudaError_t cudaGetDeviceCount(int *count) {
  const char *n = getenv("BRAID_FAKE_CUDA_DEVICES");
  *count = n ? atoi(n) : 1;
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  int count = 0;
  cudaGetDeviceCount(&count);
  return device >= 0 && device < count ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "fake CUDA error";
}

const char *cudaGetErrorName(cudaError_t e) {
  return e == cudaErrorNoDevice ? "cudaErrorNoDevice" : "cudaErrorFake";
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  for (int i = 0; i < MAX_BUFFERS; ++i) {
    if (buffers[i].ptr)
      continue;
    buffers[i].ptr = malloc(bytes ? bytes : 1);
    if (!buffers[i].ptr)
      return cudaErrorMemoryAllocation;
    buffers[i].bytes = bytes;
    *ptr = buffers[i].ptr;
    return cudaSuccess;
  }
  return cudaErrorMemoryAllocation;
}

/* The stream-ordered allocator: every operation runs when issued here, so
   the order is the call order. */
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t s) {
  (void)s;
  return cudaMalloc(ptr, bytes);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t s) {
  (void)s;
  return cudaFree(ptr);
}

/* The device's default memory pool: it records its release threshold
   (what context.c sets) so that tests can read it back; the fake's pool
   never hands memory to a driver either way. */
struct CUmemPoolHandle_st {
  uint64_t release_threshold;
};
static struct CUmemPoolHandle_st default_pool;

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                   int device) {
  if (cudaSetDevice(device) != cudaSuccess)
    return cudaErrorInvalidDevice;
  if (attr != cudaDevAttrMemoryPoolsSupported)
    die("cudaDeviceGetAttribute: an attribute the fake does not know");
  *value = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
  if (cudaSetDevice(device) != cudaSuccess)
    return cudaErrorInvalidDevice;
  *pool = &default_pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool,
                                    enum cudaMemPoolAttr attr, void *value) {
  if (pool != &default_pool || attr != cudaMemPoolAttrReleaseThreshold)
    die("cudaMemPoolSetAttribute: a pool or attribute the fake does not "
        "know");
  pool->release_threshold = *(const uint64_t *)value;
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool,
                                    enum cudaMemPoolAttr attr, void *value) {
  if (pool != &default_pool || attr != cudaMemPoolAttrReleaseThreshold)
    die("cudaMemPoolGetAttribute: a pool or attribute the fake does not "
        "know");
  *(uint64_t *)value = pool->release_threshold;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr)
    return cudaSuccess;
  for (int i = 0; i < MAX_BUFFERS; ++i) {
    if (buffers[i].ptr == ptr) {
      free(ptr);
      buffers[i].ptr = NULL;
      return cudaSuccess;
    }
  }
  die("cudaFree of a pointer cudaMalloc did not return");
  return cudaErrorInvalidValue;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                     const void *ptr) {
  memset(attributes, 0, sizeof(*attributes));
  attributes->type = cudaMemoryTypeUnregistered;
  const char *p = ptr;
  for (int i = 0; i < MAX_BUFFERS; ++i)
    if (buffers[i].ptr && p >= buffers[i].ptr &&
        p < buffers[i].ptr + (buffers[i].bytes ? buffers[i].bytes : 1))
      attributes->type = cudaMemoryTypeDevice;
  return cudaSuccess;
}

static int is_device(const void *ptr) {
  struct cudaPointerAttributes attributes;
  cudaPointerGetAttributes(&attributes, ptr);
  return attributes.type == cudaMemoryTypeDevice;
}

/* A copy whose pointers are not where its kind says (a host buffer passed
   as device memory, or the reverse) would fault on a GPU, or copy the
   wrong way: end the process naming it. */
static void check_copy(void *dst, const void *src, size_t bytes,
                       enum cudaMemcpyKind kind) {
  if (!bytes || kind == cudaMemcpyDefault)
    return;
  int to_device = kind == cudaMemcpyHostToDevice ||
                  kind == cudaMemcpyDeviceToDevice;
  int from_device = kind == cudaMemcpyDeviceToHost ||
                    kind == cudaMemcpyDeviceToDevice;
  if (is_device(dst) != to_device)
    die(to_device ? "cudaMemcpy: the destination is host memory, not device "
                    "memory"
                  : "cudaMemcpy: the destination is device memory, not host "
                    "memory");
  if (is_device(src) != from_device)
    die(from_device ? "cudaMemcpy: the source is host memory, not device "
                      "memory"
                    : "cudaMemcpy: the source is device memory, not host "
                      "memory");
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            enum cudaMemcpyKind kind, cudaStream_t s) {
  (void)s;
  check_copy(dst, src, bytes, kind);
  memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       enum cudaMemcpyKind kind) {
  check_copy(dst, src, bytes, kind);
  memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes,
                            cudaStream_t s) {
  (void)s;
  memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
  memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  (void)flags;
  *s = calloc(1, sizeof(**s));
  return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  free(s);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  /* As CUDA does, wait for the host function in the way. */
  while (held(resolve(s)->gate))
    sched_yield();
  return cudaSuccess;
}

typedef struct {
  cudaHostFn_t fn;
  void *arg;
  gate_t *gate;
} host_call_t;

static void *run_host_call(void *p) {
  host_call_t *call = p;
  call->fn(call->arg);
  atomic_store(&call->gate->done, 1);
  free(call);
  return NULL;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg) {
  host_call_t *call = malloc(sizeof(*call));
  gate_t *gate = calloc(1, sizeof(*gate)); /* leaked: events may hold it */
  if (!call || !gate)
    return cudaErrorMemoryAllocation;
  *call = (host_call_t){fn, arg, gate};
  pthread_t thread;
  if (pthread_create(&thread, NULL, run_host_call, call) != 0)
    return cudaErrorLaunchFailure;
  pthread_detach(thread);
  resolve(s)->gate = gate;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  (void)flags;
  *e = calloc(1, sizeof(**e));
  return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  free(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  e->gate = held(resolve(s)->gate) ? resolve(s)->gate : NULL;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  return held(e->gate) ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e,
                                unsigned int flags) {
  (void)flags;
  if (held(e->gate))
    resolve(s)->gate = e->gate;
  return cudaSuccess;
}

/*--- cuBLAS ----------------------------------------------------------------*/

/* The calls PowerSGD makes (compressed.c). An SGEMM runs at once, as
   powersgd_math.h's reference GEMM; one given host memory, or on a handle
   whose math mode allows TF32, ends the process naming it. */
struct cublasContext {
  cublasMath_t mode;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  *handle = calloc(1, sizeof(**handle));
  if (!*handle)
    return CUBLAS_STATUS_ALLOC_FAILED;
  (*handle)->mode = CUBLAS_TF32_TENSOR_OP_MATH; /* until set */
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t s) {
  (void)handle;
  (void)s;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  handle->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k,
                              const float *alpha, const float *a, int lda,
                              const float *b, int ldb, const float *beta,
                              float *c, int ldc) {
  if (handle->mode != CUBLAS_DEFAULT_MATH)
    die("cublasSgemm: the handle's math mode is not CUBLAS_DEFAULT_MATH "
        "(TF32 would round the f32 inputs)");
  if (*alpha != 1 || *beta != 0)
    die("cublasSgemm: the fake multiplies with alpha 1 and beta 0 only");
  if ((m && n && k && (!is_device(a) || !is_device(b))) ||
      (m && n && !is_device(c)))
    die("cublasSgemm: a matrix is host memory, not device memory");
  braid_rt_psgd_gemm_t g = {
      transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k, lda, ldb, ldc};
  if (!braid_rt_psgd_gemm_valid(&g))
    return CUBLAS_STATUS_INVALID_VALUE;
  braid_rt_psgd_reference_gemm(&g, a, b, c);
  return CUBLAS_STATUS_SUCCESS;
}

/*--- NCCL ------------------------------------------------------------------*/

struct ncclComm {
  int aborted, finalized;
  int polls_in_progress; /* ncclInProgress left to report */
  int ran;               /* operations issued */
  int rank, size;
#ifdef BRAID_FAKE_NCCL_MPI
  MPI_Comm mpi;
#endif
};

#ifdef BRAID_FAKE_NCCL_MPI
static MPI_Datatype mpi_type(ncclDataType_t t) {
  return t == ncclFloat64   ? MPI_DOUBLE
         : t == ncclInt64   ? MPI_INT64_T
         : t == ncclFloat32 ? MPI_FLOAT
                            : MPI_BYTE;
}

static void mpi_check(int code, const char *what) {
  if (code != MPI_SUCCESS)
    die(what);
}
#endif

static size_t type_size(ncclDataType_t t) {
  return t == ncclFloat64 || t == ncclInt64      ? 8
         : t == ncclFloat32                      ? 4
         : t == ncclFloat16 || t == ncclBfloat16 ? 2
                                                 : 1;
}

static void check_live(ncclComm_t comm, const char *call) {
  static char message[160];
  if (!comm)
    die("an NCCL call on a NULL communicator");
  if (comm->aborted) {
    snprintf(message, sizeof(message), "%s on a communicator that was aborted",
             call);
    die(message);
  }
}

const char *ncclGetErrorString(ncclResult_t r) {
  return r == ncclRemoteError    ? "remote process exited or there was a "
                                   "network error"
         : r == ncclInvalidUsage ? "invalid usage"
                                 : "fake NCCL error";
}

const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return getenv("BRAID_FAKE_NCCL_ASYNC_ERROR")
             ? "fake peer is gone"
             : "Trying to send to self without a matching recv";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof(*id));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  (void)id;
#ifdef BRAID_FAKE_NCCL_MPI
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (nranks != world)
    die("ncclCommInitRankConfig: the fake's world is MPI's");
#else
  if (nranks != 1 || rank != 0)
    die("the fake device runs one rank");
#endif
  if (!config || config->blocking != 0)
    die("communicators must be created non-blocking");
  *comm = calloc(1, sizeof(**comm));
  (*comm)->polls_in_progress = 2;
  (*comm)->rank = rank;
  (*comm)->size = nranks;
#ifdef BRAID_FAKE_NCCL_MPI
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &(*comm)->mpi), "MPI_Comm_dup");
#endif
  return ncclInProgress;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *config) {
  check_live(comm, "ncclCommSplit");
  if (!config || config->blocking != 0)
    die("split communicators must be non-blocking");
  *newcomm = calloc(1, sizeof(**newcomm));
  (*newcomm)->polls_in_progress = 1;
#ifdef BRAID_FAKE_NCCL_MPI
  MPI_Comm split;
  mpi_check(MPI_Comm_split(comm->mpi, color, key, &split), "MPI_Comm_split");
  (*newcomm)->mpi = split;
  MPI_Comm_rank(split, &(*newcomm)->rank);
  MPI_Comm_size(split, &(*newcomm)->size);
#else
  (void)color;
  (void)key;
  (*newcomm)->size = 1;
#endif
  return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  check_live(comm, "ncclCommGetAsyncError");
  if (comm->polls_in_progress > 0) {
    --comm->polls_in_progress;
    *state = ncclInProgress;
  } else if (comm->ran && getenv("BRAID_FAKE_NCCL_ASYNC_ERROR")) {
    *state = ncclRemoteError;
  } else {
    *state = ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  check_live(comm, "ncclCommUserRank");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  check_live(comm, "ncclCommCount");
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  comm->aborted = 1;
  /* The handle is gone for the caller; it stays allocated so that a later
     use is caught rather than undefined. */
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  check_live(comm, "ncclCommFinalize");
  comm->finalized = 1;
  comm->polls_in_progress = 1;
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  check_live(comm, "ncclCommDestroy");
  if (!comm->finalized)
    die("ncclCommDestroy on a communicator that was not finalised");
#ifdef BRAID_FAKE_NCCL_MPI
  MPI_Comm_free(&comm->mpi);
#endif
  free(comm);
  return ncclSuccess;
}

#ifndef BRAID_FAKE_NCCL_MPI
/* A collective of one rank: its input is its result. */
static ncclResult_t collective(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclComm_t comm,
                               cudaStream_t s, const char *call) {
  check_live(comm, call);
  (void)s;
  ++comm->ran;
  if (count)
    memmove(recv, send, count * type_size(type));
  return ncclSuccess;
}
#endif

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t s) {
  (void)op;
#ifdef BRAID_FAKE_NCCL_MPI
  check_live(comm, "ncclAllReduce");
  ++comm->ran;
  mpi_check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                          mpi_type(type), MPI_SUM, comm->mpi),
            "MPI_Allreduce");
  (void)s;
  return ncclSuccess;
#else
  return collective(send, recv, count, type, comm, s, "ncclAllReduce");
#endif
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t s) {
#ifdef BRAID_FAKE_NCCL_MPI
  check_live(comm, "ncclAllGather");
  ++comm->ran;
  int bytes = (int)(count * type_size(type));
  mpi_check(
      MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm->mpi),
      "MPI_Allgather");
  (void)s;
  return ncclSuccess;
#else
  return collective(send, recv, count, type, comm, s, "ncclAllGather");
#endif
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s) {
  (void)op;
#ifdef BRAID_FAKE_NCCL_MPI
  check_live(comm, "ncclReduceScatter");
  ++comm->ran;
  mpi_check(MPI_Reduce_scatter_block(send, recv, (int)count, mpi_type(type),
                                     MPI_SUM, comm->mpi),
            "MPI_Reduce_scatter_block");
  (void)s;
  return ncclSuccess;
#else
  return collective(send, recv, count, type, comm, s, "ncclReduceScatter");
#endif
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t s) {
#ifdef BRAID_FAKE_NCCL_MPI
  check_live(comm, "ncclBroadcast");
  ++comm->ran;
  if (comm->rank == root && send != recv && count)
    memmove(recv, send, count * type_size(type));
  mpi_check(MPI_Bcast(recv, (int)(count * type_size(type)), MPI_BYTE, root,
                      comm->mpi),
            "MPI_Bcast");
  (void)s;
  return ncclSuccess;
#else
  if (root != 0)
    die("ncclBroadcast from a root outside a one-rank communicator");
  return collective(send, recv, count, type, comm, s, "ncclBroadcast");
#endif
}

/* The transfers of the open group, matched at its end. */
#define MAX_TRANSFERS 256
static struct {
  int is_send, matched;
  void *buf;
  size_t bytes;
  ncclComm_t comm;
  cudaStream_t stream;
  int peer;
} transfers[MAX_TRANSFERS];
static int num_transfers, group_depth;

ncclResult_t ncclGroupStart(void) {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0)
    die("ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0)
    return ncclSuccess;
#ifdef BRAID_FAKE_NCCL_MPI
  /* Transfers to other ranks: MPI messages, receives posted first. */
  MPI_Request requests[MAX_TRANSFERS];
  int num_requests = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < num_transfers; ++i) {
      if (transfers[i].peer == transfers[i].comm->rank ||
          transfers[i].is_send != pass)
        continue;
      int bytes = (int)transfers[i].bytes;
      int code =
          pass
              ? MPI_Isend(transfers[i].buf, bytes, MPI_BYTE, transfers[i].peer,
                          0, transfers[i].comm->mpi, &requests[num_requests++])
              : MPI_Irecv(transfers[i].buf, bytes, MPI_BYTE, transfers[i].peer,
                          0, transfers[i].comm->mpi, &requests[num_requests++]);
      mpi_check(code, pass ? "MPI_Isend" : "MPI_Irecv");
      transfers[i].matched = 1;
    }
  mpi_check(MPI_Waitall(num_requests, requests, MPI_STATUSES_IGNORE),
            "MPI_Waitall");
#endif
  /* A rank's sends to itself feed its receives from itself, in order. */
  for (int r = 0; r < num_transfers; ++r) {
    if (transfers[r].is_send || transfers[r].matched)
      continue;
    for (int s = 0; s < num_transfers; ++s) {
      if (!transfers[s].is_send || transfers[s].matched ||
          transfers[s].comm != transfers[r].comm)
        continue;
      if (transfers[s].bytes != transfers[r].bytes)
        die("a send and its receive differ in size");
      if (transfers[r].bytes)
        memmove(transfers[r].buf, transfers[s].buf, transfers[r].bytes);
      transfers[s].matched = transfers[r].matched = 1;
      break;
    }
  }
  int unmatched = 0;
  for (int i = 0; i < num_transfers; ++i)
    unmatched |= !transfers[i].matched;
  num_transfers = 0;
  return unmatched ? ncclInvalidUsage : ncclSuccess;
}

static ncclResult_t transfer(int is_send, void *buf, size_t count,
                             ncclDataType_t type, int peer, ncclComm_t comm,
                             cudaStream_t s) {
  check_live(comm, is_send ? "ncclSend" : "ncclRecv");
  if (peer < 0 || peer >= comm->size)
    die("a transfer to a peer outside the communicator");
  if (num_transfers == MAX_TRANSFERS)
    die("too many transfers in one group");
  ++comm->ran;
  ncclGroupStart();
  transfers[num_transfers].is_send = is_send;
  transfers[num_transfers].matched = 0;
  transfers[num_transfers].buf = buf;
  transfers[num_transfers].bytes = count * type_size(type);
  transfers[num_transfers].comm = comm;
  transfers[num_transfers].stream = s;
  transfers[num_transfers].peer = peer;
  ++num_transfers;
  return ncclGroupEnd();
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t s) {
  return transfer(1, (void *)(uintptr_t)buf, count, type, peer, comm, s);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t s) {
  return transfer(0, buf, count, type, peer, comm, s);
}

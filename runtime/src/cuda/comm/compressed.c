/*===- compressed.c - Compressed sums over NCCL: 16-bit ring, PowerSGD ---===*/
/*
 * The bf16 / fp16 reductions of collectives.h with the CPU backend's
 * semantics, bit for bit: the same ring (runtime/src/cpu/compressed.c,
 * scheduled here by host.c's braid_rt_cuda_ring_*), in which each hop
 * rounds the partial sum it sends to 16 bits and the receiver adds it to
 * its own f32 values (compressed_kernels.cu, half.h's rounding, one f32
 * add). Each of the 2 (size - 1) steps is a kernel that narrows the chunk
 * into a device staging buffer, an NCCL group of one send to rank + 1 and
 * one receive from rank - 1 (the 16-bit words, typed ncclBfloat16 /
 * ncclFloat16 but never reduced by NCCL), and a kernel that widens and adds
 * (or, in the all_gather half, copies). NCCL's own bf16 reductions would
 * round the receiver's values too and sum in another order; an all_gather
 * of every rank's 16-bit values then a local sum would send size / 2 times
 * the bytes and round at other points.
 *
 * Everything runs on the communication stream between braid_rt_op_begin
 * and braid_rt_op_finish, like every collective: ordered after the
 * caller's earlier work, the caller's stream ordered after it, its
 * completion tracked (and timed out) as one operation. Staging comes from
 * the stream-ordered allocator on the same stream, so it is reused only
 * after the ring that used it, and stays in the pool between calls
 * (context.c sets the pool's release threshold).
 *
 * PowerSGD runs on the device too, on the communication stream between
 * the same two calls: M = grad + error and the finish (the approximation
 * P Q^T and the error feedback) are kernels, P = M Q and Q = M^T P cuBLAS
 * SGEMMs (TF32 off), the two sums NCCL f32 all_reduces in place, and the
 * orthonormalisation of P's columns a one-block Gram-Schmidt kernel
 * (powersgd_kernels.cu, arithmetic in powersgd_math.h). Q stays in the
 * caller's device buffer; P is one device buffer per context, grown to the
 * largest call. No copy to the host and no host wait: the caller's stream
 * is ordered after it like after any collective. Its bits differ from the
 * CPU target's (f32 GEMMs in cuBLAS's order, tree sums in the
 * orthonormalisation) by f32 rounding.
 */

#include "internal.h"
#include "op_info.h"
#include "powersgd_math.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

/*--- The 16-bit ring ------------------------------------------------------*/

typedef struct {
  braid_rt_comm_t *comm;
  const char *op;        /* as messages name the operation */
  int format;            /* 0 bf16, 1 fp16 */
  uint16_t *send, *recv; /* device staging, the largest chunk each */
  char what[256];        /* the operation as a failure message names it */
} ring_t;

/* A ring of `op` over `comm` on `count` f32. */
static void ring_init(ring_t *ring, braid_rt_comm_t *comm, const char *op,
                      int format, size_t count) {
  ring->comm = comm;
  ring->op = op;
  ring->format = format;
  ring->send = ring->recv = NULL;
  braid_rt_op_info_t info = {op,         "f32",      count,
                             -1,         0,          comm->name,
                             comm->rank, comm->size, comm->ctx->world.rank};
  braid_rt_describe_op(&info, ring->what, sizeof(ring->what));
}

/* Records a failed CUDA call of the ring. */
static braid_rt_status_t ring_cuda(const ring_t *ring, cudaError_t code,
                                   const char *call) {
  return braid_rt_fail_cuda(ring->comm->ctx, code, call, ring->op);
}

/* One hop: sends `n_out` words of ring->send to the next rank and receives
   `n_in` into ring->recv from the previous one, as one NCCL group. */
static braid_rt_status_t exchange(const ring_t *ring, size_t n_out,
                                  size_t n_in) {
  braid_rt_comm_t *comm = ring->comm;
  cudaStream_t stream = comm->ctx->comm_stream;
  ncclDataType_t type = ring->format ? ncclFloat16 : ncclBfloat16;
  int next = (comm->rank + 1) % comm->size;
  int prev = (comm->rank + comm->size - 1) % comm->size;
  ncclGroupStart();
  ncclResult_t result =
      ncclSend(ring->send, n_out, type, next, comm->nccl, stream);
  const char *call = "ncclSend";
  if (result == ncclSuccess || result == ncclInProgress) {
    result = ncclRecv(ring->recv, n_in, type, prev, comm->nccl, stream);
    call = "ncclRecv";
  }
  ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess && result != ncclInProgress)
    return braid_rt_nccl_settle(comm, result, call, ring->what);
  return braid_rt_nccl_settle(comm, end, "ncclGroupEnd", ring->what);
}

/* One half of the ring on `buf` (count f32 of device memory): each of the
   size - 1 steps narrows the chunk it sends, exchanges, and widens what it
   receives into buf, adding it to buf's values (the reduce-scatter half;
   afterwards buf's chunk `rank` holds the sum) or replacing them (the
   all_gather half, `gather`). */
static braid_rt_status_t ring_pass(const ring_t *ring, float *buf, size_t count,
                                   int gather) {
  int size = ring->comm->size, rank = ring->comm->rank;
  cudaStream_t stream = ring->comm->ctx->comm_stream;
  for (int s = 0; s + 1 < size; ++s) {
    int out, in;
    braid_rt_cuda_ring_step(size, rank, s, gather, &out, &in);
    size_t n_out = braid_rt_cuda_ring_chunk_length(count, size, out);
    size_t n_in = braid_rt_cuda_ring_chunk_length(count, size, in);
    cudaError_t code = braid_rt_cuda_narrow(
        buf + braid_rt_cuda_ring_chunk_begin(count, size, out), ring->send,
        n_out, ring->format, stream);
    if (code != cudaSuccess)
      return ring_cuda(ring, code, "braid_rt_cuda_narrow");
    braid_rt_status_t status = exchange(ring, n_out, n_in);
    if (status != BRAID_RT_OK)
      return status;
    float *to = buf + braid_rt_cuda_ring_chunk_begin(count, size, in);
    code = gather
               ? braid_rt_cuda_widen(ring->recv, to, n_in, ring->format, stream)
               : braid_rt_cuda_widen_add(ring->recv, to, n_in, ring->format,
                                         stream);
    if (code != cudaSuccess)
      return ring_cuda(ring, code,
                       gather ? "braid_rt_cuda_widen"
                              : "braid_rt_cuda_widen_add");
  }
  return BRAID_RT_OK;
}

/* The reduce-scatter half on `acc` (this rank's values, accumulated in
   place). */
static braid_rt_status_t ring_reduce(const ring_t *ring, float *acc,
                                     size_t count) {
  return ring_pass(ring, acc, count, 0);
}

/* The all_gather half: each owner's chunk rounded once more (on the owner
   too, so that every rank ends with the same bits) and passed round. */
static braid_rt_status_t ring_gather(const ring_t *ring, float *buf,
                                     size_t count) {
  int size = ring->comm->size, rank = ring->comm->rank;
  cudaError_t code = braid_rt_cuda_round_trip(
      buf + braid_rt_cuda_ring_chunk_begin(count, size, rank),
      braid_rt_cuda_ring_chunk_length(count, size, rank), ring->format,
      ring->comm->ctx->comm_stream);
  if (code != cudaSuccess)
    return ring_cuda(ring, code, "braid_rt_cuda_round_trip");
  return ring_pass(ring, buf, count, 1);
}

/* Stream-ordered device staging on the communication stream. */
static braid_rt_status_t staging_alloc(braid_rt_comm_t *comm, const char *op,
                                       void **out, size_t bytes) {
  cudaError_t code =
      cudaMallocAsync(out, bytes ? bytes : 1, comm->ctx->comm_stream);
  if (code == cudaErrorMemoryAllocation) {
    *out = NULL;
    return braid_rt_fail(comm->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: out of device memory for %zu bytes of "
                         "staging",
                         op, comm->name, bytes);
  }
  if (code != cudaSuccess) {
    *out = NULL;
    return braid_rt_fail_cuda(comm->ctx, code, "cudaMallocAsync", op);
  }
  return BRAID_RT_OK;
}

static void staging_free(braid_rt_comm_t *comm, void *p) {
  if (p)
    cudaFreeAsync(p, comm->ctx->comm_stream);
}

/* Ends an operation begun with braid_rt_op_begin: frees the staging behind
   it on the communication stream, then finishes it (blocking) or, after a
   failure, releases its request. */
static braid_rt_status_t finish(braid_rt_request_t *req,
                                braid_rt_status_t status, void *staging_a,
                                void *staging_b) {
  braid_rt_comm_t *comm = req->comm;
  staging_free(comm, staging_a);
  staging_free(comm, staging_b);
  if (status != BRAID_RT_OK) {
    braid_rt_request_free(req);
    return status;
  }
  return braid_rt_op_finish(req, NULL, ncclSuccess, "ncclGroupEnd");
}

braid_rt_status_t braid_rt_backend_all_reduce_sum_f32_16bit(
    braid_rt_comm_t *comm, float *buf, size_t count, braid_rt_stream_t *stream,
    int format) {
  const char *op = "all_reduce (16-bit)";
  braid_rt_request_t *req;
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, op, BRAID_RT_F32, count, &req);
  if (status != BRAID_RT_OK)
    return status;
  size_t words = braid_rt_cuda_ring_staging_words(count, comm->size);
  ring_t ring;
  ring_init(&ring, comm, op, format, count);
  void *staging = NULL;
  status = staging_alloc(comm, op, &staging, words * sizeof(uint16_t));
  if (status == BRAID_RT_OK) {
    ring.send = staging;
    ring.recv = ring.send + words / 2;
    status = ring_reduce(&ring, buf, count);
  }
  if (status == BRAID_RT_OK)
    status = ring_gather(&ring, buf, count);
  return finish(req, status, staging, NULL);
}

braid_rt_status_t braid_rt_backend_reduce_scatter_sum_f32_16bit(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream, int format) {
  const char *op = "reduce_scatter (16-bit)";
  braid_rt_request_t *req;
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, op, BRAID_RT_F32, recv_count, &req);
  if (status != BRAID_RT_OK)
    return status;
  int size = comm->size;
  size_t count = (size_t)size * recv_count;
  size_t words = braid_rt_cuda_ring_staging_words(count, size);
  cudaStream_t s = comm->ctx->comm_stream;
  /* The ring accumulates in place: a copy of `send`, which stays as it
     is. */
  void *acc = NULL, *staging = NULL;
  status = staging_alloc(comm, op, &acc, count * sizeof(float));
  if (status == BRAID_RT_OK)
    status = staging_alloc(comm, op, &staging, words * sizeof(uint16_t));
  if (status == BRAID_RT_OK) {
    cudaError_t code = cudaMemcpyAsync(acc, send, count * sizeof(float),
                                       cudaMemcpyDeviceToDevice, s);
    if (code != cudaSuccess)
      status = braid_rt_fail_cuda(comm->ctx, code, "cudaMemcpyAsync", op);
  }
  if (status == BRAID_RT_OK && size > 1) {
    ring_t ring;
    ring_init(&ring, comm, op, format, count);
    ring.send = staging;
    ring.recv = ring.send + words / 2;
    status = ring_reduce(&ring, acc, count);
  }
  if (status == BRAID_RT_OK) {
    /* The block this rank keeps is its f32 accumulation, not rounded
       again. */
    cudaError_t code = cudaMemcpyAsync(
        recv, (float *)acc + (size_t)comm->rank * recv_count,
        recv_count * sizeof(float), cudaMemcpyDeviceToDevice, s);
    if (code != cudaSuccess)
      status = braid_rt_fail_cuda(comm->ctx, code, "cudaMemcpyAsync", op);
  }
  return finish(req, status, acc, staging);
}

/*--- PowerSGD on the device -----------------------------------------------*/

/* Records a failed cuBLAS call. */
static braid_rt_status_t blas_fail(braid_rt_comm_t *comm, const char *op,
                                   cublasStatus_t code, const char *call) {
  return braid_rt_fail(comm->ctx,
                       code == CUBLAS_STATUS_ALLOC_FAILED
                           ? BRAID_RT_OUT_OF_MEMORY
                           : BRAID_RT_INTERNAL,
                       "%s over %s: %s failed with cuBLAS status %d", op,
                       comm->name, call, (int)code);
}

/* The context's cuBLAS handle (on the communication stream; TF32 off even
   where BRAID_CUDA_ALLOW_TF32=1 lets the kernels' GEMMs use it) and a P
   buffer of at least `p_floats`, made or grown on first need.
   Growing frees the smaller buffer on the communication stream, after the
   calls that used it. */
static braid_rt_status_t powersgd_prepare(braid_rt_comm_t *comm, const char *op,
                                          size_t p_floats) {
  braid_rt_context_t *ctx = comm->ctx;
  if (!ctx->powersgd_blas) {
    cublasHandle_t handle;
    cublasStatus_t code = cublasCreate(&handle);
    if (code != CUBLAS_STATUS_SUCCESS)
      return blas_fail(comm, op, code, "cublasCreate");
    ctx->powersgd_blas = handle;
    code = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    if (code != CUBLAS_STATUS_SUCCESS)
      return blas_fail(comm, op, code, "cublasSetMathMode");
    code = cublasSetStream(handle, ctx->comm_stream);
    if (code != CUBLAS_STATUS_SUCCESS)
      return blas_fail(comm, op, code, "cublasSetStream");
  }
  if (p_floats > ctx->powersgd_p_floats) {
    staging_free(comm, ctx->powersgd_p);
    ctx->powersgd_p = NULL;
    ctx->powersgd_p_floats = 0;
    void *p;
    braid_rt_status_t status =
        staging_alloc(comm, op, &p, p_floats * sizeof(float));
    if (status != BRAID_RT_OK)
      return status;
    ctx->powersgd_p = p;
    ctx->powersgd_p_floats = p_floats;
  }
  return BRAID_RT_OK;
}

/* C = op(A) op(B) as `g` says (powersgd_math.h), on the communication
   stream. */
static braid_rt_status_t gemm(braid_rt_comm_t *comm, const char *op,
                              braid_rt_psgd_gemm_t g, const float *a,
                              const float *b, float *c) {
  const float one = 1, zero = 0;
  cublasStatus_t code = cublasSgemm(
      comm->ctx->powersgd_blas, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &one, a, g.lda, b,
      g.ldb, &zero, c, g.ldc);
  return code == CUBLAS_STATUS_SUCCESS
             ? BRAID_RT_OK
             : blas_fail(comm, op, code, "cublasSgemm");
}

/* Sums `n` floats of device memory in place over `comm` on the
   communication stream (inside the PowerSGD operation: no request of its
   own). */
static braid_rt_status_t sum_in_place(braid_rt_comm_t *comm, float *buf,
                                      size_t n, const char *what) {
  ncclResult_t result = ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum,
                                      comm->nccl, comm->ctx->comm_stream);
  return braid_rt_nccl_settle(comm, result, "ncclAllReduce", what);
}

static braid_rt_status_t launched(braid_rt_comm_t *comm, const char *op,
                                  cudaError_t code, const char *kernel) {
  return code == cudaSuccess ? BRAID_RT_OK
                             : braid_rt_fail_cuda(comm->ctx, code, kernel, op);
}

/* The CPU backend's steps (cpu/powersgd.c) on the device, all on the
   communication stream between braid_rt_op_begin and braid_rt_op_finish
   like the ring above: no copy to the host and no host wait. M lives in
   `error` (the finish overwrites it with the new error, element by
   element) or, without error feedback, is `grad` itself, so the only
   scratch is P, the context's. A failure in the middle leaves grad, q and
   error partly updated (the communicator is then aborted anyway). */
braid_rt_status_t braid_rt_backend_powersgd_all_reduce_f32(
    braid_rt_comm_t *comm, float *grad, size_t rows, size_t cols, size_t rank,
    float *q, float *error, braid_rt_stream_t *stream) {
  const char *op = "powersgd_all_reduce";
  if (rows > INT_MAX || cols > INT_MAX)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: a %zu x %zu gradient exceeds cuBLAS's "
                         "int dimensions",
                         op, comm->name, rows, cols);
  braid_rt_request_t *req;
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, op, BRAID_RT_F32, rows * cols, &req);
  if (status != BRAID_RT_OK)
    return status;
  char what[256];
  braid_rt_op_info_t info = {op,         "f32",      rows * cols,
                             -1,         0,          comm->name,
                             comm->rank, comm->size, comm->ctx->world.rank};
  braid_rt_describe_op(&info, what, sizeof(what));
  cudaStream_t s = comm->ctx->comm_stream;
  status = powersgd_prepare(comm, op, rows * rank);
  float *p = comm->ctx->powersgd_p;
  float *m = error ? error : grad;
  if (status == BRAID_RT_OK && error)
    status = launched(comm, op,
                      braid_rt_cuda_powersgd_m(grad, error, m, rows * cols, s),
                      "braid_rt_cuda_powersgd_m");
  /* P = M Q, summed over the ranks, orthonormalised. */
  if (status == BRAID_RT_OK)
    status = gemm(comm, op, braid_rt_psgd_gemm_p(rows, cols, rank), q, m, p);
  if (status == BRAID_RT_OK)
    status = sum_in_place(comm, p, rows * rank, what);
  if (status == BRAID_RT_OK)
    status = launched(comm, op,
                      braid_rt_cuda_powersgd_orthonormalise(p, rows, rank, s),
                      "braid_rt_cuda_powersgd_orthonormalise");
  /* Q = M^T P, summed over the ranks in `q`: the next step's warm start. */
  if (status == BRAID_RT_OK)
    status = gemm(comm, op, braid_rt_psgd_gemm_q(rows, cols, rank), p, m, q);
  if (status == BRAID_RT_OK)
    status = sum_in_place(comm, q, cols * rank, what);
  if (status == BRAID_RT_OK)
    status = launched(comm, op,
                      braid_rt_cuda_powersgd_finish(m, p, q, grad, error, rows,
                                                    cols, rank, comm->size, s),
                      "braid_rt_cuda_powersgd_finish");
  return finish(req, status, NULL, NULL);
}

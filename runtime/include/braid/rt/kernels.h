/*===- kernels.h - Compute kernels of the Braid runtime ------------------===*/
/*
 * One f32 kernel per compute op of the braid dialect, forward and gradient,
 * named braid_rt_<op>_f32 (braid.broadcast's is braid_rt_broadcast_to_f32:
 * braid_rt_broadcast_f32 is the collective). Every backend implements the
 * same declarations with the same calling convention, so a lowering and the
 * program runtime are written once for all targets. Each computes what the op's
 * EvalOpInterface implementation (lib/Eval/BraidOpsEval.cpp)
 * defines, to within f32 rounding: accumulations (means, variances, norms,
 * softmax sums, loss sums) run in double, as the reference does.
 *
 * Calling convention, so that a lowering can be written from an op's types
 * and attributes alone:
 *
 *  - Every tensor is a row-major, contiguous buffer of its element type.
 *    f32 tensors are `float *`; integer tensors (ids, labels, steps) are
 *    `const int32_t *`, and the `_i64` variant of the kernel takes
 *    `const int64_t *` (the dialect allows i32 and i64 for those operands).
 *    A rank-0 tensor (a loss, a learning rate, a step) is a pointer to its
 *    one element.
 *  - The first argument is the stream the kernel runs on (NULL: the default
 *    stream; see memory.h). The CPU backend runs every kernel to completion
 *    on the calling thread and ignores it; the CUDA backend enqueues the
 *    kernel on it. Tensors (every `float *`/`int32_t *`/`int64_t *`
 *    operand or result, rank-0 ones included) are device memory
 *    (memory.h); shape, permutation, axes, start and stride arrays, and the
 *    lists of tensor pointers (with their counts) of the list kernels, are
 *    host memory, read during the call.
 *  - Then come the operands (const pointers, in the op's
 *    operand order), then sizes and attributes as plain scalars, then the
 *    results (non-const pointers, in the op's result order).
 *  - General-rank ops take `int64_t rank` and `const int64_t *shape` (the
 *    static shape of that tensor's type), plus arrays for permutations,
 *    axes, starts and strides, each with `rank` (or `num_axes`) entries.
 *    Row-wise ops take `rows` (the product of all dimensions but the last)
 *    and `cols` (the last dimension). Elementwise ops on same-shaped
 *    tensors take `count`, the number of elements.
 *  - f64 attributes are passed as double, i64 attributes as int64_t, unit
 *    attributes as int (0 absent, 1 present), enum attributes as the enums
 *    below, whose values are those of the dialect's enums.
 *  - Sizes may be 0 (nothing is written except where a rank-0 result is
 *    defined for empty inputs, e.g. cross_entropy of no labels is 0).
 *
 * Aliasing: results must not overlap operands, except that the elementwise
 * kernels (unary, binary, *_grad of activations, adamw_update, sgd_update,
 * copy) accept a result equal to an operand of the result's shape (in-place
 * update; the other operand of a binary kernel may broadcast).
 *
 * Errors: kernels that cannot fail return void; they trust their arguments
 * (shapes consistent with the op's verifier). Kernels that can fail return
 * braid_rt_status_t: BRAID_RT_INVALID_ARGUMENT for an id or label outside
 * [0, vocab) (the contents of the results are then unspecified), and
 * BRAID_RT_OUT_OF_MEMORY when scratch memory cannot be allocated. No kernel
 * prints or exits.
 *
 * Threading (CPU backend): every kernel is reentrant and thread-safe (no global
 * state; braid_rt_matmul_bf16in_f32 keeps a buffer per calling thread);
 * concurrent calls must not share result buffers. Matmul uses
 * OpenBLAS SGEMM (whose own threads follow OPENBLAS_NUM_THREADS) and
 * oneDNN's bf16 GEMM (on the kernels' OpenMP threads); loops
 * over enough elements run on OpenMP threads (OMP_NUM_THREADS) when the library
 * was built with OpenMP, small ones run on the calling thread only.
 */
#ifndef BRAID_RT_KERNELS_H
#define BRAID_RT_KERNELS_H

#include "braid/rt/memory.h"
#include "braid/rt/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The values of the dialect's GeluApproximation, ReduceKind and LrDecay. */
typedef enum {
  BRAID_RT_GELU_EXACT = 0,
  BRAID_RT_GELU_TANH = 1,
} braid_rt_gelu_approximation_t;

typedef enum {
  BRAID_RT_REDUCE_SUM = 0,
  BRAID_RT_REDUCE_MEAN = 1,
  BRAID_RT_REDUCE_MAX = 2,
} braid_rt_reduce_kind_t;

typedef enum {
  BRAID_RT_LR_CONSTANT = 0,
  BRAID_RT_LR_LINEAR = 1,
  BRAID_RT_LR_COSINE = 2,
} braid_rt_lr_decay_t;

/*===----------------------------------------------------------------------===*/
/* Linear algebra and elementwise arithmetic                                  */
/*===----------------------------------------------------------------------===*/

/* braid.matmul. `a` has type a_shape ([..., M, K], or [..., K, M] with
   transpose_a), `b` has type b_shape ([..., K, N], or [..., N, K] with
   transpose_b); both ranks >= 2. The batch dimensions (all but the last
   two) broadcast as in NumPy; `c` is [broadcast batch..., M, N]. */
void braid_rt_matmul_f32(braid_rt_stream_t *stream, const float *a,
                         const float *b, int64_t a_rank, const int64_t *a_shape,
                         int64_t b_rank, const int64_t *b_shape,
                         int transpose_a, int transpose_b, float *c);

/* braid.matmul marked braid.bf16_operands (braid-legalize-bf16: both
   operands hold bf16 values): the same product, the operands' products
   summed in f32 from bf16 copies (CPU: oneDNN's bf16 GEMM, its copies in a
   per-thread buffer kept between calls; the f32 GEMM where oneDNN has no
   bf16 GEMM for the CPU; CUDA: cuBLAS's bf16 GEMM,
   cublasGemmStridedBatchedEx with f32 sums, on bf16 copies in
   stream-ordered scratch). Equal to braid_rt_matmul_f32 up to the order of
   the sums. OUT_OF_MEMORY (either backend) if the copies cannot be
   allocated. */
braid_rt_status_t braid_rt_matmul_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b, int64_t a_rank,
    const int64_t *a_shape, int64_t b_rank, const int64_t *b_shape,
    int transpose_a, int transpose_b, float *c);

/* braid.matmul_bias (braid-fuse-matmul-epilogue): braid_rt_matmul_f32's
   product with bias[N] (N: c's last dimension) added to every row, then,
   when `gelu` is nonzero, tanh GELU (braid_rt_gelu_tanh_of): the same
   values as braid_rt_matmul_f32, braid_rt_add_f32 and braid_rt_gelu_f32 in
   turn. CPU: the epilogue is applied to each block of the product as its
   GEMM leaves it; CUDA: one cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS or
   GELU_BIAS (TF32 only with BRAID_CUDA_ALLOW_TF32, as the f32 matmul; one
   call per batch for mixed broadcasting). */
void braid_rt_matmul_bias_f32(braid_rt_stream_t *stream, const float *a,
                              const float *b, const float *bias, int64_t a_rank,
                              const int64_t *a_shape, int64_t b_rank,
                              const int64_t *b_shape, int transpose_a,
                              int transpose_b, int gelu, float *c);

/* braid.matmul_bias marked braid.bf16_operands: braid_rt_matmul_bf16in_f32's
   product (CUDA: cublasLtMatmul on bf16 copies, CUDA_R_16BF operands, f32
   result, CUBLAS_COMPUTE_32F) with braid_rt_matmul_bias_f32's epilogue (the
   bias is f32). OUT_OF_MEMORY if the copies cannot be allocated. */
braid_rt_status_t braid_rt_matmul_bias_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b,
    const float *bias, int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
    const int64_t *b_shape, int transpose_a, int transpose_b, int gelu,
    float *c);

/* braid.add, braid.sub, braid.mul, braid.div: `out` has the NumPy broadcast
   of a_shape and b_shape (right-aligned; each dimension equal or 1). */
void braid_rt_add_f32(braid_rt_stream_t *stream, const float *a, const float *b,
                      int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
                      const int64_t *b_shape, float *out);
void braid_rt_sub_f32(braid_rt_stream_t *stream, const float *a, const float *b,
                      int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
                      const int64_t *b_shape, float *out);
void braid_rt_mul_f32(braid_rt_stream_t *stream, const float *a, const float *b,
                      int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
                      const int64_t *b_shape, float *out);
void braid_rt_div_f32(braid_rt_stream_t *stream, const float *a, const float *b,
                      int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
                      const int64_t *b_shape, float *out);

/* braid.neg, exp, sqrt, rsqrt, relu, silu: `count` elements of `x` to `y`. */
void braid_rt_neg_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                      float *y);
void braid_rt_exp_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                      float *y);
void braid_rt_sqrt_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       float *y);
void braid_rt_rsqrt_f32(braid_rt_stream_t *stream, const float *x,
                        int64_t count, float *y);
void braid_rt_relu_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       float *y);
void braid_rt_silu_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       float *y);
/* braid.round to bf16: each element to the nearest bf16 value (ties to
   even), kept as a float; how bf16 programs run on the f32 kernels
   (braid-legalize-bf16). */
void braid_rt_round_bf16_f32(braid_rt_stream_t *stream, const float *x,
                             int64_t count, float *y);
/* bf16 storage (braid-legalize-bf16 keeps a layer's saved bf16 values in
   bf16): braid.convert f32 to bf16, each element to its 16 bits, to
   nearest, ties to even (exact for an f32 holding a bf16 value; a NaN
   stays a quiet NaN), and bf16 to f32 (exact). */
void braid_rt_pack_bf16_f32(braid_rt_stream_t *stream, const float *x,
                            int64_t count, uint16_t *y);
void braid_rt_unpack_bf16_f32(braid_rt_stream_t *stream, const uint16_t *x,
                              int64_t count, float *y);
/* braid.gelu with its `approximate` attribute. */
void braid_rt_gelu_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       braid_rt_gelu_approximation_t approximate, float *y);

/*===----------------------------------------------------------------------===*/
/* Normalisation, embeddings, attention, loss                                 */
/*===----------------------------------------------------------------------===*/

/* braid.softmax along `axis` of a tensor of shape [d0, ..., dn]:
   outer = d0 * ... * d(axis-1), size = d(axis), inner = d(axis+1) * ... * dn
   (inner = 1 for the last axis). */
void braid_rt_softmax_f32(braid_rt_stream_t *stream, const float *x,
                          int64_t outer, int64_t size, int64_t inner, float *y);

/* braid.layer_norm: x and y are [rows, cols] (leading dims flattened),
   scale and bias are [cols]; `epsilon` is the attribute (default 1e-5). */
void braid_rt_layer_norm_f32(braid_rt_stream_t *stream, const float *x,
                             const float *scale, const float *bias,
                             int64_t rows, int64_t cols, double epsilon,
                             float *y);
/* braid.rms_norm: as layer_norm without bias (epsilon default 1e-6). */
void braid_rt_rms_norm_f32(braid_rt_stream_t *stream, const float *x,
                           const float *scale, int64_t rows, int64_t cols,
                           double epsilon, float *y);

/* braid.embedding: table is [vocab, hidden], ids has `num_ids` elements (any
   shape), y is ids.shape + [hidden]. INVALID_ARGUMENT for an id outside
   [0, vocab). */
braid_rt_status_t braid_rt_embedding_f32(braid_rt_stream_t *stream,
                                         const float *table, const int32_t *ids,
                                         int64_t vocab, int64_t hidden,
                                         int64_t num_ids, float *y);
braid_rt_status_t braid_rt_embedding_f32_i64(braid_rt_stream_t *stream,
                                             const float *table,
                                             const int64_t *ids, int64_t vocab,
                                             int64_t hidden, int64_t num_ids,
                                             float *y);

/* The first id found outside its range by braid_rt_check_ids. */
typedef struct braid_rt_bad_id {
  int64_t site;     /* the caller's tag for the check */
  int64_t id;       /* the id */
  int64_t position; /* its index among the `count` checked */
  int64_t count;
  int64_t range;    /* ids must lie in [0, range) */
} braid_rt_bad_id_t;

/* Checks that the `count` ids (i32, or i64 when `ids_i64`) lie in
   [0, range), before a kernel whose own INVALID_ARGUMENT would name neither
   the id nor its position. `site` is the caller's tag, returned with a bad
   id. Host backends check now: INVALID_ARGUMENT with *bad set to the first
   bad id. Device backends enqueue the check on `stream` and return OK, so
   that ids never travel to the host; braid_rt_poll_bad_ids then returns a
   bad id of any check enqueued since the previous poll. */
braid_rt_status_t braid_rt_check_ids(braid_rt_stream_t *stream,
                                     const void *ids, int ids_i64,
                                     int64_t count, int64_t range,
                                     int64_t site, braid_rt_bad_id_t *bad);
/* Waits for `stream` (NULL: the default stream) on device backends and
   returns INVALID_ARGUMENT with *bad set when a check enqueued since the
   previous poll found a bad id (the first to be recorded), OK otherwise;
   clears the record. Host backends return OK: their checks fail at once. */
braid_rt_status_t braid_rt_poll_bad_ids(braid_rt_stream_t *stream,
                                        braid_rt_bad_id_t *bad);

/* braid.rotary: x and y are [batch, seq, heads, dim] (dim even); `base` and
   `inverse` are the attributes (base default 10000). */
void braid_rt_rotary_f32(braid_rt_stream_t *stream, const float *x,
                         int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                         double base, int inverse, float *y);

/* braid.attention: q is [batch, seq_q, heads_q, dim], k and v are
   [batch, seq_kv, heads_kv, dim] with heads_q a multiple of heads_kv, y is
   [batch, seq_q, heads_q, dim]. `scale` is the effective scale: the `scale`
   attribute if present, else 1 / sqrt(dim). `causal` requires
   seq_q == seq_kv. CPU: tiled (no [seq_q, seq_kv] scores), scratch of
   O(64 * (64 + dim)) floats per thread (OUT_OF_MEMORY). */
braid_rt_status_t braid_rt_attention_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads_q,
    int64_t heads_kv, int64_t dim, int causal, double scale, float *y);

/* braid.cross_entropy: logits are [rows, vocab] (leading dims flattened),
   labels has `rows` elements, `loss` is rank 0: the mean over rows of
   logsumexp(logits) - logits[label] (0 when rows == 0). INVALID_ARGUMENT for
   a label outside [0, vocab). */
braid_rt_status_t braid_rt_cross_entropy_f32(braid_rt_stream_t *stream,
                                             const float *logits,
                                             const int32_t *labels,
                                             int64_t rows, int64_t vocab,
                                             float *loss);
braid_rt_status_t braid_rt_cross_entropy_f32_i64(braid_rt_stream_t *stream,
                                                 const float *logits,
                                                 const int64_t *labels,
                                                 int64_t rows, int64_t vocab,
                                                 float *loss);

/*===----------------------------------------------------------------------===*/
/* Shape ops and constants. The data-movement kernels also have _i32         */
/* variants (same arguments, int32_t elements) for integer tensors.           */
/*===----------------------------------------------------------------------===*/

/* braid.reshape (and braid.constant from a buffer): copies `count` elements.
   Generated code may instead alias the buffer; x == y is allowed. */
void braid_rt_copy_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       float *y);
void braid_rt_copy_i32(braid_rt_stream_t *stream, const int32_t *x,
                       int64_t count, int32_t *y);
/* bf16 elements (bf16 storage) as their 16 bits. */
void braid_rt_copy_bf16(braid_rt_stream_t *stream, const uint16_t *x,
                        int64_t count, uint16_t *y);

/* braid.constant of a splat value: `count` copies of `value`. */
void braid_rt_fill_f32(braid_rt_stream_t *stream, float value, int64_t count,
                       float *y);
void braid_rt_fill_i32(braid_rt_stream_t *stream, int32_t value, int64_t count,
                       int32_t *y);

/* braid.transpose: x has type shape[rank]; result dimension i is input
   dimension permutation[i]. */
void braid_rt_transpose_f32(braid_rt_stream_t *stream, const float *x,
                            int64_t rank, const int64_t *shape,
                            const int64_t *permutation, float *y);
void braid_rt_transpose_i32(braid_rt_stream_t *stream, const int32_t *x,
                            int64_t rank, const int64_t *shape,
                            const int64_t *permutation, int32_t *y);

/* braid.reduce over the `num_axes` distinct `axes` of x (type shape[rank]).
   keep_dims does not change the result's row-major layout, so it is not an
   argument. A max over no elements is -inf; a sum 0. */
void braid_rt_reduce_f32(braid_rt_stream_t *stream, const float *x,
                         int64_t rank, const int64_t *shape, int64_t num_axes,
                         const int64_t *axes, braid_rt_reduce_kind_t kind,
                         float *y);

/* braid.broadcast: x has type in_shape[in_rank], y out_shape[out_rank]
   (NumPy rules, right-aligned). */
void braid_rt_broadcast_to_f32(braid_rt_stream_t *stream, const float *x,
                               int64_t in_rank, const int64_t *in_shape,
                               int64_t out_rank, const int64_t *out_shape,
                               float *y);
void braid_rt_broadcast_to_i32(braid_rt_stream_t *stream, const int32_t *x,
                               int64_t in_rank, const int64_t *in_shape,
                               int64_t out_rank, const int64_t *out_shape,
                               int32_t *y);

/* braid.slice: x has type in_shape[rank], y has type out_shape[rank] (the
   result type; `limit` is implied by it); `start` and `stride` are the
   attributes, `stride` NULL when absent (all 1). */
void braid_rt_slice_f32(braid_rt_stream_t *stream, const float *x, int64_t rank,
                        const int64_t *in_shape, const int64_t *start,
                        const int64_t *stride, const int64_t *out_shape,
                        float *y);
void braid_rt_slice_i32(braid_rt_stream_t *stream, const int32_t *x,
                        int64_t rank, const int64_t *in_shape,
                        const int64_t *start, const int64_t *stride,
                        const int64_t *out_shape, int32_t *y);

/* braid.concat along `axis` of the `num_inputs` inputs (types
   [..., input_axis_sizes[i], ...]); y has type out_shape[rank]. */
void braid_rt_concat_f32(braid_rt_stream_t *stream, const float *const *inputs,
                         int64_t num_inputs, int64_t rank,
                         const int64_t *out_shape, int64_t axis,
                         const int64_t *input_axis_sizes, float *y);
void braid_rt_concat_i32(braid_rt_stream_t *stream,
                         const int32_t *const *inputs, int64_t num_inputs,
                         int64_t rank, const int64_t *out_shape, int64_t axis,
                         const int64_t *input_axis_sizes, int32_t *y);

/*===----------------------------------------------------------------------===*/
/* Gradient ops                                                               */
/*===----------------------------------------------------------------------===*/

/* braid.relu_grad, silu_grad, gelu_grad: dx = dy * f'(x), all of `count`
   elements (the ops' operands and result share one type). */
void braid_rt_relu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count, float *dx);
void braid_rt_silu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count, float *dx);
void braid_rt_gelu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count,
                            braid_rt_gelu_approximation_t approximate,
                            float *dx);

/* braid.layer_norm_grad and rms_norm_grad: x, dy, dx are [rows, cols],
   scale is [cols]; the input gradient only. */
void braid_rt_layer_norm_grad_f32(braid_rt_stream_t *stream, const float *x,
                                  const float *scale, const float *dy,
                                  int64_t rows, int64_t cols, double epsilon,
                                  float *dx);
void braid_rt_rms_norm_grad_f32(braid_rt_stream_t *stream, const float *x,
                                const float *scale, const float *dy,
                                int64_t rows, int64_t cols, double epsilon,
                                float *dx);

/* braid.embedding_grad: ids has num_ids elements, dy is ids.shape + [hidden],
   the result is [vocab, hidden] (overwritten, not accumulated into).
   INVALID_ARGUMENT for an id outside [0, vocab). */
braid_rt_status_t braid_rt_embedding_grad_f32(braid_rt_stream_t *stream,
                                              const int32_t *ids,
                                              const float *dy, int64_t num_ids,
                                              int64_t vocab, int64_t hidden,
                                              float *dtable);
braid_rt_status_t
braid_rt_embedding_grad_f32_i64(braid_rt_stream_t *stream, const int64_t *ids,
                                const float *dy, int64_t num_ids, int64_t vocab,
                                int64_t hidden, float *dtable);

/* braid.attention_grad: shapes and `scale` as for attention, dy like q.
   `operand` is the attribute (0: the result is dq, [batch, seq_q, heads_q,
   dim]; 1: dk; 2: dv, both [batch, seq_kv, heads_kv, dim]; any other
   value: INVALID_ARGUMENT); a KV head's gradient sums those of the query
   heads sharing it. CPU: tiled, scratch of O(64 * (64 + dim)) floats and 2
   * seq_q * heads_q / heads_kv doubles per thread (OUT_OF_MEMORY). */
braid_rt_status_t braid_rt_attention_grad_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    int64_t operand, float *out);
/* The three gradients at once (one recomputation of the probabilities), for
   a lowering that fuses the three attention_grad ops of one attention; any
   of dq, dk, dv may be NULL. braid-lower-to-emitc calls it for the adjacent
   attention_grad ops of one attention. */
braid_rt_status_t braid_rt_attention_grad_all_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    float *dq, float *dk, float *dv);

/* braid.cross_entropy_grad: logits and dlogits are [rows, vocab], labels has
   `rows` elements, `grad` is the rank-0 loss gradient. */
braid_rt_status_t
braid_rt_cross_entropy_grad_f32(braid_rt_stream_t *stream, const float *logits,
                                const int32_t *labels, const float *grad,
                                int64_t rows, int64_t vocab, float *dlogits);
braid_rt_status_t braid_rt_cross_entropy_grad_f32_i64(
    braid_rt_stream_t *stream, const float *logits, const int64_t *labels,
    const float *grad, int64_t rows, int64_t vocab, float *dlogits);

/* braid.reduce_max_grad: x and dx have type shape[rank], dy is the result
   gradient of reduce max over `axes` (keep_dims or not: same layout). Each
   dy element goes to the maxima of its group, split evenly among ties.
   Scratch proportional to dy (OUT_OF_MEMORY). */
braid_rt_status_t braid_rt_reduce_max_grad_f32(
    braid_rt_stream_t *stream, const float *x, const float *dy, int64_t rank,
    const int64_t *shape, int64_t num_axes, const int64_t *axes, float *dx);

/* braid.slice_grad: dy has type dy_shape[rank] (the slice), dx has type
   dx_shape[rank] (the sliced tensor's); start/stride as for slice. dx is
   zero except at the selected elements. */
void braid_rt_slice_grad_f32(braid_rt_stream_t *stream, const float *dy,
                             int64_t rank, const int64_t *dy_shape,
                             const int64_t *start, const int64_t *stride,
                             const int64_t *dx_shape, float *dx);

/*===----------------------------------------------------------------------===*/
/* Training ops                                                               */
/*===----------------------------------------------------------------------===*/

/* braid.lr_schedule: `step` is the rank-0 step, `lr` the rank-0 result;
   the rest are the attributes (min_lr default 0, warmup_steps 0,
   total_steps 1). */
void braid_rt_lr_schedule_f32(braid_rt_stream_t *stream, const int32_t *step,
                              braid_rt_lr_decay_t decay, double lr,
                              double min_lr, int64_t warmup_steps,
                              int64_t total_steps, float *out);
void braid_rt_lr_schedule_f32_i64(braid_rt_stream_t *stream,
                                  const int64_t *step,
                                  braid_rt_lr_decay_t decay, double lr,
                                  double min_lr, int64_t warmup_steps,
                                  int64_t total_steps, float *out);

/* braid.global_norm and braid.sum_squares over `num_inputs` tensors of
   counts[i] elements each; the result is rank 0. */
void braid_rt_global_norm_f32(braid_rt_stream_t *stream,
                              const float *const *inputs, const int64_t *counts,
                              int64_t num_inputs, float *out);
void braid_rt_sum_squares_f32(braid_rt_stream_t *stream,
                              const float *const *inputs, const int64_t *counts,
                              int64_t num_inputs, float *out);

/* braid.clip_coefficient: min(1, max_norm / (norm + 1e-6)), rank 0. */
void braid_rt_clip_coefficient_f32(braid_rt_stream_t *stream, const float *norm,
                                   double max_norm, float *out);

/* braid.select: `count` elements of on_true where the rank-0 condition is
   not zero (NaN is not zero), else of on_false. out may alias either. */
void braid_rt_select_f32(braid_rt_stream_t *stream, const float *condition,
                         const float *on_true, const float *on_false,
                         int64_t count, float *out);

/* braid.adamw_update on `count` elements: param, grad, m, v and the results
   have the parameter's type; lr, step and grad_scale are rank 0. The
   attributes default to beta1 0.9, beta2 0.999, epsilon 1e-8,
   weight_decay 0.01. Results may alias param, m, v (in place). A
   non-finite grad_scale (the training step's signal of a non-finite loss
   or gradient norm) skips the update: the results are param, m and v. */
void braid_rt_adamw_update_f32(braid_rt_stream_t *stream, const float *param,
                               const float *grad, const float *m,
                               const float *v, const float *lr,
                               const int32_t *step, const float *grad_scale,
                               int64_t count, double beta1, double beta2,
                               double epsilon, double weight_decay,
                               float *new_param, float *new_m, float *new_v);
void braid_rt_adamw_update_f32_i64(braid_rt_stream_t *stream,
                                   const float *param, const float *grad,
                                   const float *m, const float *v,
                                   const float *lr, const int64_t *step,
                                   const float *grad_scale, int64_t count,
                                   double beta1, double beta2, double epsilon,
                                   double weight_decay, float *new_param,
                                   float *new_m, float *new_v);

/* braid.sgd_update on `count` elements: lr and grad_scale are rank 0;
   momentum and weight_decay default to 0. Results may alias param and
   momentum_buffer. A non-finite grad_scale skips the update (results equal
   param and momentum_buffer). */
void braid_rt_sgd_update_f32(braid_rt_stream_t *stream, const float *param,
                             const float *grad, const float *momentum_buffer,
                             const float *lr, const float *grad_scale,
                             int64_t count, double momentum, int nesterov,
                             double weight_decay, float *new_param,
                             float *new_momentum_buffer);

/*===----------------------------------------------------------------------===*/
/* Vocabulary-parallel local statistics                                       */
/*===----------------------------------------------------------------------===*/
/* braid.embedding and braid.cross_entropy (and their gradients) with the
   vocabulary split over a group of ranks: this rank holds the `cols` logits
   (or table rows) of vocabulary ids [first, first + cols). These kernels
   compute what one rank contributes, in double; the program runtime
   (program_spmd.h) gathers the contributions of every member and combines
   them in group order with braid_rt_vocab_parallel_combine_f64, so every
   rank gets the same bits. Labels and ids are i32 (`_i64`: i64); one
   outside [first, first + cols) contributes nothing (the caller checks
   them against the whole vocabulary). */

/* max[r] = max over i of logits[r][i] (-inf when cols == 0). */
void braid_rt_vocab_parallel_max_f32(braid_rt_stream_t *stream,
                                     const float *logits, int64_t rows,
                                     int64_t cols, double *max);
/* sum[r] = sum over i (ascending) of exp(logits[r][i] - max[r]). */
void braid_rt_vocab_parallel_sum_exp_f32(braid_rt_stream_t *stream,
                                         const float *logits,
                                         const double *max, int64_t rows,
                                         int64_t cols, double *sum);
/* picked[r] = logits[r][labels[r] - first] when this rank holds the label,
   else 0. */
void braid_rt_vocab_parallel_picked_f32(braid_rt_stream_t *stream,
                                        const float *logits,
                                        const int32_t *labels, int64_t rows,
                                        int64_t cols, int64_t first,
                                        double *picked);
void braid_rt_vocab_parallel_picked_f32_i64(braid_rt_stream_t *stream,
                                            const float *logits,
                                            const int64_t *labels,
                                            int64_t rows, int64_t cols,
                                            int64_t first, double *picked);
/* out[r] = the max (BRAID_RT_REDUCE_MAX) or the sum from 0
   (BRAID_RT_REDUCE_SUM) of parts[k][r] over k = 0, 1, ..., num_parts - 1
   in that order; `parts` is [num_parts][rows]. */
void braid_rt_vocab_parallel_combine_f64(braid_rt_stream_t *stream,
                                         const double *parts,
                                         int64_t num_parts, int64_t rows,
                                         braid_rt_reduce_kind_t kind,
                                         double *out);
/* loss = the mean over rows of max[r] + log(sum[r]) - target[r], from the
   combined statistics, rounded to f32 (0 when rows == 0). */
void braid_rt_vocab_parallel_loss_f32(braid_rt_stream_t *stream,
                                      const double *max, const double *sum,
                                      const double *target, int64_t rows,
                                      float *loss);
/* This rank's columns of braid.cross_entropy_grad: dlogits[r][i] =
   grad / rows * (exp(logits[r][i] - max[r]) / sum[r] - [first + i ==
   labels[r]]), from the combined max and sum; `grad` is rank 0. */
void braid_rt_vocab_parallel_cross_entropy_grad_f32(
    braid_rt_stream_t *stream, const float *logits, const int32_t *labels,
    const float *grad, const double *max, const double *sum, int64_t rows,
    int64_t cols, int64_t first, float *dlogits);
void braid_rt_vocab_parallel_cross_entropy_grad_f32_i64(
    braid_rt_stream_t *stream, const float *logits, const int64_t *labels,
    const float *grad, const double *max, const double *sum, int64_t rows,
    int64_t cols, int64_t first, float *dlogits);
/* This rank's part of braid.embedding: y[p] = table[ids[p] - first] when
   this rank holds the id, else zeros; table is [cols, hidden]. */
void braid_rt_vocab_parallel_embedding_f32(braid_rt_stream_t *stream,
                                           const float *table,
                                           const int32_t *ids, int64_t cols,
                                           int64_t hidden, int64_t num_ids,
                                           int64_t first, float *y);
void braid_rt_vocab_parallel_embedding_f32_i64(
    braid_rt_stream_t *stream, const float *table, const int64_t *ids,
    int64_t cols, int64_t hidden, int64_t num_ids, int64_t first, float *y);
/* This rank's rows of braid.embedding_grad: dtable[j] = the sum in double,
   over p ascending with ids[p] == first + j, of dy[p]; dtable is
   [cols, hidden]. Scratch of cols * hidden doubles (OUT_OF_MEMORY). */
braid_rt_status_t braid_rt_vocab_parallel_embedding_grad_f32(
    braid_rt_stream_t *stream, const int32_t *ids, const float *dy,
    int64_t num_ids, int64_t cols, int64_t hidden, int64_t first,
    float *dtable);
braid_rt_status_t braid_rt_vocab_parallel_embedding_grad_f32_i64(
    braid_rt_stream_t *stream, const int64_t *ids, const float *dy,
    int64_t num_ids, int64_t cols, int64_t hidden, int64_t first,
    float *dtable);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_KERNELS_H */

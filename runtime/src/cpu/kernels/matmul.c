/*===- matmul.c - braid.matmul over OpenBLAS SGEMM and oneDNN ------------===*/
/*
 * With OpenMP, the SGEMMs run on the kernels' OpenMP threads, not on
 * OpenBLAS's: OpenBLAS is set to one thread, a large GEMM is cut into one
 * block of rows (or of columns, when it has more columns than rows) per
 * thread, each an SGEMM of its own, and a batch of GEMMs goes one GEMM at a
 * time to each thread. Two thread pools on the same cores took turns
 * there: after every parallel loop OpenMP's idle threads spin for a while
 * (libomp: 200 ms), and OpenBLAS's own thread then got only part of a core
 * for its half of the next GEMM (docs/runtime.md#compute-kernels).
 *
 * Each element's sum over k is whole within its block, but OpenBLAS picks
 * its kernel, and so the order of that sum, by the block's shape: results
 * can differ in the last bits with the thread count, as they did with
 * OpenBLAS's own threads (docs/runtime.md#compute-kernels; the losses stay
 * within 1e-5 of braid-eval's, test/Integration/kernels-thread-count.mlir).
 *
 * braid_rt_matmul_bf16in_f32, for operands that hold bf16 values, converts
 * them to bf16 (exactly) and runs the same GEMMs through oneDNN's bf16 GEMM
 * (f32 sums; AVX512-BF16 where the CPU has it). oneDNN's OpenMP calls go to
 * the kernels' libomp: Debian builds libdnnl on libgomp, but libomp, which
 * exports the same GOMP_* and omp_* entry points, is a direct dependency
 * of whatever links the kernels and libgomp only oneDNN's, so the dynamic
 * linker finds libomp's first. A GEMM inside the kernels' parallel region
 * then runs on the calling thread, as an SGEMM does, and one outside uses
 * OMP_NUM_THREADS threads of the same pool (runtime/test/matmul_bf16_test.c
 * counts them; with libgomp LD_PRELOADed it sees a second pool).
 *
 * braid_rt_matmul_bias_f32 / _bf16in_f32 (braid.matmul_bias) add the bias
 * to each block of C, and apply tanh GELU, right after the block's GEMM,
 * on the thread that computed it, while the block is still in its cache:
 * the same f32 additions and GELU (elementwise_math.h) as the separate
 * kernels, so the same bits.
 */
#include "internal.h"

#include "braid/rt/elementwise_math.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* oneDNN 2.x exports its bf16 GEMM without declaring it in dnnl.h: C = alpha
   op(A) op(B) + beta C, row-major like dnnl_sgemm, bf16 as uint16_t. */
dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M,
                                    dnnl_dim_t N, dnnl_dim_t K, float alpha,
                                    const uint16_t *A, dnnl_dim_t lda,
                                    const uint16_t *B, dnnl_dim_t ldb,
                                    float beta, float *C, dnnl_dim_t ldc);

/* One GEMM: C[m, n] = op(A) op(B), row-major with leading dimensions; with
   a16 and b16 (the same values in bf16) through oneDNN's bf16 GEMM; then,
   with `bias`, bias[j] added to C[i, j] and tanh GELU when `gelu`. */
typedef struct {
  enum CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  const float *a, *b;
  const uint16_t *a16, *b16;
  float *c;
  const float *bias;
  int gelu;
} gemm_t;

/* The epilogue of rows [i0, i1) and columns [j0, j1) of C. */
static void epilogue(const gemm_t *g, int64_t i0, int64_t i1, int64_t j0,
                     int64_t j1) {
  if (!g->bias)
    return;
  for (int64_t i = i0; i < i1; ++i) {
    float *row = g->c + i * g->ldc;
    if (g->gelu)
      for (int64_t j = j0; j < j1; ++j)
        row[j] = braid_rt_gelu_tanh_of(row[j] + g->bias[j]);
    else
      for (int64_t j = j0; j < j1; ++j)
        row[j] = row[j] + g->bias[j];
  }
}

/* Rows [i0, i1) and columns [j0, j1) of C. */
static void gemm_block(const gemm_t *g, int64_t i0, int64_t i1, int64_t j0,
                       int64_t j1) {
  if (i0 >= i1 || j0 >= j1)
    return;
  if (g->a16) {
    const uint16_t *a = g->a16 + (g->ta == CblasNoTrans ? i0 * g->lda : i0);
    const uint16_t *b = g->b16 + (g->tb == CblasNoTrans ? j0 : j0 * g->ldb);
    /* Cannot fail: braid_rt_matmul_bf16in_f32 probed it once. */
    dnnl_gemm_bf16bf16f32(g->ta == CblasNoTrans ? 'N' : 'T',
                          g->tb == CblasNoTrans ? 'N' : 'T', i1 - i0, j1 - j0,
                          g->k, 1.0f, a, g->lda, b, g->ldb, 0.0f,
                          g->c + i0 * g->ldc + j0, g->ldc);
    epilogue(g, i0, i1, j0, j1);
    return;
  }
  const float *a = g->a + (g->ta == CblasNoTrans ? i0 * g->lda : i0);
  const float *b = g->b + (g->tb == CblasNoTrans ? j0 : j0 * g->ldb);
  cblas_sgemm(CblasRowMajor, g->ta, g->tb, (int)(i1 - i0), (int)(j1 - j0),
              (int)g->k, 1.0f, a, (int)g->lda, b, (int)g->ldb, 0.0f,
              g->c + i0 * g->ldc + j0, (int)g->ldc);
  epilogue(g, i0, i1, j0, j1);
}

#ifdef _OPENMP
/* GEMMs of fewer multiply-adds (m n k) than this run on the calling thread,
   OpenBLAS's own threshold for using its threads (65536 x 4). */
#define BRAID_RT_GEMM_MIN_PARALLEL ((int64_t)1 << 18)
/* Blocks start at multiples of this many rows or columns, a multiple of
   OpenBLAS's register tiles, so that no block ends in a partial tile that
   the whole GEMM would not have. */
#define BRAID_RT_GEMM_UNIT 16

/* OpenBLAS's threads stay idle from the first GEMM on. */
static void openblas_single_threaded(void) {
  static atomic_int done;
  if (!atomic_load_explicit(&done, memory_order_acquire)) {
    openblas_set_num_threads(1);
    atomic_store_explicit(&done, 1, memory_order_release);
  }
}

/* Whether work of `mnk` multiply-adds is worth the threads. */
static int gemm_parallel(int64_t mnk) {
  openblas_single_threaded();
  return mnk >= BRAID_RT_GEMM_MIN_PARALLEL && omp_get_max_threads() > 1 &&
         !omp_in_parallel();
}
#endif

/* The whole GEMM, on the kernels' threads when it is large enough. */
static void gemm(const gemm_t *g) {
#ifdef _OPENMP
  if (gemm_parallel(g->m * g->n * g->k)) {
    /* Each thread packs the operand it does not split whole: split the
       dimension of the larger operand. */
    int rows = g->m >= g->n;
#pragma omp parallel
    {
      int64_t begin, end;
      braid_rt_split_range(rows ? g->m : g->n, omp_get_num_threads(),
                           omp_get_thread_num(), BRAID_RT_GEMM_UNIT, &begin,
                           &end);
      if (rows)
        gemm_block(g, begin, end, 0, g->n);
      else
        gemm_block(g, 0, g->m, begin, end);
    }
    return;
  }
#endif
  gemm_block(g, 0, g->m, 0, g->n);
}

/* braid_rt_matmul_f32, with the operands also in bf16 (a16 and b16) or
   not (NULL). */
static void matmul(const float *a, const float *b, const uint16_t *a16,
                   const uint16_t *b16, int64_t a_rank, const int64_t *a_shape,
                   int64_t b_rank, const int64_t *b_shape, int transpose_a,
                   int transpose_b, const float *bias, int gelu, float *c) {
  int64_t lda = a_shape[a_rank - 1], ldb = b_shape[b_rank - 1];
  int64_t m = transpose_a ? a_shape[a_rank - 1] : a_shape[a_rank - 2];
  int64_t k = transpose_a ? a_shape[a_rank - 2] : a_shape[a_rank - 1];
  int64_t n = transpose_b ? b_shape[b_rank - 2] : b_shape[b_rank - 1];
  int64_t a_size = a_shape[a_rank - 2] * a_shape[a_rank - 1];
  int64_t b_size = b_shape[b_rank - 2] * b_shape[b_rank - 1];
  /* The batch dimensions: shapes without their last two dimensions. */
  int64_t ra = a_rank - 2, rb = b_rank - 2, rank = ra > rb ? ra : rb;
  int64_t batch = 1, a_batch = braid_rt_num_elements(a_shape, ra),
          b_batch = braid_rt_num_elements(b_shape, rb);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t ad = braid_rt_dim_at(a_shape, ra, rank, d);
    batch *= ad == 1 ? braid_rt_dim_at(b_shape, rb, rank, d) : ad;
  }
  if (batch == 0 || m == 0 || n == 0)
    return;
  if (k == 0) {
    memset(c, 0, (size_t)(batch * m * n) * sizeof(float));
    gemm_t zero = {0};
    zero.m = batch * m;
    zero.n = zero.ldc = n;
    zero.c = c;
    zero.bias = bias;
    zero.gelu = gelu;
    epilogue(&zero, 0, zero.m, 0, n);
    return;
  }
  gemm_t g = {transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans,
              m,
              n,
              k,
              lda,
              ldb,
              n,
              a,
              b,
              a16,
              b16,
              c,
              bias,
              gelu};
  /* [..., M, K] x [K, N]: one GEMM with the batch folded into M. */
  if (!transpose_a && b_batch == 1 && a_batch == batch) {
    g.m = batch * m;
    gemm(&g);
    return;
  }
  /* A batch that the threads share evenly (or nearly: at least 4 GEMMs
     each) goes over the threads, each GEMM on one; otherwise each GEMM goes
     over the threads. */
  int per_gemm = 1;
#ifdef _OPENMP
  if (gemm_parallel(batch * m * n * k)) {
    int64_t threads = omp_get_max_threads();
    per_gemm = batch % threads != 0 && batch < 4 * threads;
  }
#endif
#pragma omp parallel for if (!per_gemm) schedule(static)
  for (int64_t p = 0; p < batch; ++p) {
    /* Batch offsets in a and b of result batch p (NumPy broadcasting). */
    int64_t oa = 0, ob = 0, sa = 1, sb = 1, rest = p;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t ad = braid_rt_dim_at(a_shape, ra, rank, d);
      int64_t bd = braid_rt_dim_at(b_shape, rb, rank, d);
      int64_t od = ad == 1 ? bd : ad, idx = rest % od;
      rest /= od;
      if (ad != 1)
        oa += idx * sa;
      if (bd != 1)
        ob += idx * sb;
      sa *= ad;
      sb *= bd;
    }
    gemm_t gp = g;
    gp.a = a + oa * a_size;
    gp.b = b + ob * b_size;
    if (a16) {
      gp.a16 = a16 + oa * a_size;
      gp.b16 = b16 + ob * b_size;
    }
    gp.c = c + p * m * n;
    if (per_gemm)
      gemm(&gp);
    else
      gemm_block(&gp, 0, m, 0, n);
  }
}

void braid_rt_matmul_f32(braid_rt_stream_t *stream, const float *a,
                         const float *b, int64_t a_rank, const int64_t *a_shape,
                         int64_t b_rank, const int64_t *b_shape,
                         int transpose_a, int transpose_b, float *c) {
  (void)stream;
  matmul(a, b, NULL, NULL, a_rank, a_shape, b_rank, b_shape, transpose_a,
         transpose_b, NULL, 0, c);
}

void braid_rt_matmul_bias_f32(braid_rt_stream_t *stream, const float *a,
                              const float *b, const float *bias, int64_t a_rank,
                              const int64_t *a_shape, int64_t b_rank,
                              const int64_t *b_shape, int transpose_a,
                              int transpose_b, int gelu, float *c) {
  (void)stream;
  matmul(a, b, NULL, NULL, a_rank, a_shape, b_rank, b_shape, transpose_a,
         transpose_b, bias, gelu, c);
}

/* Whether oneDNN has a bf16 GEMM for this CPU (it needs AVX512), probed with
   a 1 x 1 x 1 GEMM once: 1 yes, -1 no, 0 not yet known. */
static atomic_int bf16_gemm_state;

static int bf16_gemm_available(void) {
  int state = atomic_load_explicit(&bf16_gemm_state, memory_order_acquire);
  if (state == 0) {
    uint16_t one = 0x3f80; /* 1.0 */
    float c = 0;
    dnnl_status_t st = dnnl_gemm_bf16bf16f32('N', 'N', 1, 1, 1, 1.0f, &one, 1,
                                             &one, 1, 0.0f, &c, 1);
    state = st == dnnl_success && c == 1.0f ? 1 : -1;
    atomic_store_explicit(&bf16_gemm_state, state, memory_order_release);
  }
  return state > 0;
}

/* Per calling thread, the bf16 copies of the last call's operands: grown
   when too small, kept for the next call (no allocation in a training
   step's steady state), freed never (one buffer per thread that calls). */
static _Thread_local uint16_t *bf16_workspace;
static _Thread_local size_t bf16_workspace_count;

/* `count` floats to bf16, to nearest, ties to even (exact for bf16 values;
   NaNs stay NaNs). */
static void to_bf16(const float *x, int64_t count, uint16_t *y) {
  BRAID_RT_PARALLEL_FOR(count)
  for (int64_t i = 0; i < count; ++i) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    y[i] = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                           : (uint16_t)rounded;
  }
}

/* braid_rt_matmul_bf16in_f32, with the epilogue of `bias` (if not NULL). */
static braid_rt_status_t matmul_bf16in(const float *a, const float *b,
                                       int64_t a_rank, const int64_t *a_shape,
                                       int64_t b_rank, const int64_t *b_shape,
                                       int transpose_a, int transpose_b,
                                       const float *bias, int gelu, float *c) {
  int64_t a_count = braid_rt_num_elements(a_shape, a_rank);
  int64_t b_count = braid_rt_num_elements(b_shape, b_rank);
  if (a_count == 0 || b_count == 0 || !bf16_gemm_available()) {
    matmul(a, b, NULL, NULL, a_rank, a_shape, b_rank, b_shape, transpose_a,
           transpose_b, bias, gelu, c);
    return BRAID_RT_OK;
  }
  size_t need = (size_t)(a_count + b_count);
  if (need > bf16_workspace_count) {
    uint16_t *grown = realloc(bf16_workspace, need * sizeof(uint16_t));
    if (!grown)
      return BRAID_RT_OUT_OF_MEMORY;
    bf16_workspace = grown;
    bf16_workspace_count = need;
  }
  uint16_t *a16 = bf16_workspace, *b16 = bf16_workspace + a_count;
  to_bf16(a, a_count, a16);
  to_bf16(b, b_count, b16);
  matmul(a, b, a16, b16, a_rank, a_shape, b_rank, b_shape, transpose_a,
         transpose_b, bias, gelu, c);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_matmul_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b, int64_t a_rank,
    const int64_t *a_shape, int64_t b_rank, const int64_t *b_shape,
    int transpose_a, int transpose_b, float *c) {
  (void)stream;
  return matmul_bf16in(a, b, a_rank, a_shape, b_rank, b_shape, transpose_a,
                       transpose_b, NULL, 0, c);
}

braid_rt_status_t braid_rt_matmul_bias_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b,
    const float *bias, int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
    const int64_t *b_shape, int transpose_a, int transpose_b, int gelu,
    float *c) {
  (void)stream;
  return matmul_bf16in(a, b, a_rank, a_shape, b_rank, b_shape, transpose_a,
                       transpose_b, bias, gelu, c);
}

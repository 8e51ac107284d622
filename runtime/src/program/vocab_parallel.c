/*===- vocab_parallel.c - Vocabulary-parallel embedding and cross-entropy ===*/
/*
 * As BraidOpsEval.cpp: this rank holds ids [position * v, (position + 1) *
 * v) of the group's vocabulary. The vocab_parallel kernels compute this
 * rank's per-row statistics in double; they are gathered from every member
 * and combined in group order, so every rank gets the same bits. Ids and
 * labels are checked against the whole vocabulary first, as braid-eval
 * names a bad one.
 */

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

/* `count` doubles of device scratch, released by the caller. */
static double *scratch_f64(int64_t count, const char *where) {
  void *p = NULL;
  braid_rt_program_check(
      braid_rt_memory_alloc((size_t)(count > 0 ? count : 1) * sizeof(double),
                            &p),
      where);
  return (double *)p;
}

/* Gathers this rank's `rows` statistics from every member of the group into
   `all` ([size][rows]) and combines them into `out`. */
static void gather_combine(int64_t mask, const double *mine, int64_t rows,
                           double *all, braid_rt_reduce_kind_t kind,
                           double *out, const char *where) {
  braid_rt_comm_t *comm = braid_rt_program_comm(mask);
  braid_rt_program_spmd_check(
      braid_rt_all_gather_f64(comm, mine, all, (size_t)rows, NULL), where);
  braid_rt_vocab_parallel_combine_f64(braid_rt_program_stream(), all,
                                      braid_rt_comm_size(comm), rows, kind,
                                      out);
}

/* Per row: the maximum and the sum of exponentials over the whole
   vocabulary (mx, sum: `rows` each; mine and all are scratch of `rows` and
   size * rows). */
static void softmax_stats(const float *logits, int64_t rows, int64_t v,
                          int64_t mask, double *mine, double *all, double *mx,
                          double *sum, const char *where) {
  braid_rt_stream_t *stream = braid_rt_program_stream();
  braid_rt_vocab_parallel_max_f32(stream, logits, rows, v, mine);
  gather_combine(mask, mine, rows, all, BRAID_RT_REDUCE_MAX, mx, where);
  braid_rt_vocab_parallel_sum_exp_f32(stream, logits, mx, rows, v, mine);
  gather_combine(mask, mine, rows, all, BRAID_RT_REDUCE_SUM, sum, where);
}

void braid_rt_program_embedding_vp_f32(const float *table, const void *ids,
                                       int ids_i64, int64_t v, int64_t h,
                                       int64_t n, int64_t mask, float *out,
                                       const char *where) {
  int64_t first = braid_rt_program_group_position(mask) * v;
  int64_t total = v * braid_rt_program_group_size(mask);
  braid_rt_program_check_ids("id", ids, ids_i64, n, total, where);
  braid_rt_stream_t *stream = braid_rt_program_stream();
  if (ids_i64)
    braid_rt_vocab_parallel_embedding_f32_i64(stream, table,
                                              (const int64_t *)ids, v, h, n,
                                              first, out);
  else
    braid_rt_vocab_parallel_embedding_f32(stream, table, (const int32_t *)ids,
                                          v, h, n, first, out);
}

void braid_rt_program_embedding_grad_vp_f32(const void *ids, int ids_i64,
                                            const float *dy, int64_t n,
                                            int64_t v, int64_t h, int64_t mask,
                                            float *out, const char *where) {
  int64_t first = braid_rt_program_group_position(mask) * v;
  int64_t total = v * braid_rt_program_group_size(mask);
  braid_rt_program_check_ids("id", ids, ids_i64, n, total, where);
  braid_rt_stream_t *stream = braid_rt_program_stream();
  braid_rt_program_check(
      ids_i64 ? braid_rt_vocab_parallel_embedding_grad_f32_i64(
                    stream, (const int64_t *)ids, dy, n, v, h, first, out)
              : braid_rt_vocab_parallel_embedding_grad_f32(
                    stream, (const int32_t *)ids, dy, n, v, h, first, out),
      where);
}

void braid_rt_program_cross_entropy_vp_f32(const float *logits,
                                           const void *labels, int labels_i64,
                                           int64_t rows, int64_t v,
                                           int64_t mask, float *out,
                                           const char *where) {
  int64_t size = braid_rt_program_group_size(mask);
  int64_t first = braid_rt_program_group_position(mask) * v, total = v * size;
  braid_rt_program_check_ids("label", labels, labels_i64, rows, total, where);
  braid_rt_stream_t *stream = braid_rt_program_stream();
  /* mx, sum, target, mine: `rows` each; all: size * rows. */
  double *mx = scratch_f64((4 + size) * rows, where);
  double *sum = mx + rows, *target = sum + rows, *mine = target + rows;
  double *all = mine + rows;
  softmax_stats(logits, rows, v, mask, mine, all, mx, sum, where);
  if (labels_i64)
    braid_rt_vocab_parallel_picked_f32_i64(
        stream, logits, (const int64_t *)labels, rows, v, first, mine);
  else
    braid_rt_vocab_parallel_picked_f32(stream, logits, (const int32_t *)labels,
                                       rows, v, first, mine);
  gather_combine(mask, mine, rows, all, BRAID_RT_REDUCE_SUM, target, where);
  braid_rt_vocab_parallel_loss_f32(stream, mx, sum, target, rows, out);
  braid_rt_memory_free(mx);
}

void braid_rt_program_cross_entropy_grad_vp_f32(
    const float *logits, const void *labels, int labels_i64, const float *g,
    int64_t rows, int64_t v, int64_t mask, float *out, const char *where) {
  int64_t size = braid_rt_program_group_size(mask);
  int64_t first = braid_rt_program_group_position(mask) * v, total = v * size;
  braid_rt_program_check_ids("label", labels, labels_i64, rows, total, where);
  braid_rt_stream_t *stream = braid_rt_program_stream();
  double *mx = scratch_f64((3 + size) * rows, where);
  double *sum = mx + rows, *mine = sum + rows, *all = mine + rows;
  softmax_stats(logits, rows, v, mask, mine, all, mx, sum, where);
  if (labels_i64)
    braid_rt_vocab_parallel_cross_entropy_grad_f32_i64(
        stream, logits, (const int64_t *)labels, g, mx, sum, rows, v, first,
        out);
  else
    braid_rt_vocab_parallel_cross_entropy_grad_f32(
        stream, logits, (const int32_t *)labels, g, mx, sum, rows, v, first,
        out);
  braid_rt_memory_free(mx);
}

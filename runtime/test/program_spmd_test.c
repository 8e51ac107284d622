/*===- program_spmd_test.c - The program runtime on a mesh ---------------===*/
/*
 * braid_rt_program_spmd on 2, 3 or 4 ranks, as a generated program uses it:
 * a mesh dp x tp (1 x n, or 2 x 2 on 4 ranks). Checks, against values
 * computed here from the ranks' inputs:
 *  - collectives on views of a tensor split along its middle dimension
 *    (all_gather, reduce_scatter, all_to_all; blocking and started), and
 *    all_slice, element for element;
 *  - blocks of a sharded slot, its initial values, and a checkpoint saved
 *    by every rank and read back whole, then resumed;
 *  - pipeline transfers: receives started before sends, matched by tag,
 *    waited out of order; pp_holds, pp_transfer (point to point),
 *    pp_broadcast, accumulate_mean;
 *  - vocabulary-parallel cross-entropy, its gradient and the embedding
 *    over tp against a serial computation in double (1e-6 relative);
 *  - PowerSGD on a batch of matrices (a stacked gradient): each matrix's
 *    rank-1 sum recovered at rank 1 (1e-5 relative), with the same bits
 *    and state as one call per matrix.
 * With `recv-after-send` every rank breaks the pipeline protocol and must
 * end with its message (ctest checks the status and the output).
 */

#include "braid/rt/program_spmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ",                    \
              braid_rt_program_spmd_rank(), __FILE__, __LINE__, #cond);        \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      fflush(stderr);                                                          \
      braid_rt_program_spmd_end_all(1);                                        \
    }                                                                          \
  } while (0)

enum { DP = 1, TP = 2, WORLD = 3 }; /* group masks */

/* Member `pos` of the tp group in dp row `row`: element i of its input. An
   integer below 2^20, so that sums over a few ranks are exact. */
static float input(int64_t row, int64_t pos, int64_t i) {
  return (float)(row * 100000 + pos * 1000 + i);
}

static void test_collectives(void) {
  int64_t s = braid_rt_program_group_size(TP);
  int64_t pos = braid_rt_program_group_position(TP);
  int64_t row = braid_rt_program_group_position(DP);
  /* A tensor [A][B][C] split along B over tp: blocks of b = B / s. */
  enum { A = 3, b = 2, C = 4 };
  int64_t B = b * s;
  float in[A * 4 * b * C], out[A * 4 * b * C], again[A * 4 * b * C];
  static braid_rt_program_pending_t p1, p2;

  /* all_gather: each member's [A][b][C] block into [A][B][C]. */
  for (int64_t i = 0; i < A * b * C; ++i)
    in[i] = input(row, pos, i);
  braid_rt_program_collective_f32(BRAID_RT_PROGRAM_ALL_GATHER, TP, in,
                                  A * b * C, 1, 0, A, b * C, 0, out, &p1,
                                  "all_gather");
  for (int64_t a = 0; a < A; ++a)
    for (int64_t j = 0; j < B; ++j)
      for (int64_t c = 0; c < C; ++c) {
        float want = input(row, j / b, (a * b + j % b) * C + c);
        CHECK(out[(a * B + j) * C + c] == want,
              "all_gather [%lld][%lld][%lld]: %g, expected %g", (long long)a,
              (long long)j, (long long)c, out[(a * B + j) * C + c], want);
      }

  /* reduce_scatter: the sum of the members' [A][B][C], this member's block
     of B. */
  for (int64_t i = 0; i < A * B * C; ++i)
    in[i] = input(row, pos, i);
  braid_rt_program_collective_f32(BRAID_RT_PROGRAM_REDUCE_SCATTER, TP, in,
                                  A * B * C, A, b * C, 1, 0, 0, out, &p1,
                                  "reduce_scatter");
  for (int64_t a = 0; a < A; ++a)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t c = 0; c < C; ++c) {
        float want = 0.0f;
        for (int64_t m = 0; m < s; ++m)
          want += input(row, m, (a * B + pos * b + j) * C + c);
        CHECK(out[(a * b + j) * C + c] == want,
              "reduce_scatter [%lld][%lld][%lld]: %g, expected %g",
              (long long)a, (long long)j, (long long)c,
              out[(a * b + j) * C + c], want);
      }

  /* all_to_all, started and waited: split B, gather along C: out is
     [A][b][s * C] with out[a][j][m * C + c] = in_m[a][pos * b + j][c]. */
  braid_rt_program_collective_start_f32(BRAID_RT_PROGRAM_ALL_TO_ALL, TP, in,
                                        A * B * C, A, b * C, A * b, C, 0, out,
                                        &p2, "all_to_all");
  braid_rt_program_wait(&p2);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t m = 0; m < s; ++m)
        for (int64_t c = 0; c < C; ++c) {
          float got = out[((a * b + j) * s + m) * C + c];
          float want = input(row, m, (a * B + pos * b + j) * C + c);
          CHECK(got == want, "all_to_all [%lld][%lld][%lld]: %g, expected %g",
                (long long)a, (long long)j, (long long)(m * C + c), got, want);
        }
  /* The blocking form on the same site gives the same bits. */
  braid_rt_program_collective_f32(BRAID_RT_PROGRAM_ALL_TO_ALL, TP, in,
                                  A * B * C, A, b * C, A * b, C, 0, again,
                                  &p2, "all_to_all");
  CHECK(memcmp(out, again, sizeof(float) * A * B * C) == 0,
        "blocking all_to_all differs from started");

  /* all_reduce and broadcast over the whole world. */
  int64_t world = braid_rt_program_group_size(WORLD);
  for (int64_t i = 0; i < 5; ++i)
    in[i] = input(row, pos, i);
  braid_rt_program_collective_f32(BRAID_RT_PROGRAM_ALL_REDUCE, WORLD, in, 5, 1,
                                  0, 1, 0, 0, out, &p1, "all_reduce");
  for (int64_t i = 0; i < 5; ++i) {
    float want = 0.0f;
    for (int64_t r = 0; r < world / s; ++r)
      for (int64_t m = 0; m < s; ++m)
        want += input(r, m, i);
    CHECK(out[i] == want, "all_reduce [%lld]: %g, expected %g", (long long)i,
          out[i], want);
  }
  braid_rt_program_collective_f32(BRAID_RT_PROGRAM_BROADCAST, TP, in, 5, 1, 0,
                                  1, 0, s - 1, out, &p1, "broadcast");
  for (int64_t i = 0; i < 5; ++i)
    CHECK(out[i] == input(row, s - 1, i), "broadcast [%lld]", (long long)i);

  /* all_slice: out[a][j][c] = in[a][pos * b + j][c]. */
  for (int64_t i = 0; i < A * B * C; ++i)
    in[i] = (float)i;
  braid_rt_program_all_slice_f32(TP, in, A, b * C, out);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t i = 0; i < b * C; ++i)
      CHECK(out[a * b * C + i] == (float)((a * s + pos) * b * C + i),
            "all_slice [%lld][%lld]", (long long)a, (long long)i);
}

/* A slot [4][6] split along 0 over dp and along 1 over tp, and a
   replicated one [5]: saved by every rank, read back whole, resumed. */
static void test_checkpoint(void) {
  static const int64_t global[2] = {4, 6}, spec[4] = {1, 0, 1, 1};
  static const int64_t global1[1] = {5}, spec1[1] = {0};
  int64_t ndp = braid_rt_program_group_size(DP);
  int64_t ntp = braid_rt_program_group_size(TP);
  int64_t local[2], offsets[2];
  braid_rt_program_block(2, global, spec, local, offsets);
  CHECK(local[0] == 4 / ndp && local[1] == 6 / ntp &&
            offsets[0] == braid_rt_program_group_position(DP) * local[0] &&
            offsets[1] == braid_rt_program_group_position(TP) * local[1],
        "block [%lld, %lld] at (%lld, %lld)", (long long)local[0],
        (long long)local[1], (long long)offsets[0], (long long)offsets[1]);

  float whole[24], block[24], extracted[24], rep[5];
  braid_rt_program_init_f32(11, "w", BRAID_RT_INIT_NORMAL, 1.0, 0.0, 24,
                            whole);
  braid_rt_program_init_block_f32(11, "w", BRAID_RT_INIT_NORMAL, 1.0, 0.0, 2,
                                  global, spec, block);
  braid_rt_program_extract_block(whole, sizeof(float), 2, global, spec,
                                 extracted);
  int64_t n = local[0] * local[1];
  for (int64_t i = 0; i < n; ++i)
    CHECK(block[i] == extracted[i] &&
              block[i] == whole[(offsets[0] + i / local[1]) * 6 + offsets[1] +
                                i % local[1]],
          "block element %lld", (long long)i);
  CHECK(whole[0] != 0.0f && whole[0] != whole[1], "w is not random");
  braid_rt_program_init_f32(11, "r", BRAID_RT_INIT_UNIFORM, -1.0, 1.0, 5, rep);

  /* One directory for every rank: rank 0's process id. */
  double pid = (double)getpid();
  CHECK(braid_rt_broadcast_f64(braid_rt_program_comm(WORLD), &pid, 1, 0,
                               NULL) == BRAID_RT_OK,
        "broadcast of the pid");
  char dir[256];
  snprintf(dir, sizeof dir, "%s/braid-program-spmd-test-%lld",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long long)pid);
  braid_rt_program_slot_t slots[2] = {{"w", 2, global, spec, -1, NULL},
                                      {"r", 1, global1, spec1, -1, NULL}};
  float *params[2] = {block, rep};
  braid_rt_program_save(dir, 17, 2, slots, params, 0);

  char path[300];
  snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
  braid_rt_checkpoint_reader_t *r = NULL;
  static const int64_t zero[2] = {0, 0};
  float read[24];
  CHECK(braid_rt_checkpoint_open(braid_rt_program_context(), path, &r) == BRAID_RT_OK, "open %s",
        path);
  CHECK(braid_rt_checkpoint_read_block_f32(r, "w", 2, global, zero, global,
                                           read) == BRAID_RT_OK,
        "read w");
  CHECK(memcmp(read, whole, sizeof whole) == 0,
        "the checkpoint's w is not the whole tensor");
  CHECK(braid_rt_checkpoint_read_block_f32(r, "r", 1, global1, zero, global1,
                                           read) == BRAID_RT_OK &&
            memcmp(read, rep, sizeof rep) == 0,
        "the checkpoint's r");
  braid_rt_checkpoint_close(r);

  float back[24] = {0}, rep_back[5] = {0};
  float *into[2] = {back, rep_back};
  CHECK(braid_rt_program_resume(dir, 2, slots, into) == 17, "resumed step");
  CHECK(memcmp(back, block, sizeof(float) * n) == 0 &&
            memcmp(rep_back, rep, sizeof rep) == 0,
        "resumed blocks");
  braid_rt_program_checkpoint_outcome(0); /* every rank has read it */
  if (braid_rt_program_spmd_rank() == 0) {
    unlink(path);
    rmdir(dir);
  }
}

static void test_pipeline(void) {
  int64_t s = braid_rt_program_group_size(TP);
  int64_t stage = braid_rt_program_pp_stage(TP);
  int64_t next = (stage + 1) % s, prev = (stage + s - 1) % s;
  float a[3], b[4], send_a[3], send_b[4];
  for (int i = 0; i < 3; ++i)
    send_a[i] = (float)(stage * 10 + i);
  for (int i = 0; i < 4; ++i)
    send_b[i] = (float)(stage * 10 + 5 + i);
  /* Receives first (tag 1, then tag 2); sends in the other order. */
  braid_rt_program_pp_recv_start_f32(TP, a, 3, prev, 1, "recv a");
  braid_rt_program_pp_recv_start_f32(TP, b, 4, prev, 2, "recv b");
  braid_rt_program_pp_send_f32(TP, send_b, 4, next, 2, "send b");
  braid_rt_program_pp_send_f32(TP, send_a, 3, next, 1, "send a");
  braid_rt_program_pp_recv_wait(1, "wait b");
  for (int i = 0; i < 4; ++i)
    CHECK(b[i] == (float)(prev * 10 + 5 + i), "b[%d] = %g", i, b[i]);
  braid_rt_program_pp_wait_all("wait all");
  for (int i = 0; i < 3; ++i)
    CHECK(a[i] == (float)(prev * 10 + i), "a[%d] = %g", i, a[i]);
  /* A second step starts afresh: receive 0 is its first. */
  braid_rt_program_pp_recv_start_f32(TP, a, 3, prev, 3, "recv a");
  braid_rt_program_pp_send_f32(TP, send_b, 3, next, 3, "send");
  braid_rt_program_pp_recv_wait(0, "wait a");
  braid_rt_program_pp_wait_all("wait all");
  CHECK(a[0] == (float)(prev * 10 + 5), "second step a[0] = %g", a[0]);

  CHECK(braid_rt_program_pp_holds(TP, (int64_t)1 << stage) == 1 &&
            braid_rt_program_pp_holds(TP, ~((int64_t)1 << stage)) == 0,
        "pp_holds");
  float x[2] = {(float)stage, (float)stage + 0.5f};
  braid_rt_program_pp_broadcast_f32(TP, x, 2, s - 1, "broadcast");
  CHECK(x[0] == (float)(s - 1) && x[1] == (float)(s - 1) + 0.5f,
        "pp_broadcast");

  /* pp_transfer: the last stage's values into stage 0's buffer; every
     other stage (and the sender's `dst`) untouched. */
  float src[2] = {(float)stage + 0.25f, (float)stage + 0.75f};
  float dst[2] = {-1.0f, -1.0f};
  braid_rt_program_pp_transfer_f32(TP, src, dst, 2, s - 1, 0, "transfer");
  if (stage == 0)
    CHECK(dst[0] == (float)(s - 1) + 0.25f && dst[1] == (float)(s - 1) + 0.75f,
          "pp_transfer: %g %g", dst[0], dst[1]);
  else
    CHECK(dst[0] == -1.0f && dst[1] == -1.0f, "pp_transfer on stage %lld",
          (long long)stage);

  /* pp_local: the last stage's share is its value, every other stage's
     zeros; summed over the pipeline, the value. */
  float share[2] = {-1.0f, -1.0f};
  braid_rt_program_pp_local_f32(TP, src, share, 2, s - 1);
  if (stage == s - 1)
    CHECK(share[0] == src[0] && share[1] == src[1], "pp_local: %g %g",
          share[0], share[1]);
  else
    CHECK(share[0] == 0.0f && share[1] == 0.0f, "pp_local on stage %lld",
          (long long)stage);

  /* accumulate_mean over 3 micro-batches: the f32 sum times f32(1/3). */
  float sum[2], v[3][2] = {{1.25f, -2.0f}, {0.1f, 3.0f}, {7.0f, 0.3f}};
  for (int k = 0; k < 3; ++k)
    braid_rt_program_accumulate_mean_f32(sum, v[k], 2, k, 3);
  for (int i = 0; i < 2; ++i) {
    float want = v[0][i];
    want += v[1][i];
    want += v[2][i];
    want *= (float)(1.0 / 3.0);
    CHECK(sum[i] == want, "accumulate_mean [%d]: %.9g, expected %.9g", i,
          sum[i], want);
  }
}

static int close_to(double got, double want, double tol) {
  return fabs(got - want) <= tol * fmax(fabs(want), 1e-30);
}

/* Vocabulary-parallel ops over tp against serial double computations. */
static void test_vocab_parallel(int i64) {
  enum { R = 5, v = 7, H = 3 };
  int64_t s = braid_rt_program_group_size(TP);
  int64_t pos = braid_rt_program_group_position(TP);
  int64_t V = v * s, first = pos * v;
  float logits[R * 4 * v], mine[R * v], grad[R * v];
  braid_rt_program_init_f32(5, "logits", BRAID_RT_INIT_NORMAL, 3.0, 0.0,
                            R * V, logits);
  static const int64_t spec[3] = {0, 1, 1};
  int64_t shape[2] = {R, V};
  braid_rt_program_extract_block(logits, sizeof(float), 2, shape, spec, mine);
  int32_t labels32[R];
  int64_t labels64[R];
  for (int r = 0; r < R; ++r)
    labels64[r] = labels32[r] = (int32_t)((r * 5 + 3) % V);
  const void *labels = i64 ? (const void *)labels64 : (const void *)labels32;

  float loss, g = 1.5f;
  braid_rt_program_cross_entropy_vp_f32(mine, labels, i64, R, v, TP, &loss,
                                        "cross_entropy");
  braid_rt_program_cross_entropy_grad_vp_f32(mine, labels, i64, &g, R, v, TP,
                                             grad, "cross_entropy_grad");
  double ref = 0.0;
  for (int r = 0; r < R; ++r) {
    double mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < V; ++i)
      mx = fmax(mx, logits[r * V + i]);
    for (int64_t i = 0; i < V; ++i)
      sum += exp(logits[r * V + i] - mx);
    ref += mx + log(sum) - logits[r * V + labels64[r]];
    for (int64_t i = 0; i < v; ++i) {
      double p = exp(logits[r * V + first + i] - mx) / sum;
      double want = g / R * (p - (first + i == labels64[r] ? 1.0 : 0.0));
      CHECK(close_to(grad[r * v + i], want, 1e-6) ||
                fabs(grad[r * v + i] - want) < 1e-9,
            "cross_entropy_grad [%d][%lld]: %.9g, expected %.9g", r,
            (long long)(first + i), grad[r * v + i], want);
    }
  }
  ref /= R;
  CHECK(close_to(loss, ref, 1e-6), "cross_entropy %.9g, expected %.9g", loss,
        ref);

  /* Embedding: this rank's rows of a [V][H] table; summed over tp, every
     id's row. Its gradient: this rank's rows of the serial sum. */
  float table[4 * v * H], rows[v * H], emb[R * H], dy[R * H], dtable[v * H];
  int64_t tshape[2] = {V, H};
  static const int64_t tspec[3] = {1, 1, 0};
  braid_rt_program_init_f32(6, "table", BRAID_RT_INIT_NORMAL, 1.0, 0.0, V * H,
                            table);
  braid_rt_program_extract_block(table, sizeof(float), 2, tshape, tspec, rows);
  braid_rt_program_embedding_vp_f32(rows, labels, i64, v, H, R, TP, emb,
                                    "embedding");
  static braid_rt_program_pending_t p;
  braid_rt_program_collective_f32(BRAID_RT_PROGRAM_ALL_REDUCE, TP, emb, R * H,
                                  1, 0, 1, 0, 0, emb, &p, "sum");
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h)
      CHECK(emb[r * H + h] == table[labels64[r] * H + h],
            "embedding [%d][%d]", r, h);
  braid_rt_program_init_f32(8, "dy", BRAID_RT_INIT_NORMAL, 1.0, 0.0, R * H, dy);
  braid_rt_program_embedding_grad_vp_f32(labels, i64, dy, R, v, H, TP, dtable,
                                         "embedding_grad");
  for (int64_t j = 0; j < v; ++j)
    for (int h = 0; h < H; ++h) {
      double want = 0.0;
      for (int r = 0; r < R; ++r)
        if (labels64[r] == first + j)
          want += dy[r * H + h];
      CHECK(dtable[j * H + h] == (float)want, "embedding_grad [%lld][%d]",
            (long long)(first + j), h);
    }
}

static void test_powersgd_batch(void) {
  enum { B = 3, R = 6, C = 5, M = R * C };
  int64_t pos = braid_rt_program_group_position(TP);
  int64_t s = braid_rt_program_group_size(TP);
  /* Matrix k of member `pos`: (1 + pos) x_k y_k^T, so the sum is rank 1. */
  float in[B * M], q[B * C], error[B * M], out[B * M];
  float q1[B * C], error1[B * M], out1[B * M];
  double expect[B * M];
  for (int64_t k = 0; k < B; ++k)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        double x = 1.0 + r + 3.0 * k, y = (c % 2 ? -1.0 : 1.0) * (c + 1 + k);
        in[k * M + r * C + c] = (float)((1 + pos) * x * y);
        expect[k * M + r * C + c] = s * (s + 1) / 2.0 * x * y;
      }
  for (int64_t i = 0; i < B * C; ++i)
    q[i] = q1[i] = (float)sin(1.0 + i);
  memset(error, 0, sizeof error);
  memset(error1, 0, sizeof error1);
  static braid_rt_program_pending_t p;
  braid_rt_program_powersgd_f32(TP, in, B, R, C, 1, q, error, out, &p, "b");
  for (int64_t k = 0; k < B; ++k)
    braid_rt_program_powersgd_f32(TP, in + k * M, 1, R, C, 1, q1 + k * C,
                                  error1 + k * M, out1 + k * M, &p, "1");
  for (int64_t k = 0; k < B; ++k) {
    double diff = 0, norm = 0;
    for (int64_t i = k * M; i < (k + 1) * M; ++i) {
      diff += (out[i] - expect[i]) * (out[i] - expect[i]);
      norm += expect[i] * expect[i];
    }
    CHECK(sqrt(diff) <= 1e-5 * sqrt(norm),
          "powersgd batch: matrix %lld off by %g of %g", (long long)k,
          sqrt(diff), sqrt(norm));
  }
  CHECK(memcmp(out, out1, sizeof out) == 0 && memcmp(q, q1, sizeof q) == 0 &&
            memcmp(error, error1, sizeof error) == 0,
        "powersgd batch: not the bits of one call per matrix");
}

/* Progress calls between ops: the policy's table, and the program's
   decision follows it from BRAID_PROGRESS, on also where MPI yields (ctest's
   mpirun sets mpi_yield_when_idle). */
static void test_progress_policy(void) {
  static const struct {
    const char *env;
    int enabled;
  } table[] = {{NULL, 1}, {"0", 0}, {"1", 1}, {"", 1}, {"yes", 1}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
    CHECK(braid_rt_program_progress_policy(table[i].env) == table[i].enabled,
          "progress policy (BRAID_PROGRESS %s): expected %d",
          table[i].env ? table[i].env : "unset", table[i].enabled);
  const char *env = getenv("BRAID_PROGRESS");
  int enabled = braid_rt_program_progress_enabled();
  CHECK(enabled == braid_rt_program_progress_policy(env),
        "progress calls %s with BRAID_PROGRESS %s", enabled ? "on" : "off",
        env ? env : "unset");
  CHECK(env || enabled, "progress calls off without BRAID_PROGRESS");
  CHECK(braid_rt_program_progress_interval(0) == 20e-6 &&
            braid_rt_program_progress_interval(1) == 200e-6,
        "progress interval: %g s, and %g s where a call yields",
        braid_rt_program_progress_interval(0),
        braid_rt_program_progress_interval(1));
  braid_rt_program_progress(); /* nothing in flight either way */
}

int main(int argc, char **argv) {
  int n = 0;
  /* The mesh needs the world size before the context exists. */
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  n = size ? atoi(size) : 1;
  int64_t dims[2] = {n == 4 ? 2 : 1, n == 4 ? 2 : n};
  const char *names[2] = {"dp", "tp"};
  braid_rt_program_spmd_start(&argc, &argv, 2, dims, names);
  if (argc == 2 && strcmp(argv[1], "recv-after-send") == 0) {
    float x = 0.0f;
    int64_t s = braid_rt_program_group_size(TP);
    int64_t stage = braid_rt_program_pp_stage(TP);
    braid_rt_program_pp_send_f32(TP, &x, 1, (stage + 1) % s, 9, "send");
    braid_rt_program_pp_recv_start_f32(TP, &x, 1, (stage + s - 1) % s, 9,
                                       "loc(\"p\":4:2)");
    return 0;
  }
  test_collectives();
  test_checkpoint();
  test_pipeline();
  test_vocab_parallel(0);
  test_vocab_parallel(1);
  test_powersgd_batch();
  test_progress_policy();
  if (braid_rt_program_spmd_rank() == 0)
    printf("program_spmd_test: all checks passed on %d ranks\n", n);
  fflush(stdout);
  braid_rt_program_spmd_finish();
  return 0;
}

/*===- collectives_test.c - Every collective against a local expectation -===*/
/*
 * Runs each collective and point-to-point form, f32 and f64, blocking and
 * non-blocking, over the world and over every axis group of a mesh, with
 * inputs that every rank can recompute for every other rank, and compares
 * the results exactly (the inputs make all sums exact).
 */

#include "test_util.h"

#include "braid/rt/mesh.h"

#include <stdlib.h>

enum { F32, F64 };
enum { BLOCKING, NONBLOCKING };

/* A group of ranks under test: the communicator and the world rank of each
   of its members, by rank in the communicator. */
typedef struct {
  braid_rt_comm_t *comm;
  int members[64];
} group_t;

typedef struct {
  int type, mode;
  uint64_t seed;
} variant_t;

static size_t elem_size(int type) {
  return type == F32 ? sizeof(float) : sizeof(double);
}

static void *alloc_buf(int type, size_t count) {
  void *p = calloc(count ? count : 1, elem_size(type));
  CHECK(p != NULL, "out of memory");
  return p;
}

static double get(const void *buf, int type, size_t i) {
  return type == F32 ? ((const float *)buf)[i] : ((const double *)buf)[i];
}

static void set(void *buf, int type, size_t i, double v) {
  if (type == F32)
    ((float *)buf)[i] = (float)v;
  else
    ((double *)buf)[i] = v;
}

/* Fills buf[0..count) with this rank's input values. They depend on the
   world rank, not the rank in the group, so that a group whose ranks are
   not the documented world ranks in the documented order fails the
   comparisons. */
static void fill(void *buf, int type, const variant_t *v, size_t count) {
  int rank = braid_rt_context_rank(test_ctx);
  for (size_t i = 0; i < count; ++i)
    set(buf, type, i, test_value(v->seed, rank, i));
}

static void expect_equal(const void *buf, int type, size_t i, double expected,
                         const char *op, const group_t *g) {
  double got = get(buf, type, i);
  CHECK(got == expected, "%s over %s (%s): element %zu is %g, expected %g", op,
        braid_rt_comm_name(g->comm), type == F32 ? "f32" : "f64", i, got,
        expected);
}

/* Runs the blocking call, or starts and then waits for the non-blocking
   one, polling braid_rt_request_test first so that it gets exercised. */
static void run(int mode, braid_rt_status_t blocking_status,
                braid_rt_status_t start_status, braid_rt_request_t *req) {
  if (mode == BLOCKING) {
    CHECK_OK(blocking_status);
    return;
  }
  CHECK_OK(start_status);
  int done = 0;
  CHECK_OK(braid_rt_request_test(req, &done));
  CHECK(done == 0 || done == 1, "done is %d", done);
  CHECK_OK(braid_rt_request_wait(req));
}

/* Dispatches `op_f32`/`op_f64` in the variant's form. */
#define CALL(v, op, ...)                                                       \
  do {                                                                         \
    braid_rt_request_t *req_ = NULL;                                           \
    if ((v)->mode == BLOCKING)                                                 \
      run(BLOCKING,                                                            \
          (v)->type == F32 ? braid_rt_##op##_f32(__VA_ARGS__, NULL)            \
                           : braid_rt_##op##_f64(__VA_ARGS__, NULL),           \
          BRAID_RT_OK, NULL);                                                  \
    else                                                                       \
      run(NONBLOCKING, BRAID_RT_OK,                                            \
          (v)->type == F32                                                     \
              ? braid_rt_##op##_f32_start(__VA_ARGS__, NULL, &req_)            \
              : braid_rt_##op##_f64_start(__VA_ARGS__, NULL, &req_),           \
          req_);                                                               \
  } while (0)

static void test_all_reduce(const group_t *g, const variant_t *v,
                            size_t count) {
  int n = braid_rt_comm_size(g->comm);
  void *buf = alloc_buf(v->type, count);
  fill(buf, v->type, v, count);
  CALL(v, all_reduce_sum, g->comm, buf, count);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int j = 0; j < n; ++j)
      sum += test_value(v->seed, g->members[j], i);
    expect_equal(buf, v->type, i, sum, "all_reduce", g);
  }
  free(buf);
}

static void test_all_gather(const group_t *g, const variant_t *v,
                            size_t count) {
  int n = braid_rt_comm_size(g->comm);
  void *send = alloc_buf(v->type, count);
  void *recv = alloc_buf(v->type, (size_t)n * count);
  fill(send, v->type, v, count);
  CALL(v, all_gather, g->comm, send, recv, count);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i)
      expect_equal(recv, v->type, (size_t)j * count + i,
                   test_value(v->seed, g->members[j], i), "all_gather", g);
  free(send);
  free(recv);
}

static void test_reduce_scatter(const group_t *g, const variant_t *v,
                                size_t count) {
  int n = braid_rt_comm_size(g->comm), me = braid_rt_comm_rank(g->comm);
  void *send = alloc_buf(v->type, (size_t)n * count);
  void *recv = alloc_buf(v->type, count);
  fill(send, v->type, v, (size_t)n * count);
  CALL(v, reduce_scatter_sum, g->comm, send, recv, count);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int j = 0; j < n; ++j)
      sum += test_value(v->seed, g->members[j], (size_t)me * count + i);
    expect_equal(recv, v->type, i, sum, "reduce_scatter", g);
  }
  free(send);
  free(recv);
}

static void test_broadcast(const group_t *g, const variant_t *v, size_t count,
                           int root) {
  void *buf = alloc_buf(v->type, count);
  fill(buf, v->type, v, count);
  CALL(v, broadcast, g->comm, buf, count, root);
  for (size_t i = 0; i < count; ++i)
    expect_equal(buf, v->type, i, test_value(v->seed, g->members[root], i),
                 "broadcast", g);
  free(buf);
}

static void test_all_to_all(const group_t *g, const variant_t *v,
                            size_t count) {
  int n = braid_rt_comm_size(g->comm), me = braid_rt_comm_rank(g->comm);
  void *send = alloc_buf(v->type, (size_t)n * count);
  void *recv = alloc_buf(v->type, (size_t)n * count);
  fill(send, v->type, v, (size_t)n * count);
  CALL(v, all_to_all, g->comm, send, recv, count);
  /* Block j came from member j, which sent us its block `me`. */
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i)
      expect_equal(recv, v->type, (size_t)j * count + i,
                   test_value(v->seed, g->members[j], (size_t)me * count + i),
                   "all_to_all", g);
  free(send);
  free(recv);
}

/* Non-blocking: a ring, every rank sending to the next and receiving from
   the previous at once. Blocking: member 0 exchanges with each other member
   in turn, which cannot deadlock. */
static void test_send_recv(const group_t *g, const variant_t *v,
                           size_t count) {
  int n = braid_rt_comm_size(g->comm), me = braid_rt_comm_rank(g->comm);
  void *send = alloc_buf(v->type, count);
  void *recv = alloc_buf(v->type, count);
  fill(send, v->type, v, count);
  if (v->mode == NONBLOCKING) {
    int next = (me + 1) % n, prev = (me + n - 1) % n, tag = 11;
    braid_rt_request_t *r = NULL, *s = NULL;
    if (v->type == F32) {
      CHECK_OK(braid_rt_recv_f32_start(g->comm, recv, count, prev, tag, NULL,
                                       &r));
      CHECK_OK(braid_rt_send_f32_start(g->comm, send, count, next, tag, NULL,
                                       &s));
    } else {
      CHECK_OK(braid_rt_recv_f64_start(g->comm, recv, count, prev, tag, NULL,
                                       &r));
      CHECK_OK(braid_rt_send_f64_start(g->comm, send, count, next, tag, NULL,
                                       &s));
    }
    CHECK_OK(braid_rt_request_wait(s));
    CHECK_OK(braid_rt_request_wait(r));
    for (size_t i = 0; i < count; ++i)
      expect_equal(recv, v->type, i, test_value(v->seed, g->members[prev], i),
                   "send/recv ring", g);
  } else if (me == 0) {
    for (int peer = 1; peer < n; ++peer) {
      if (v->type == F32) {
        CHECK_OK(braid_rt_send_f32(g->comm, send, count, peer, peer, NULL));
        CHECK_OK(braid_rt_recv_f32(g->comm, recv, count, peer, peer, NULL));
      } else {
        CHECK_OK(braid_rt_send_f64(g->comm, send, count, peer, peer, NULL));
        CHECK_OK(braid_rt_recv_f64(g->comm, recv, count, peer, peer, NULL));
      }
      for (size_t i = 0; i < count; ++i)
        expect_equal(recv, v->type, i, test_value(v->seed, g->members[peer], i),
                     "send/recv from member", g);
    }
  } else {
    if (v->type == F32) {
      CHECK_OK(braid_rt_recv_f32(g->comm, recv, count, 0, me, NULL));
      CHECK_OK(braid_rt_send_f32(g->comm, send, count, 0, me, NULL));
    } else {
      CHECK_OK(braid_rt_recv_f64(g->comm, recv, count, 0, me, NULL));
      CHECK_OK(braid_rt_send_f64(g->comm, send, count, 0, me, NULL));
    }
    for (size_t i = 0; i < count; ++i)
      expect_equal(recv, v->type, i, test_value(v->seed, g->members[0], i),
                   "send/recv to member 0", g);
  }
  free(send);
  free(recv);
}

/* Two all_reduces in flight at once, waited for in the opposite order. */
static void test_overlapping_requests(const group_t *g, uint64_t seed) {
  int n = braid_rt_comm_size(g->comm);
  enum { COUNT = 4099 };
  static float a[COUNT];
  static double b[COUNT];
  variant_t va = {F32, NONBLOCKING, seed}, vb = {F64, NONBLOCKING, seed + 1};
  fill(a, F32, &va, COUNT);
  fill(b, F64, &vb, COUNT);
  braid_rt_request_t *ra = NULL, *rb = NULL;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(g->comm, a, COUNT, NULL, &ra));
  CHECK_OK(braid_rt_all_reduce_sum_f64_start(g->comm, b, COUNT, NULL, &rb));
  CHECK_OK(braid_rt_request_wait(rb));
  CHECK_OK(braid_rt_request_wait(ra));
  for (size_t i = 0; i < COUNT; ++i) {
    double sa = 0, sb = 0;
    for (int j = 0; j < n; ++j) {
      sa += test_value(va.seed, g->members[j], i);
      sb += test_value(vb.seed, g->members[j], i);
    }
    expect_equal(a, F32, i, sa, "overlapping all_reduce", g);
    expect_equal(b, F64, i, sb, "overlapping all_reduce", g);
  }
}

static void test_group(const group_t *g, uint64_t seed) {
  int me = braid_rt_comm_rank(g->comm);
  CHECK(g->members[me] == braid_rt_context_rank(test_ctx),
        "rank %d of %s should be world rank %d", me,
        braid_rt_comm_name(g->comm), g->members[me]);
  /* 0 checks empty operations; 1000 and 70001 cross OpenMPI's eager and
     pipelined protocol thresholds. */
  static const size_t counts[] = {0, 1, 1000, 70001};
  int n = braid_rt_comm_size(g->comm);
  for (int type = F32; type <= F64; ++type) {
    for (int mode = BLOCKING; mode <= NONBLOCKING; ++mode) {
      for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
        variant_t v = {type, mode, seed + 100 * c + 10 * type + mode};
        test_all_reduce(g, &v, counts[c]);
        test_all_gather(g, &v, counts[c]);
        test_reduce_scatter(g, &v, counts[c]);
        test_broadcast(g, &v, counts[c], 0);
        test_broadcast(g, &v, counts[c], n - 1);
        test_all_to_all(g, &v, counts[c]);
        test_send_recv(g, &v, counts[c]);
      }
    }
  }
  test_overlapping_requests(g, seed);
  CHECK_OK(braid_rt_barrier(g->comm, NULL));
}

/* The world ranks of the members of the group over `mask` containing this
   rank, in the runtime's documented order: row-major over the group's axes
   with the other coordinates fixed to ours. */
static void mesh_members(const braid_rt_mesh_t *mesh, unsigned mask,
                         int *members) {
  int ndims = braid_rt_mesh_ndims(mesh);
  int64_t group_size = 1;
  for (int a = 0; a < ndims; ++a)
    if (mask & (1u << a))
      group_size *= braid_rt_mesh_dim(mesh, a);
  for (int64_t j = 0; j < group_size; ++j) {
    int64_t coords[BRAID_RT_MESH_MAX_DIMS], rest = j;
    for (int a = ndims - 1; a >= 0; --a) {
      coords[a] = braid_rt_mesh_coord(mesh, a);
      if (mask & (1u << a)) {
        coords[a] = rest % braid_rt_mesh_dim(mesh, a);
        rest /= braid_rt_mesh_dim(mesh, a);
      }
    }
    int64_t rank = 0;
    for (int a = 0; a < ndims; ++a)
      rank = rank * braid_rt_mesh_dim(mesh, a) + coords[a];
    members[j] = (int)rank;
  }
}

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  int size = braid_rt_context_size(test_ctx);
  CHECK(size <= 64, "at most 64 ranks, got %d", size);

  group_t world = {braid_rt_context_world(test_ctx), {0}};
  for (int r = 0; r < size; ++r)
    world.members[r] = r;
  test_group(&world, 1);

  /* A mesh of two axes where the world size allows: 8 = 2 x 4, 4 = 2 x 2. */
  if (size % 2 == 0 && size >= 4) {
    int64_t dims[2] = {2, size / 2};
    const char *names[2] = {"dp", "tp"};
    braid_rt_mesh_t *mesh = NULL;
    CHECK_OK(braid_rt_mesh_create(test_ctx, 2, dims, names, &mesh));
    for (unsigned mask = 1; mask < 4; ++mask) {
      int axes[2], naxes = 0;
      for (int a = 0; a < 2; ++a)
        if (mask & (1u << a))
          axes[naxes++] = a;
      group_t g;
      CHECK_OK(braid_rt_mesh_comm(mesh, naxes, axes, &g.comm));
      mesh_members(mesh, mask, g.members);
      test_group(&g, 1000 + mask);
    }
    CHECK_OK(braid_rt_mesh_destroy(mesh));
  }

  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}

/*===- mesh_test.c - Mesh coordinates, axis groups and mesh errors -------===*/
/*
 * On 8 ranks: the mesh dp x tp x pp = 2 x 2 x 2; on other counts a mesh of
 * three axes with some of size 1. For every group of axes, checks the
 * communicator's size, this rank's rank in it, and (by an all_gather of
 * world ranks) its members and their order against a list computed here by
 * brute force over all world ranks.
 */

#include "test_util.h"

#include "braid/rt/mesh.h"

#include <stdlib.h>

static void check_coords(const braid_rt_mesh_t *mesh, int size) {
  int64_t d = braid_rt_mesh_dim(mesh, 0), t = braid_rt_mesh_dim(mesh, 1),
          p = braid_rt_mesh_dim(mesh, 2);
  CHECK(d * t * p == size, "dims %lld x %lld x %lld", (long long)d,
        (long long)t, (long long)p);
  for (int r = 0; r < size; ++r) {
    int64_t c[3];
    CHECK_OK(braid_rt_mesh_coords_of(mesh, r, c));
    CHECK((c[0] * t + c[1]) * p + c[2] == r && c[0] < d && c[1] < t &&
              c[2] < p,
          "rank %d has coordinates (%lld, %lld, %lld)", r, (long long)c[0],
          (long long)c[1], (long long)c[2]);
  }
  int64_t mine[3];
  CHECK_OK(braid_rt_mesh_coords_of(mesh, braid_rt_context_rank(test_ctx), mine));
  for (int a = 0; a < 3; ++a)
    CHECK(braid_rt_mesh_coord(mesh, a) == mine[a], "coordinate %d", a);
}

static void check_group(braid_rt_mesh_t *mesh, unsigned mask) {
  int axes[3], naxes = 0;
  char label[64] = "";
  for (int a = 0; a < 3; ++a) {
    if (mask & (1u << a)) {
      axes[naxes++] = a;
      strcat(label, naxes > 1 ? "," : "");
      strcat(label, braid_rt_mesh_axis_name(mesh, a));
    }
  }
  braid_rt_comm_t *comm = NULL, *again = NULL;
  CHECK_OK(braid_rt_mesh_comm(mesh, naxes, axes, &comm));
  CHECK_OK(braid_rt_mesh_comm(mesh, naxes, axes, &again));
  CHECK(comm == again, "the communicator over {%s} is not cached", label);
  char name[80];
  snprintf(name, sizeof(name), "mesh axes {%s}", label);
  CHECK(strcmp(braid_rt_comm_name(comm), name) == 0, "name '%s', expected '%s'",
        braid_rt_comm_name(comm), name);

  /* The members: world ranks that agree with this one outside the group.
     Row-major order over the group's axes is ascending world rank order. */
  int world = braid_rt_context_size(test_ctx);
  int me = braid_rt_context_rank(test_ctx);
  int64_t my_coords[3], coords[3];
  CHECK_OK(braid_rt_mesh_coords_of(mesh, me, my_coords));
  int members[64], n = 0, my_index = -1;
  for (int r = 0; r < world; ++r) {
    CHECK_OK(braid_rt_mesh_coords_of(mesh, r, coords));
    int same = 1;
    for (int a = 0; a < 3; ++a)
      if (!(mask & (1u << a)) && coords[a] != my_coords[a])
        same = 0;
    if (same) {
      if (r == me)
        my_index = n;
      members[n++] = r;
    }
  }
  CHECK(braid_rt_comm_size(comm) == n, "{%s}: size %d, expected %d", label,
        braid_rt_comm_size(comm), n);
  CHECK(braid_rt_comm_rank(comm) == my_index, "{%s}: rank %d, expected %d",
        label, braid_rt_comm_rank(comm), my_index);

  double self = me, gathered[64];
  CHECK_OK(braid_rt_all_gather_f64(comm, &self, gathered, 1, NULL));
  for (int j = 0; j < n; ++j)
    CHECK(gathered[j] == members[j], "{%s}: member %d is world rank %g, "
          "expected %d", label, j, gathered[j], members[j]);
}

static void check_errors(int size) {
  braid_rt_mesh_t *mesh = (braid_rt_mesh_t *)&mesh; /* must be reset */
  int64_t too_many[1] = {size + 1};
  const char *one_name[1] = {"dp"};
  char expected[160];
  snprintf(expected, sizeof(expected),
           "mesh {%d} has %d devices but the world has %d ranks", size + 1,
           size + 1, size);
  CHECK_FAILS(test_ctx,
              braid_rt_mesh_create(test_ctx, 1, too_many, one_name, &mesh),
              BRAID_RT_INVALID_ARGUMENT, expected);
  CHECK(mesh == NULL, "out_mesh not reset on failure");

  int64_t dims2[2] = {size, 1};
  const char *same_names[2] = {"dp", "dp"};
  CHECK_FAILS(test_ctx,
              braid_rt_mesh_create(test_ctx, 2, dims2, same_names, &mesh),
              BRAID_RT_INVALID_ARGUMENT, "axes 0 and 1 are both called 'dp'");
  int64_t zero[2] = {0, size};
  const char *names[2] = {"dp", "tp"};
  CHECK_FAILS(test_ctx, braid_rt_mesh_create(test_ctx, 2, zero, names, &mesh),
              BRAID_RT_INVALID_ARGUMENT, "axis 0 has size 0");
  CHECK_FAILS(test_ctx, braid_rt_mesh_create(test_ctx, 0, zero, names, &mesh),
              BRAID_RT_INVALID_ARGUMENT, "a mesh needs 1 to 8 axes");

  CHECK_OK(braid_rt_mesh_create(test_ctx, 2, dims2, names, &mesh));
  braid_rt_comm_t *comm = NULL;
  int reversed[2] = {1, 0}, outside[1] = {2};
  CHECK_FAILS(test_ctx, braid_rt_mesh_comm(mesh, 2, reversed, &comm),
              BRAID_RT_INVALID_ARGUMENT, "axes must be strictly increasing");
  CHECK_FAILS(test_ctx, braid_rt_mesh_comm(mesh, 1, outside, &comm),
              BRAID_RT_INVALID_ARGUMENT, "axis 2 is not in 0..1");
  CHECK_FAILS(test_ctx, braid_rt_mesh_comm(mesh, 3, reversed, &comm),
              BRAID_RT_INVALID_ARGUMENT, "3 axes requested of a mesh with 2");
  int axis = -1;
  CHECK_FAILS(test_ctx, braid_rt_mesh_axis_index(mesh, "pp", &axis),
              BRAID_RT_INVALID_ARGUMENT, "the mesh has no axis 'pp'");
  CHECK_OK(braid_rt_mesh_axis_index(mesh, "tp", &axis));
  CHECK(axis == 1, "axis_index(tp) = %d", axis);
  int64_t coords[2];
  CHECK_FAILS(test_ctx, braid_rt_mesh_coords_of(mesh, size, coords),
              BRAID_RT_INVALID_ARGUMENT, "is not in 0..");

  /* A context outliving its meshes would free communicators under them. */
  CHECK_FAILS(test_ctx, braid_rt_context_destroy(test_ctx),
              BRAID_RT_INVALID_ARGUMENT, "1 mesh(es) still alive");
  CHECK_OK(braid_rt_mesh_destroy(mesh));
}

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  int size = braid_rt_context_size(test_ctx);
  CHECK(size <= 64, "at most 64 ranks, got %d", size);
  int64_t dims[3] = {size, 1, 1};
  if (size == 8) {
    dims[0] = dims[1] = dims[2] = 2;
  } else if (size % 2 == 0) {
    dims[0] = 2;
    dims[2] = size / 2;
  }
  const char *names[3] = {"dp", "tp", "pp"};
  braid_rt_mesh_t *mesh = NULL;
  CHECK_OK(braid_rt_mesh_create(test_ctx, 3, dims, names, &mesh));
  check_coords(mesh, size);
  for (unsigned mask = 0; mask < 8; ++mask)
    check_group(mesh, mask);
  CHECK_OK(braid_rt_mesh_destroy(mesh));

  check_errors(size);
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}

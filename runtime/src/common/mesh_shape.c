/*===- mesh_shape.c - Mesh shape checks shared by the backends ----------===*/

#include "mesh_shape.h"

#include <stdio.h>
#include <string.h>

/* Writes `values` as "{3,2}". */
static void format_dims(char *out, size_t capacity, int n,
                        const int64_t *values) {
  size_t used = (size_t)snprintf(out, capacity, "{");
  for (int i = 0; i < n && used < capacity; ++i)
    used += (size_t)snprintf(out + used, capacity - used, "%s%lld",
                             i ? "," : "", (long long)values[i]);
  if (used < capacity)
    snprintf(out + used, capacity - used, "}");
}

braid_rt_status_t braid_rt_mesh_check_shape(int ndims, const int64_t *dims,
                                            const char *const *names,
                                            int world_size, char *error,
                                            size_t error_size) {
  if (ndims < 1 || ndims > BRAID_RT_MESH_MAX_DIMS || !dims || !names) {
    snprintf(error, error_size,
             "a mesh needs 1 to %d axes with sizes and names; got %d",
             BRAID_RT_MESH_MAX_DIMS, ndims);
    return BRAID_RT_INVALID_ARGUMENT;
  }
  int64_t product = 1;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] < 1 || dims[i] > INT64_MAX / product) {
      snprintf(error, error_size,
               "axis %d has size %lld; sizes must be at least 1 and their "
               "product must fit in 64 bits",
               i, (long long)dims[i]);
      return BRAID_RT_INVALID_ARGUMENT;
    }
    if (!names[i] || !names[i][0] ||
        strlen(names[i]) >= BRAID_RT_MESH_NAME_CAPACITY) {
      snprintf(error, error_size,
               "axis %d needs a name of 1 to %d characters", i,
               BRAID_RT_MESH_NAME_CAPACITY - 1);
      return BRAID_RT_INVALID_ARGUMENT;
    }
    for (int j = 0; j < i; ++j)
      if (strcmp(names[i], names[j]) == 0) {
        snprintf(error, error_size, "axes %d and %d are both called '%s'", j,
                 i, names[i]);
        return BRAID_RT_INVALID_ARGUMENT;
      }
    product *= dims[i];
  }
  if (product != world_size) {
    char shape[128];
    format_dims(shape, sizeof(shape), ndims, dims);
    snprintf(error, error_size,
             "mesh %s has %lld devices but the world has %d ranks; the "
             "product of the mesh sizes must equal the number of ranks",
             shape, (long long)product, world_size);
    return BRAID_RT_INVALID_ARGUMENT;
  }
  return BRAID_RT_OK;
}

void braid_rt_mesh_rank_coords(int ndims, const int64_t *dims, int64_t rank,
                               int64_t *out_coords) {
  for (int i = ndims - 1; i >= 0; --i) {
    out_coords[i] = rank % dims[i];
    rank /= dims[i];
  }
}

void braid_rt_mesh_split_key(int ndims, const int64_t *dims,
                             const int64_t *coords, unsigned mask,
                             int *out_color, int *out_key) {
  int64_t color = 0, key = 0;
  for (int i = 0; i < ndims; ++i) {
    if (mask & (1u << i))
      key = key * dims[i] + coords[i];
    else
      color = color * dims[i] + coords[i];
  }
  /* Both are below the world size, an int. */
  *out_color = (int)color;
  *out_key = (int)key;
}

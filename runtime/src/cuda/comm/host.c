/*===- host.c - Host-side logic of the CUDA backend's communication ------===*/

#include "host.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads the first of `variables` that is set as an integer in min..INT_MAX;
   `what` names it in the message. *out_value stays as it is when none is
   set. */
static braid_rt_status_t first_integer(braid_rt_cuda_getenv_fn getenv_fn,
                                       const char *const *variables,
                                       size_t count, const char *what, long min,
                                       int *out_value, const char **out_source,
                                       char *error, size_t capacity) {
  *out_source = NULL;
  for (size_t i = 0; i < count; ++i) {
    const char *value = getenv_fn(variables[i]);
    if (!value)
      continue;
    char *end = NULL;
    errno = 0;
    long parsed = strtol(value, &end, 10);
    /* Digits only: strtol alone would take " 3", "+3" and "3x". */
    int digits = value[0] >= '0' && value[0] <= '9';
    if (!digits || *end != '\0' || errno != 0 || parsed < min ||
        parsed > INT_MAX) {
      snprintf(error, capacity, "the %s %s='%s' is not an integer in %ld..%d",
               what, variables[i], value, min, INT_MAX);
      return BRAID_RT_INVALID_ARGUMENT;
    }
    *out_value = (int)parsed;
    *out_source = variables[i];
    return BRAID_RT_OK;
  }
  return BRAID_RT_OK;
}

braid_rt_status_t
braid_rt_cuda_local_rank_from_env(braid_rt_cuda_getenv_fn getenv_fn,
                                  int *out_local_rank, const char **out_source,
                                  char *error, size_t capacity) {
  static const char *const variables[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                                          "MPI_LOCALRANKID", "LOCAL_RANK",
                                          "SLURM_LOCALID"};
  *out_local_rank = -1;
  braid_rt_status_t status = first_integer(
      getenv_fn, variables, sizeof(variables) / sizeof(variables[0]),
      "local rank", 0, out_local_rank, out_source, error, capacity);
  if (status != BRAID_RT_OK)
    *out_local_rank = -1;
  return status;
}

braid_rt_status_t
braid_rt_cuda_world_size_from_env(braid_rt_cuda_getenv_fn getenv_fn,
                                  int *out_size, const char **out_source,
                                  char *error, size_t capacity) {
  static const char *const variables[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                          "PMI_SIZE", "SLURM_NTASKS"};
  *out_size = 1;
  braid_rt_status_t status = first_integer(
      getenv_fn, variables, sizeof(variables) / sizeof(variables[0]),
      "world size", 1, out_size, out_source, error, capacity);
  if (status != BRAID_RT_OK)
    *out_size = 1;
  return status;
}

/* One device named in CUDA_VISIBLE_DEVICES: a non-empty list without a
   comma. */
static int names_one_device(const char *visible_devices) {
  return visible_devices && visible_devices[0] && !strchr(visible_devices, ',');
}

braid_rt_status_t
braid_rt_cuda_choose_device(int world_rank, int local_rank, int local_size,
                            const char *source, int device_count,
                            const char *cuda_error, const char *visible_devices,
                            int *out_device, char *error, size_t capacity) {
  char who[160];
  snprintf(who, sizeof(who), "rank %d (local rank %d of %d on this node%s%s)",
           world_rank, local_rank, local_size, source ? ", from " : "",
           source ? source : "");
  char visible[96] = "";
  if (visible_devices)
    snprintf(visible, sizeof(visible), " with CUDA_VISIBLE_DEVICES='%.60s'",
             visible_devices);
  *out_device = -1;
  if (device_count <= 0) {
    snprintf(error, capacity, "%s finds no CUDA device%s%s%s", who, visible,
             cuda_error ? ": " : "", cuda_error ? cuda_error : "");
    return BRAID_RT_INVALID_ARGUMENT;
  }
  if (local_rank < device_count) {
    *out_device = local_rank;
    return BRAID_RT_OK;
  }
  if (device_count == 1 && names_one_device(visible_devices)) {
    *out_device = 0;
    return BRAID_RT_OK;
  }
  snprintf(error, capacity,
           "%s needs device %d but this node shows %d CUDA device%s%s: run "
           "at most one rank per GPU on each node",
           who, local_rank, device_count, device_count == 1 ? "" : "s",
           visible);
  return BRAID_RT_INVALID_ARGUMENT;
}

int braid_rt_cuda_timed_out(double start_s, double now_s, double timeout_s) {
  return timeout_s > 0 && now_s - start_s > timeout_s;
}

size_t braid_rt_cuda_p2p_select(const braid_rt_cuda_p2p_entry_t *pending,
                                size_t n, ptrdiff_t target,
                                unsigned char *out_selected) {
  const braid_rt_cuda_p2p_entry_t *wanted =
      target >= 0 && (size_t)target < n ? &pending[target] : NULL;
  /* Transfers to oneself: how many of each kind to issue, as pairs. */
  size_t self_pairs = 0;
  if (wanted && wanted->self)
    for (size_t i = 0; i <= (size_t)target; ++i)
      self_pairs += pending[i].self && pending[i].comm == wanted->comm &&
                    pending[i].is_send == wanted->is_send;
  size_t selected = 0, self_sends = 0, self_recvs = 0;
  for (size_t i = 0; i < n; ++i) {
    const braid_rt_cuda_p2p_entry_t *e = &pending[i];
    int take;
    if (e->self) {
      size_t *seen = e->is_send ? &self_sends : &self_recvs;
      take = wanted && wanted->self && e->comm == wanted->comm &&
             *seen < self_pairs;
      *seen += (size_t)(e->comm == (wanted ? wanted->comm : NULL));
    } else {
      take = e->is_send || (wanted && !wanted->self && !wanted->is_send &&
                            i == (size_t)target);
    }
    out_selected[i] = (unsigned char)take;
    selected += (size_t)take;
  }
  return selected;
}

size_t braid_rt_cuda_ring_chunk_begin(size_t count, int size, int c) {
  size_t n = (size_t)size, rest = count % n;
  return count / n * (size_t)c + ((size_t)c < rest ? (size_t)c : rest);
}

size_t braid_rt_cuda_ring_chunk_length(size_t count, int size, int c) {
  return braid_rt_cuda_ring_chunk_begin(count, size, c + 1) -
         braid_rt_cuda_ring_chunk_begin(count, size, c);
}

static int wrap(int r, int size) { return ((r % size) + size) % size; }

void braid_rt_cuda_ring_step(int size, int rank, int step, int gather,
                             int *out_send_chunk, int *out_recv_chunk) {
  /* The all_gather half runs one chunk behind: rank r starts by sending the
     chunk it owns. */
  int lag = gather ? 0 : 1;
  *out_send_chunk = wrap(rank - step - lag, size);
  *out_recv_chunk = wrap(rank - step - lag - 1, size);
}

size_t braid_rt_cuda_ring_staging_words(size_t count, int size) {
  size_t most = braid_rt_cuda_ring_chunk_length(count, size, 0);
  return 2 * (most ? most : 1);
}

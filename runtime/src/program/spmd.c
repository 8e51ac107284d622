/*===- spmd.c - The context, mesh and communicators of an SPMD program ---===*/

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

braid_rt_program_spmd_t braid_rt_program_spmd;
int braid_rt_program_spmd_trace;
double braid_rt_program_spmd_timeout = -1;

void braid_rt_program_spmd_fail(braid_rt_status_t status, const char *where) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  fprintf(stderr, "error: rank %d: %s: %s: %s\n", s->rank, where,
          braid_rt_status_string(status),
          braid_rt_context_last_error(s->ctx));
  fflush(stderr);
  int transient = status == BRAID_RT_TIMEOUT || status == BRAID_RT_COMM_FAILURE;
  braid_rt_context_abort(s->ctx, transient ? BRAID_RT_PROGRAM_EXIT_COMM : 1);
}

void braid_rt_program_spmd_end_all(int status) {
  braid_rt_context_abort(braid_rt_program_spmd.ctx, status);
}

void braid_rt_program_spmd_start(int *argc, char ***argv, int ndims,
                                 const int64_t *dims,
                                 const char *const *names) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  if (ndims > BRAID_RT_PROGRAM_MAX_AXES) {
    fprintf(stderr, "error: the mesh has %d axes; at most %d are supported\n",
            ndims, (int)BRAID_RT_PROGRAM_MAX_AXES);
    exit(1);
  }
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  opts.trace = braid_rt_program_spmd_trace;
  if (braid_rt_program_spmd_timeout >= 0)
    opts.collective_timeout_s = braid_rt_program_spmd_timeout;
  if (braid_rt_context_create(&opts, argc, argv, &s->ctx) != BRAID_RT_OK) {
    fprintf(stderr, "error: %s\n", braid_rt_context_last_error(NULL));
    exit(1);
  }
  s->rank = braid_rt_context_rank(s->ctx);
  braid_rt_program_rank = s->rank;
  braid_rt_program_end_all = braid_rt_program_spmd_end_all;
  if (braid_rt_mesh_create(s->ctx, ndims, dims, names, &s->mesh) !=
      BRAID_RT_OK) {
    /* Every rank fails the same check: rank 0 reports it and all leave. */
    if (s->rank == 0)
      fprintf(stderr, "error: %s\n", braid_rt_context_last_error(s->ctx));
    braid_rt_context_destroy(s->ctx);
    exit(1);
  }
  s->ndims = ndims;
  for (int i = 0; i < ndims; ++i) {
    s->dims[i] = dims[i];
    s->coords[i] = braid_rt_mesh_coord(s->mesh, i);
  }
}

void braid_rt_program_spmd_finish(void) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  braid_rt_mesh_destroy(s->mesh);
  braid_rt_context_destroy(s->ctx);
}

int braid_rt_program_spmd_rank(void) { return braid_rt_program_spmd.rank; }

braid_rt_context_t *braid_rt_program_context(void) {
  return braid_rt_program_spmd.ctx;
}

braid_rt_comm_t *braid_rt_program_comm(int64_t mask) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  if (!s->comms[mask]) {
    int axes[BRAID_RT_PROGRAM_MAX_AXES], n = 0;
    for (int i = 0; i < s->ndims; ++i)
      if (mask & ((int64_t)1 << i))
        axes[n++] = i;
    braid_rt_program_spmd_check(braid_rt_mesh_comm(s->mesh, n, axes,
                                                   &s->comms[mask]),
                                "creating a mesh communicator");
  }
  return s->comms[mask];
}

int64_t braid_rt_program_group_position(int64_t mask) {
  return braid_rt_comm_rank(braid_rt_program_comm(mask));
}

int64_t braid_rt_program_group_size(int64_t mask) {
  return braid_rt_comm_size(braid_rt_program_comm(mask));
}

/*--- Trace events ----------------------------------------------------------*/

void braid_rt_program_trace_begin(const char *name, const char *category) {
  braid_rt_program_spmd_check(
      braid_rt_trace_begin(braid_rt_program_spmd.ctx, name, category),
      "trace");
}

void braid_rt_program_trace_end(void) {
  braid_rt_program_spmd_check(braid_rt_trace_end(braid_rt_program_spmd.ctx),
                              "trace");
}

void braid_rt_program_trace_write(const char *path) {
  braid_rt_status_t status =
      braid_rt_trace_write(braid_rt_program_spmd.ctx, path);
  if (status != BRAID_RT_OK) {
    if (braid_rt_program_spmd.rank == 0)
      fprintf(stderr, "error: --trace %s: %s: %s\n", path,
              braid_rt_status_string(status),
              braid_rt_context_last_error(braid_rt_program_spmd.ctx));
    fflush(stdout);
    braid_rt_program_spmd_finish();
    exit(1);
  }
}

/*--- Training data -----------------------------------------------------------*/

braid_rt_data_t *braid_rt_program_data_open(const char *source,
                                            int token_bytes, uint64_t seed,
                                            int64_t vocab, int64_t seq_len,
                                            int64_t global_batch) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  braid_rt_data_options_t opts;
  braid_rt_data_options_init(&opts);
  opts.seq_len = seq_len;
  opts.global_batch = global_batch;
  braid_rt_data_t *data = NULL;
  braid_rt_status_t status =
      strcmp(source, "synthetic") == 0
          ? braid_rt_data_open_synthetic(s->ctx, &opts, seed, vocab, &data)
          : braid_rt_data_open_tokens(s->ctx, &opts, source, token_bytes,
                                      vocab, &data);
  if (status != BRAID_RT_OK)
    fprintf(stderr, "error: rank %d: --data %s: %s: %s\n", s->rank, source,
            braid_rt_status_string(status),
            braid_rt_context_last_error(s->ctx));
  braid_rt_program_checkpoint_outcome(status != BRAID_RT_OK);
  return data;
}

void braid_rt_program_data_batch(braid_rt_data_t *data, int64_t step,
                                 int64_t global_batch, int64_t seq_len,
                                 int32_t *tokens, int32_t *labels) {
  /* Read on the host, then uploaded (staging.c). */
  size_t bytes = (size_t)(global_batch * seq_len) * sizeof(int32_t);
  int32_t *host_tokens = (int32_t *)braid_rt_program_map(
      tokens, bytes, /*read=*/0, "--data tokens");
  int32_t *host_labels = (int32_t *)braid_rt_program_map(
      labels, bytes, /*read=*/0, "--data labels");
  braid_rt_program_spmd_check(braid_rt_data_batch(data, (uint64_t)step, 0,
                                                  global_batch, host_tokens,
                                                  host_labels),
                              "--data: reading a batch");
  braid_rt_program_unmap(host_tokens, tokens, bytes, /*write=*/1,
                         "--data tokens");
  braid_rt_program_unmap(host_labels, labels, bytes, /*write=*/1,
                         "--data labels");
}

void braid_rt_program_data_batch_i64(braid_rt_data_t *data, int64_t step,
                                     int64_t global_batch, int64_t seq_len,
                                     int64_t *tokens, int64_t *labels) {
  /* The source yields int32 ids: read them on the host, widen, upload. */
  size_t n = (size_t)(global_batch * seq_len);
  int32_t *ids = (int32_t *)malloc(2 * n * sizeof(int32_t));
  if (!ids) {
    fprintf(stderr, "error: rank %d: --data: out of host memory for %zu ids\n",
            braid_rt_program_spmd.rank, 2 * n);
    braid_rt_program_spmd_end_all(1);
    return;
  }
  braid_rt_program_spmd_check(
      braid_rt_data_batch(data, (uint64_t)step, 0, global_batch, ids, ids + n),
      "--data: reading a batch");
  size_t bytes = n * sizeof(int64_t);
  int64_t *host_tokens = (int64_t *)braid_rt_program_map(
      tokens, bytes, /*read=*/0, "--data tokens");
  int64_t *host_labels = (int64_t *)braid_rt_program_map(
      labels, bytes, /*read=*/0, "--data labels");
  for (size_t i = 0; i < n; ++i) {
    host_tokens[i] = ids[i];
    host_labels[i] = ids[n + i];
  }
  free(ids);
  braid_rt_program_unmap(host_tokens, tokens, bytes, /*write=*/1,
                         "--data tokens");
  braid_rt_program_unmap(host_labels, labels, bytes, /*write=*/1,
                         "--data labels");
}

/*===- checkpoint_tool.c - Checkpoints for the Python interop test -------===*/
/*
 * braid-rt-checkpoint-tool write PATH
 *     writes a known checkpoint: "w" F32[3, 4] = 0.25 i - 1, "v" F32[5] =
 *     0.5 (i - 2), "s" F32[] = 42, metadata step=7, model=interop
 * braid-rt-checkpoint-tool dump PATH [KEY...]
 *     opens and verifies PATH, prints "NAME [d0,d1] v0 v1 ..." per tensor
 *     (%.9g) in file order, then "KEY=VALUE" for each KEY (or "KEY absent")
 * On failure prints "STATUS: message" to stderr and exits 1. Runs on one
 * rank, with or without mpirun.
 */

#include "braid/rt/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static braid_rt_context_t *ctx;

static int fail(braid_rt_status_t s) {
  fprintf(stderr, "%s: %s\n", braid_rt_status_string(s),
          braid_rt_context_last_error(ctx));
  braid_rt_context_destroy(ctx);
  return 1;
}

#define TRY(call)                                                              \
  do {                                                                         \
    braid_rt_status_t try_status_ = (call);                                    \
    if (try_status_ != BRAID_RT_OK)                                            \
      return fail(try_status_);                                                \
  } while (0)

static int write_known(const char *path) {
  float w[12], v[5], s = 42;
  for (int i = 0; i < 12; ++i)
    w[i] = 0.25f * (float)i - 1;
  for (int i = 0; i < 5; ++i)
    v[i] = 0.5f * (float)(i - 2);
  int64_t w_shape[2] = {3, 4}, v_shape[1] = {5}, zero[2] = {0, 0};
  braid_rt_checkpoint_writer_t *writer;
  TRY(braid_rt_checkpoint_writer_create(ctx, braid_rt_context_world(ctx), path,
                                        &writer));
  TRY(braid_rt_checkpoint_writer_add_f32(writer, "w", 2, w_shape, zero,
                                         w_shape, w));
  TRY(braid_rt_checkpoint_writer_add_f32(writer, "v", 1, v_shape, zero,
                                         v_shape, v));
  TRY(braid_rt_checkpoint_writer_add_f32(writer, "s", 0, NULL, NULL, NULL, &s));
  TRY(braid_rt_checkpoint_writer_set_metadata(writer, "step", "7"));
  TRY(braid_rt_checkpoint_writer_set_metadata(writer, "model", "interop"));
  TRY(braid_rt_checkpoint_writer_commit(writer));
  braid_rt_checkpoint_writer_destroy(writer);
  return 0;
}

/* Prints what `r` holds; dump() closes it whatever happens. */
static int dump_reader(braid_rt_checkpoint_reader_t *r, int nkeys,
                       char **keys) {
  TRY(braid_rt_checkpoint_verify(r));
  for (size_t i = 0; i < braid_rt_checkpoint_num_tensors(r); ++i) {
    const char *name = braid_rt_checkpoint_tensor_name(r, i);
    int ndims;
    int64_t shape[BRAID_RT_CHECKPOINT_MAX_DIMS],
        zero[BRAID_RT_CHECKPOINT_MAX_DIMS] = {0};
    TRY(braid_rt_checkpoint_tensor_shape(r, name, &ndims, shape));
    size_t n = 1;
    for (int d = 0; d < ndims; ++d)
      n *= (size_t)shape[d];
    float *values = malloc(n * sizeof(float) + 4);
    if (!values)
      return 1;
    braid_rt_status_t status = braid_rt_checkpoint_read_block_f32(
        r, name, ndims, shape, zero, shape, values);
    if (status != BRAID_RT_OK) {
      free(values);
      return fail(status);
    }
    printf("%s [", name);
    for (int d = 0; d < ndims; ++d)
      printf("%s%lld", d ? "," : "", (long long)shape[d]);
    printf("]");
    for (size_t e = 0; e < n; ++e)
      printf(" %.9g", values[e]);
    printf("\n");
    free(values);
  }
  for (int k = 0; k < nkeys; ++k) {
    const char *value = braid_rt_checkpoint_metadata(r, keys[k]);
    if (value)
      printf("%s=%s\n", keys[k], value);
    else
      printf("%s absent\n", keys[k]);
  }
  return 0;
}

static int dump(const char *path, int nkeys, char **keys) {
  braid_rt_checkpoint_reader_t *r;
  TRY(braid_rt_checkpoint_open(ctx, path, &r));
  int rc = dump_reader(r, nkeys, keys);
  braid_rt_checkpoint_close(r);
  return rc;
}

int main(int argc, char **argv) {
  if (braid_rt_context_create(NULL, &argc, &argv, &ctx) != BRAID_RT_OK) {
    fprintf(stderr, "%s\n", braid_rt_context_last_error(NULL));
    return 1;
  }
  int rc;
  if (argc == 3 && strcmp(argv[1], "write") == 0) {
    rc = write_known(argv[2]);
  } else if (argc >= 3 && strcmp(argv[1], "dump") == 0) {
    rc = dump(argv[2], argc - 3, argv + 3);
  } else {
    fprintf(stderr, "usage: braid-rt-checkpoint-tool write PATH | dump PATH "
                    "[KEY...]\n");
    rc = 2;
  }
  if (rc == 1)
    return 1; /* the context is gone */
  braid_rt_context_destroy(ctx);
  return rc;
}

/*===- checkpoint_test.c - Checkpoints move between meshes ---------------===*/
/*
 * checkpoint_test ACTION...   (run under mpirun; actions in order)
 *   write:PATH     every rank adds its blocks of the model under the write
 *                  layout of this world size (dp x tp = 2 x 2 on 4 ranks,
 *                  1 x 2 on 2, 1 x 1 on 1; tp-split, dp-split (optimizer
 *                  state) and replicated tensors) and commits PATH
 *   read:PATH      every rank reads its blocks under the read layout, which
 *                  differs from every write layout (tp = world size on 4
 *                  ranks, so some blocks are empty; dp = 2 on 2 ranks;
 *                  whole tensors on 1), and checks every element, the
 *                  tensor list, the shapes and the metadata
 *   failures:PATH  commits that must fail (a missing block, overlapping
 *                  blocks, disagreeing shapes, an unwritable .tmp, a
 *                  missing directory) return the same status and message
 *                  on every rank and leave the existing PATH byte-identical
 *                  with no .tmp behind; argument errors
 */

#include "test_util.h"

#include "braid/rt/checkpoint.h"
#include "checkpoint_model.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int world_rank, world_size;

static void write_layout(int *dp, int *tp) {
  *tp = world_size >= 2 ? 2 : 1;
  *dp = world_size / *tp;
  CHECK(*dp * *tp == world_size, "world size %d", world_size);
}

/* Adds this rank's blocks; `skip` names a tensor this rank leaves out. */
static void add_model(braid_rt_checkpoint_writer_t *w, float **buffers,
                      const char *skip) {
  int dp, tp;
  write_layout(&dp, &tp);
  int d = world_rank / tp, p = world_rank % tp;
  for (size_t i = 0; i < NUM_MODEL_TENSORS; ++i) {
    const model_tensor_t *t = &model_tensors[i];
    int64_t offsets[3], local[3];
    model_block(t, dp, tp, d, p, offsets, local);
    buffers[i] = malloc(volume_of(t->ndims, local) * sizeof(float) + 4);
    CHECK(buffers[i], "malloc");
    model_fill(t, offsets, local, buffers[i]);
    if (skip && strcmp(skip, t->name) == 0)
      continue;
    CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, t->name, t->ndims, t->shape,
                                                offsets, local, buffers[i]));
  }
}

static void free_buffers(float **buffers) {
  for (size_t i = 0; i < NUM_MODEL_TENSORS; ++i)
    free(buffers[i]);
}

static void set_metadata(braid_rt_checkpoint_writer_t *w) {
  char mesh[64];
  int dp, tp;
  write_layout(&dp, &tp);
  snprintf(mesh, sizeof(mesh), "dp=%d,tp=%d", dp, tp);
  CHECK_OK(braid_rt_checkpoint_writer_set_metadata(w, "step", "41"));
  CHECK_OK(braid_rt_checkpoint_writer_set_metadata(w, "step", "42"));
  CHECK_OK(braid_rt_checkpoint_writer_set_metadata(w, "mesh", mesh));
  CHECK_OK(braid_rt_checkpoint_writer_set_metadata(
      w, "model", "gpt \"tiny\"\n\\ caf\xc3\xa9"));
}

static void write_checkpoint(const char *path) {
  braid_rt_checkpoint_writer_t *w;
  CHECK_OK(braid_rt_checkpoint_writer_create(
      test_ctx, braid_rt_context_world(test_ctx), path, &w));
  float *buffers[NUM_MODEL_TENSORS];
  add_model(w, buffers, NULL);
  set_metadata(w);
  CHECK_OK(braid_rt_checkpoint_writer_commit(w));
  braid_rt_checkpoint_writer_destroy(w);
  free_buffers(buffers);
  /* No temporary file is left behind. */
  char tmp[512];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  CHECK(access(tmp, F_OK) != 0, "'%s' left behind", tmp);
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void read_checkpoint(const char *path) {
  braid_rt_checkpoint_reader_t *r;
  CHECK_OK(braid_rt_checkpoint_open(test_ctx, path, &r));
  CHECK_OK(braid_rt_checkpoint_verify(r));

  /* The tensors, in name order in the data. */
  CHECK(braid_rt_checkpoint_num_tensors(r) == NUM_MODEL_TENSORS, "%zu tensors",
        braid_rt_checkpoint_num_tensors(r));
  const char *names[NUM_MODEL_TENSORS];
  for (size_t i = 0; i < NUM_MODEL_TENSORS; ++i)
    names[i] = model_tensors[i].name;
  qsort(names, NUM_MODEL_TENSORS, sizeof(names[0]), compare_names);
  for (size_t i = 0; i < NUM_MODEL_TENSORS; ++i)
    CHECK(strcmp(braid_rt_checkpoint_tensor_name(r, i), names[i]) == 0,
          "tensor %zu is '%s', expected '%s'", i,
          braid_rt_checkpoint_tensor_name(r, i), names[i]);
  CHECK(braid_rt_checkpoint_tensor_name(r, NUM_MODEL_TENSORS) == NULL, "end");

  /* Metadata. */
  CHECK(strcmp(braid_rt_checkpoint_metadata(r, "step"), "42") == 0, "step");
  CHECK(strcmp(braid_rt_checkpoint_metadata(r, "model"),
               "gpt \"tiny\"\n\\ caf\xc3\xa9") == 0,
        "model '%s'", braid_rt_checkpoint_metadata(r, "model"));
  const char *mesh = braid_rt_checkpoint_metadata(r, "mesh");
  CHECK(mesh && strncmp(mesh, "dp=", 3) == 0, "mesh");
  CHECK(strcmp(braid_rt_checkpoint_metadata(r, BRAID_RT_CHECKPOINT_FORMAT_KEY),
               BRAID_RT_CHECKPOINT_FORMAT) == 0,
        "format");
  CHECK(braid_rt_checkpoint_metadata(r, "absent") == NULL, "absent key");

  /* Read layout: tp = world size on 4 ranks, dp = 2 on 2, whole on 1. */
  int dp = world_size == 2 ? 2 : 1, tp = world_size / dp;
  int d = world_rank / tp, p = world_rank % tp;
  for (size_t i = 0; i < NUM_MODEL_TENSORS; ++i) {
    const model_tensor_t *t = &model_tensors[i];
    int ndims;
    int64_t shape[BRAID_RT_CHECKPOINT_MAX_DIMS];
    CHECK_OK(braid_rt_checkpoint_tensor_shape(r, t->name, &ndims, shape));
    CHECK(ndims == t->ndims &&
              memcmp(shape, t->shape, (size_t)ndims * sizeof(int64_t)) == 0,
          "shape of %s", t->name);
    int64_t offsets[3], local[3];
    model_block(t, dp, tp, d, p, offsets, local);
    uint64_t n = volume_of(t->ndims, local);
    float *got = malloc(n * sizeof(float) + 4);
    float *want = malloc(n * sizeof(float) + 4);
    CHECK(got && want, "malloc");
    for (uint64_t e = 0; e < n; ++e)
      got[e] = -99999.0f;
    CHECK_OK(braid_rt_checkpoint_read_block_f32(r, t->name, t->ndims, t->shape,
                                                offsets, local, got));
    model_fill(t, offsets, local, want);
    for (uint64_t e = 0; e < n; ++e)
      CHECK(got[e] == want[e], "%s element %llu of this rank's block: %g, "
            "expected %g", t->name, (unsigned long long)e, got[e], want[e]);
    free(got);
    free(want);
  }

  /* A missing tensor and a wrong shape are named. */
  int64_t wrong[2] = {12, 8}, zero[2] = {0, 0}, one[2] = {1, 1};
  float x;
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_read_block_f32(r, "h.9.nope", 2, wrong, zero,
                                                 one, &x),
              BRAID_RT_INVALID_ARGUMENT, "has no tensor 'h.9.nope'");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_read_block_f32(r, "h.0.attn.q.weight", 2,
                                                 wrong, zero, one, &x),
              BRAID_RT_INVALID_ARGUMENT,
              "tensor 'h.0.attn.q.weight' has shape [8, 12] but [12, 8] was "
              "expected");
  int64_t right[2] = {8, 12}, off[2] = {0, 11}, big[2] = {1, 2};
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_read_block_f32(r, "h.0.attn.q.weight", 2,
                                                 right, off, big, &x),
              BRAID_RT_INVALID_ARGUMENT, "leaves its shape [8, 12]");
  braid_rt_checkpoint_close(r);
}

/* The whole file, for byte comparisons. */
static unsigned char *slurp(const char *path, long *out_size) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL, "cannot open '%s'", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *bytes = malloc((size_t)size + 1);
  CHECK(bytes && fread(bytes, 1, (size_t)size, f) == (size_t)size, "read");
  fclose(f);
  *out_size = size;
  return bytes;
}

typedef enum { MISSING, OVERLAP, SHAPE } damage_t;

/* A commit over PATH that must fail on every rank with `status` and a
   message containing `fragment`, leaving PATH as it was. */
static void failing_commit(const char *path, damage_t damage,
                           braid_rt_status_t status, const char *fragment) {
  long before_size = 0, after_size = 0;
  unsigned char *before = world_rank == 0 ? slurp(path, &before_size) : NULL;
  braid_rt_checkpoint_writer_t *w;
  CHECK_OK(braid_rt_checkpoint_writer_create(
      test_ctx, braid_rt_context_world(test_ctx), path, &w));
  float *buffers[NUM_MODEL_TENSORS];
  const char *skip = NULL;
  if (world_rank == world_size - 1)
    skip = damage == MISSING ? "h.0.attn.q.weight.adamw.m"
           : damage == SHAPE ? "h.0.ln.weight"
                             : NULL;
  add_model(w, buffers, skip);
  float extra[48] = {0};
  if (damage == MISSING && world_size == 1) {
    /* Alone, a rank can only leave part of a tensor out. */
    int64_t shape[2] = {8, 12}, offsets[2] = {0, 0}, local[2] = {4, 12};
    CHECK_OK(braid_rt_checkpoint_writer_add_f32(
        w, "h.0.attn.q.weight.adamw.m", 2, shape, offsets, local, extra));
  }
  if (damage == OVERLAP && world_rank == 1) {
    int64_t shape[2] = {8, 12}, offsets[2] = {7, 0}, local[2] = {1, 12};
    CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, "h.0.attn.q.weight", 2,
                                                shape, offsets, local, extra));
  }
  if (damage == SHAPE && world_rank == world_size - 1) {
    /* The same name with another shape than the other ranks give. */
    int64_t shape[1] = {9}, offsets[1] = {0};
    CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, "h.0.ln.weight", 1, shape,
                                                offsets, shape, extra));
  }
  set_metadata(w);
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_writer_commit(w), status,
              fragment);
  braid_rt_checkpoint_writer_destroy(w);
  free_buffers(buffers);
  CHECK_OK(braid_rt_barrier(braid_rt_context_world(test_ctx), NULL));
  if (world_rank == 0) {
    unsigned char *after = slurp(path, &after_size);
    CHECK(after_size == before_size &&
              memcmp(before, after, (size_t)after_size) == 0,
          "'%s' changed by a failed commit", path);
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    struct stat st;
    CHECK(stat(tmp, &st) != 0 || S_ISDIR(st.st_mode), "'%s' left behind",
          tmp);
    free(after);
  }
  free(before);
}

static void check_failures(const char *path) {
  failing_commit(path, MISSING, BRAID_RT_INVALID_ARGUMENT,
                 "tensor 'h.0.attn.q.weight.adamw.m' of shape [8, 12]: its "
                 "blocks cover");
  if (world_size >= 2)
    failing_commit(path, OVERLAP, BRAID_RT_INVALID_ARGUMENT,
                   "tensor 'h.0.attn.q.weight': the blocks at offsets");
  if (world_size >= 2)
    failing_commit(path, SHAPE, BRAID_RT_INVALID_ARGUMENT,
                   "tensor 'h.0.ln.weight': rank 0 gives global shape [8] but "
                   "rank");

  /* Rank 0 cannot create the temporary file: a directory is in its way. */
  char tmp[512];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  if (world_rank == 0)
    CHECK(mkdir(tmp, 0755) == 0, "mkdir '%s'", tmp);
  CHECK_OK(braid_rt_barrier(braid_rt_context_world(test_ctx), NULL));
  failing_commit(path, -1, BRAID_RT_IO_ERROR, "cannot create");
  if (world_rank == 0)
    CHECK(rmdir(tmp) == 0, "rmdir '%s'", tmp);

  /* A missing directory. */
  braid_rt_checkpoint_writer_t *w;
  CHECK_OK(braid_rt_checkpoint_writer_create(
      test_ctx, braid_rt_context_world(test_ctx), "no/such/dir/ckpt", &w));
  float v = 1;
  CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, "x", 0, NULL, NULL, NULL, &v));
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_writer_commit(w),
              BRAID_RT_IO_ERROR,
              "checkpoint 'no/such/dir/ckpt': cannot create "
              "'no/such/dir/ckpt.tmp': No such file or directory");
  /* Argument errors, each leaving the writer as it was. */
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_writer_commit(w),
              BRAID_RT_INVALID_ARGUMENT, "commit called twice");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "y", 0, NULL, NULL, NULL,
                                                 &v),
              BRAID_RT_INVALID_ARGUMENT, "after commit");
  braid_rt_checkpoint_writer_destroy(w);

  CHECK_OK(braid_rt_checkpoint_writer_create(
      test_ctx, braid_rt_context_world(test_ctx), "unused", &w));
  int64_t g[2] = {4, 4}, o[2] = {2, 0}, l[2] = {3, 4};
  float data[16] = {0};
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "t", 2, g, o, l, data),
              BRAID_RT_INVALID_ARGUMENT,
              "tensor 't': the block of shape [3, 4] at offsets [2, 0] leaves "
              "the global shape [4, 4] in dimension 0");
  l[0] = 2;
  CHECK_OK(braid_rt_checkpoint_writer_add_f32(w, "t", 2, g, o, l, data));
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "t", 2, g, o, l, data),
              BRAID_RT_INVALID_ARGUMENT,
              "this rank already added the block at offsets [2, 0]");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "__metadata__", 2, g, o,
                                                 l, data),
              BRAID_RT_INVALID_ARGUMENT, "is not allowed");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "", 2, g, o, l, data),
              BRAID_RT_INVALID_ARGUMENT, "is not allowed");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "u", 17, g, o, l, data),
              BRAID_RT_INVALID_ARGUMENT, "17 dimensions");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_add_f32(w, "u", 2, g, o, l, NULL),
              BRAID_RT_INVALID_ARGUMENT, "local_data is NULL");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_set_metadata(w, "braid.format", "x"),
              BRAID_RT_INVALID_ARGUMENT, "reserved");
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_writer_set_metadata(w, "k", "\xff"),
              BRAID_RT_INVALID_ARGUMENT, "UTF-8");
  braid_rt_checkpoint_writer_destroy(w);
  CHECK_FAILS(NULL, braid_rt_checkpoint_writer_commit(NULL),
              BRAID_RT_INVALID_ARGUMENT, "the writer is NULL");
  CHECK_FAILS(test_ctx,
              braid_rt_checkpoint_writer_create(test_ctx, NULL, "p", &w),
              BRAID_RT_INVALID_ARGUMENT, "NULL argument");
  braid_rt_checkpoint_reader_t *r;
  CHECK_FAILS(test_ctx, braid_rt_checkpoint_open(test_ctx, "no/such/file", &r),
              BRAID_RT_IO_ERROR,
              "checkpoint 'no/such/file': cannot open: No such file");
}

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  world_rank = braid_rt_context_rank(test_ctx);
  world_size = braid_rt_context_size(test_ctx);
  for (int i = 1; i < argc; ++i) {
    const char *colon = strchr(argv[i], ':');
    CHECK(colon != NULL, "usage: checkpoint_test write:PATH read:PATH "
                         "failures:PATH ...; got '%s'", argv[i]);
    const char *path = colon + 1;
    if (strncmp(argv[i], "write:", 6) == 0)
      write_checkpoint(path);
    else if (strncmp(argv[i], "read:", 5) == 0)
      read_checkpoint(path);
    else if (strncmp(argv[i], "failures:", 9) == 0)
      check_failures(path);
    else
      CHECK(0, "unknown action '%s'", argv[i]);
    CHECK_OK(braid_rt_barrier(braid_rt_context_world(test_ctx), NULL));
    if (world_rank == 0)
      printf("%s on %d ranks: ok\n", argv[i], world_size);
  }
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}

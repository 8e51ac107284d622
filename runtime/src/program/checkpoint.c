/*===- checkpoint.c - Saving and resuming a program's parameter table ----===*/
/*
 * Each rank writes and reads the block of every slot it holds, through the
 * runtime's checkpoint writer and reader (braid_rt_io), staged through host
 * memory: the block itself where device memory is host memory, a host copy
 * otherwise.
 */

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sums `failed` (0 or 1) over every rank: whether any rank failed. The
   collective takes device memory: the flag is staged through a device
   scalar unless device memory is host memory. */
static int any_failed(int failed) {
  static float *device_flag;
  float flag = failed ? 1.0f : 0.0f;
  float *buf = &flag;
  if (!braid_rt_memory_is_host()) {
    buf = braid_rt_program_buffer_f32(&device_flag, 1);
    braid_rt_program_to_device(buf, &flag, sizeof flag, "a failure flag");
  }
  braid_rt_program_spmd_check(
      braid_rt_all_reduce_sum_f32(
          braid_rt_program_comm(braid_rt_program_world_mask()), buf, 1,
          NULL),
      "checkpoint: agreeing on the outcome");
  if (buf != &flag)
    braid_rt_program_to_host(&flag, buf, sizeof flag, "a failure flag");
  return flag != 0.0f;
}

void braid_rt_program_checkpoint_outcome(int failed) {
  if (any_failed(failed)) {
    fflush(stdout);
    braid_rt_program_spmd_finish();
    exit(1);
  }
}

static int64_t num_elements(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/* A host buffer for `count` floats of the device buffer `device`: the
   buffer itself on host memory; otherwise *owned, allocated here (released
   by release_host), holding a copy when `copy` is set. */
static braid_rt_status_t host_buffer(float *device, int64_t count, int copy,
                                     float **owned, float **out) {
  *owned = NULL;
  *out = device;
  if (braid_rt_memory_is_host())
    return BRAID_RT_OK;
  size_t bytes = (size_t)count * sizeof(float);
  *owned = (float *)malloc(bytes ? bytes : 1);
  if (!*owned)
    return BRAID_RT_OUT_OF_MEMORY;
  *out = *owned;
  if (!copy)
    return BRAID_RT_OK;
  braid_rt_stream_t *stream = braid_rt_program_stream();
  braid_rt_status_t status =
      braid_rt_memory_copy_to_host(stream, *owned, device, bytes);
  return status == BRAID_RT_OK ? braid_rt_memory_synchronize(stream) : status;
}

/* A slot's block as boxes of its whole tensor. A plain split is one box;
   one strided over blocks (slot->blocks) is one box per combination of
   block indices, each a strided part of the rank's buffer (whose flat
   order is that of the view [b, n / b] of each strided dimension), packed
   one after another for the checkpoint writer and reader. */
typedef struct {
  const braid_rt_program_slot_t *slot;
  int64_t boxes, box_count;
  int64_t local[16];
  /* The view: its rank, this rank's block of it, and for each view
     dimension whether it is a block index (the major half of a strided
     dimension). */
  int64_t view_rank, view_local[32], view_offsets[32], is_block[32];
} slot_boxes_t;

static void slot_boxes(const braid_rt_program_slot_t *slot, slot_boxes_t *b) {
  int64_t view_global[32], view_spec[32 * 17];
  int64_t rank = slot->rank, v = 0, q = 0;
  const int64_t *p = slot->spec;
  b->slot = slot;
  b->boxes = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t count = slot->blocks ? slot->blocks[d] : 1;
    if (count > 1) {
      view_global[v] = count;
      b->is_block[v++] = 1;
      view_spec[q++] = 0;
      b->boxes *= count;
    }
    view_global[v] = slot->global[d] / count;
    b->is_block[v++] = 0;
    int64_t axes = *p++;
    view_spec[q++] = axes;
    for (int64_t k = 0; k < axes; ++k)
      view_spec[q++] = *p++;
  }
  b->view_rank = v;
  braid_rt_program_block(v, view_global, view_spec, b->view_local,
                         b->view_offsets);
  for (int64_t d = 0, w = 0; d < rank; ++d, ++w) {
    w += slot->blocks && slot->blocks[d] > 1;
    b->local[d] = b->view_local[w];
  }
  b->box_count = num_elements(rank, b->local);
}

/* The offsets of box c: block index j_d of each strided dimension d (mixed
   radix, d major) and the rank's share within the block. */
static void box_offsets(const slot_boxes_t *b, int64_t c, int64_t *offsets) {
  const braid_rt_program_slot_t *slot = b->slot;
  for (int64_t d = slot->rank - 1, w = b->view_rank - 1; d >= 0; --d, --w) {
    int64_t count = slot->blocks ? slot->blocks[d] : 1, j = 0;
    if (count > 1) {
      j = c % count;
      c /= count;
    }
    offsets[d] = j * (slot->global[d] / count) + b->view_offsets[w];
    w -= count > 1;
  }
}

/* Copies between a rank's buffer (the view's flat order) and its boxes
   packed one after another: to the boxes when `pack`, back otherwise. */
static void slot_pack(const slot_boxes_t *b, float *buffer, float *boxes,
                      int pack) {
  int64_t idx[32] = {0}, count = num_elements(b->view_rank, b->view_local);
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t box = 0, inner = 0;
    for (int64_t w = 0; w < b->view_rank; ++w) {
      if (b->is_block[w])
        box = box * b->view_local[w] + idx[w];
      else
        inner = inner * b->view_local[w] + idx[w];
    }
    float *packed = boxes + box * b->box_count + inner;
    if (pack)
      *packed = buffer[flat];
    else
      buffer[flat] = *packed;
    for (int64_t w = b->view_rank - 1; w >= 0; --w) {
      if (++idx[w] < b->view_local[w])
        break;
      idx[w] = 0;
    }
  }
}

void braid_rt_program_save(const char *dir, int64_t next_step, int64_t n,
                           const braid_rt_program_slot_t *slots,
                           float *const *params, int64_t pipeline_mask) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
  if (s->rank == 0)
    mkdir(dir, 0777); /* an existing directory is fine; errors show below */
  braid_rt_program_checkpoint_outcome(0); /* the directory exists now */
  braid_rt_checkpoint_writer_t *w = NULL;
  braid_rt_status_t status = braid_rt_checkpoint_writer_create(
      s->ctx, braid_rt_program_comm(braid_rt_program_world_mask()), path, &w);
  int64_t offsets[16];
  int64_t stage =
      pipeline_mask ? braid_rt_program_group_position(pipeline_mask) : -1;
  /* The writer reads the blocks at commit: host copies live until then. */
  float **staged = (float **)calloc((size_t)(n > 0 ? n : 1), sizeof(float *));
  if (!staged && status == BRAID_RT_OK)
    status = BRAID_RT_OUT_OF_MEMORY;
  for (int64_t i = 0; status == BRAID_RT_OK && i < n; ++i) {
    if (!params[i] || slots[i].owner == BRAID_RT_PROGRAM_SLOT_TRANSIENT ||
        (slots[i].owner >= 0 && slots[i].owner != stage))
      continue; /* not held here, or a stale copy: another stage updates it;
                   or not saved at all */
    slot_boxes_t boxes;
    slot_boxes(&slots[i], &boxes);
    float *owned, *host;
    status = host_buffer(params[i], boxes.boxes * boxes.box_count,
                         /*copy=*/1, &owned, &host);
    staged[i] = owned;
    if (status == BRAID_RT_OK && boxes.boxes > 1) {
      /* Strided: the boxes are packed apart, and live until the commit. */
      float *packed = (float *)malloc(
          (size_t)(boxes.boxes * boxes.box_count) * sizeof(float) + 1);
      if (!packed)
        status = BRAID_RT_OUT_OF_MEMORY;
      else
        slot_pack(&boxes, host, packed, /*pack=*/1);
      free(owned);
      staged[i] = host = packed;
    }
    for (int64_t c = 0; status == BRAID_RT_OK && c < boxes.boxes; ++c) {
      box_offsets(&boxes, c, offsets);
      status = braid_rt_checkpoint_writer_add_f32(
          w, slots[i].name, (int)slots[i].rank, slots[i].global, offsets,
          boxes.local, host + c * boxes.box_count);
    }
  }
  char step[32];
  snprintf(step, sizeof step, "%lld", (long long)next_step);
  if (status == BRAID_RT_OK)
    status = braid_rt_checkpoint_writer_set_metadata(w, "step", step);
  if (any_failed(status != BRAID_RT_OK)) {
    if (status != BRAID_RT_OK)
      fprintf(stderr, "error: rank %d: --save %s: %s: %s\n", s->rank, path,
              braid_rt_status_string(status),
              braid_rt_context_last_error(s->ctx));
    braid_rt_checkpoint_writer_destroy(w);
    braid_rt_program_checkpoint_outcome(1);
  }
  status = braid_rt_checkpoint_writer_commit(w);
  if (status != BRAID_RT_OK)
    fprintf(stderr, "error: rank %d: --save %s: %s: %s\n", s->rank, path,
            braid_rt_status_string(status),
            braid_rt_context_last_error(s->ctx));
  braid_rt_checkpoint_writer_destroy(w);
  for (int64_t i = 0; staged && i < n; ++i)
    free(staged[i]);
  free(staged);
  braid_rt_program_checkpoint_outcome(status != BRAID_RT_OK);
}

/* Whether `dir` is a directory this process can create entries in; if
   not, prints why (for the flag `flag` naming `path`) and returns 0. */
static int writable_dir(const char *flag, const char *path, const char *dir) {
  struct stat st;
  const char *why = NULL;
  if (stat(dir, &st) != 0)
    why = strerror(errno);
  else if (!S_ISDIR(st.st_mode))
    why = "not a directory";
  else if (access(dir, W_OK | X_OK) != 0)
    why = strerror(errno);
  if (!why)
    return 1;
  fprintf(stderr,
          "error: rank %d: %s %s: cannot be written: '%s': %s (checked "
          "before the first step)\n",
          braid_rt_program_spmd.rank, flag, path, dir, why);
  return 0;
}

/* The directory holding `path` ("." for a bare name) in `out`. */
static void parent_dir(const char *path, char *out, size_t size) {
  snprintf(out, size, "%s", path);
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/')
    out[--n] = 0; /* "dir/" names dir */
  char *slash = strrchr(out, '/');
  if (!slash)
    snprintf(out, size, ".");
  else if (slash == out)
    out[1] = 0; /* "/x": the root */
  else
    *slash = 0;
}

void braid_rt_program_check_outputs(const char *save_dir,
                                    const char *trace_file) {
  char parent[4096];
  struct stat st;
  int ok = 1;
  if (save_dir) {
    /* An existing directory is written into; a missing one is created (by
       rank 0, in its parent). */
    if (stat(save_dir, &st) == 0) {
      ok = writable_dir("--save", save_dir, save_dir);
    } else {
      parent_dir(save_dir, parent, sizeof parent);
      ok = writable_dir("--save", save_dir, parent);
    }
  }
  if (trace_file && braid_rt_program_spmd.rank == 0) {
    /* Rank 0 writes the trace, through TRACE.tmp and a rename. */
    if (stat(trace_file, &st) == 0 && S_ISDIR(st.st_mode)) {
      fprintf(stderr,
              "error: rank 0: --trace %s: is a directory (checked before "
              "the first step)\n",
              trace_file);
      ok = 0;
    } else {
      parent_dir(trace_file, parent, sizeof parent);
      ok = writable_dir("--trace", trace_file, parent) && ok;
    }
  }
  braid_rt_program_checkpoint_outcome(!ok);
}

/* Makes the entries of directory `path` durable; 0 on success. */
static int fsync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return -1;
  int result = fsync(fd);
  close(fd);
  return result;
}

/* Rank 0's part of marking a step directory: removes (complete = 0) or
   writes (complete = 1) its COMPLETE file; prints and returns 1 on failure.
   Writing goes through COMPLETE.tmp and a rename, so COMPLETE is never
   seen half-written. */
static int mark_step(const char *step_dir, int64_t next_step, int complete) {
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/COMPLETE", step_dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  const char *what = "removing";
  int ok;
  if (!complete) {
    ok = (unlink(path) == 0 || errno == ENOENT) && fsync_dir(step_dir) == 0;
  } else {
    what = "writing";
    FILE *f = fopen(tmp, "w");
    ok = f && fprintf(f, "step %lld\n", (long long)next_step) > 0 &&
         fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (f && fclose(f) == 0) && ok;
    ok = ok && rename(tmp, path) == 0 && fsync_dir(step_dir) == 0;
    if (!ok)
      unlink(tmp);
  }
  if (!ok)
    fprintf(stderr, "error: rank 0: --save-every: %s %s: %s\n", what, path,
            strerror(errno));
  return !ok;
}

void braid_rt_program_save_step(const char *dir, int64_t next_step, int64_t n,
                                const braid_rt_program_slot_t *slots,
                                float *const *params, int64_t pipeline_mask) {
  char step_dir[4096];
  snprintf(step_dir, sizeof step_dir, "%s/step-%08lld", dir,
           (long long)next_step);
  int failed = 0;
  if (braid_rt_program_spmd.rank == 0) {
    /* Existing directories are fine; other errors show below. */
    mkdir(dir, 0777);
    mkdir(step_dir, 0777);
    fsync_dir(dir);
    failed = mark_step(step_dir, next_step, /*complete=*/0);
  }
  braid_rt_program_checkpoint_outcome(failed);
  braid_rt_program_save(step_dir, next_step, n, slots, params, pipeline_mask);
  if (braid_rt_program_spmd.rank == 0) {
    /* Test-only (docs/checkpoints.md): a failure after the checkpoint file
       and before its mark, which must leave the step unresumed. */
    const char *die = getenv("BRAID_TEST_KILL_BEFORE_COMPLETE");
    if (die && strtoll(die, NULL, 10) == next_step) {
      fprintf(stderr,
              "BRAID_TEST_KILL_BEFORE_COMPLETE: rank 0 dies before "
              "marking %s complete\n",
              step_dir);
      fflush(stderr);
      raise(SIGKILL);
    }
    failed = mark_step(step_dir, next_step, /*complete=*/1);
  }
  braid_rt_program_checkpoint_outcome(failed);
}

/* Prints this rank's error for a checkpoint holding tensors that no slot
   of the program has (a checkpoint of another model: more layers, another
   optimizer), naming up to 4 of them; returns whether there were any. */
static int resume_extra(const char *path, braid_rt_checkpoint_reader_t *r,
                        int64_t n, const braid_rt_program_slot_t *slots) {
  size_t count = braid_rt_checkpoint_num_tensors(r), extra = 0;
  char names[1024] = "";
  for (size_t t = 0; t < count; ++t) {
    const char *name = braid_rt_checkpoint_tensor_name(r, t);
    int64_t i = 0;
    while (i < n && strcmp(slots[i].name, name) != 0)
      ++i;
    if (i < n && slots[i].owner != BRAID_RT_PROGRAM_SLOT_TRANSIENT)
      continue;
    if (++extra <= 4) {
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s'%s'",
               extra > 1 ? ", " : "", name);
    }
  }
  if (extra == 0)
    return 0;
  fprintf(stderr,
          "error: rank %d: --resume %s: the checkpoint has %zu tensor%s that "
          "this program does not have: %s%s (a checkpoint of another model "
          "or optimizer?)\n",
          braid_rt_program_spmd.rank, path, extra, extra == 1 ? "" : "s",
          names, extra > 4 ? ", ..." : "");
  return 1;
}

int64_t braid_rt_program_resume(const char *dir, int64_t n,
                                const braid_rt_program_slot_t *slots,
                                float *const *params) {
  braid_rt_program_spmd_t *s = &braid_rt_program_spmd;
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
  braid_rt_checkpoint_reader_t *r = NULL;
  braid_rt_status_t status = braid_rt_checkpoint_open(s->ctx, path, &r);
  int64_t offsets[16], step = -1;
  for (int64_t i = 0; status == BRAID_RT_OK && i < n; ++i) {
    if (!params[i] || slots[i].owner == BRAID_RT_PROGRAM_SLOT_TRANSIENT)
      continue; /* a slot another pipeline stage holds, or one never saved */
    slot_boxes_t boxes;
    slot_boxes(&slots[i], &boxes);
    int64_t count = boxes.boxes * boxes.box_count;
    float *owned, *host;
    status = host_buffer(params[i], count, /*copy=*/0, &owned, &host);
    float *packed = host;
    if (status == BRAID_RT_OK && boxes.boxes > 1) {
      packed = (float *)malloc((size_t)count * sizeof(float) + 1);
      if (!packed)
        status = BRAID_RT_OUT_OF_MEMORY;
    }
    for (int64_t c = 0; status == BRAID_RT_OK && c < boxes.boxes; ++c) {
      box_offsets(&boxes, c, offsets);
      status = braid_rt_checkpoint_read_block_f32(
          r, slots[i].name, (int)slots[i].rank, slots[i].global, offsets,
          boxes.local, packed + c * boxes.box_count);
    }
    if (packed != host) {
      if (status == BRAID_RT_OK)
        slot_pack(&boxes, host, packed, /*pack=*/0);
      free(packed);
    }
    if (status == BRAID_RT_OK && owned) {
      braid_rt_stream_t *stream = braid_rt_program_stream();
      status = braid_rt_memory_copy_to_device(stream, params[i], owned,
                                              (size_t)count * sizeof(float));
      if (status == BRAID_RT_OK)
        status = braid_rt_memory_synchronize(stream);
    }
    free(owned);
  }
  if (status != BRAID_RT_OK) {
    fprintf(stderr, "error: rank %d: --resume %s: %s: %s\n", s->rank, path,
            braid_rt_status_string(status),
            braid_rt_context_last_error(s->ctx));
  } else if (resume_extra(path, r, n, slots)) {
    status = BRAID_RT_INVALID_ARGUMENT;
  } else {
    const char *value = braid_rt_checkpoint_metadata(r, "step");
    char *end = NULL;
    if (value)
      step = strtoll(value, &end, 10);
    if (!value || !*value || *end || step < 0) {
      fprintf(stderr,
              "error: rank %d: --resume %s: no valid metadata \"step\"\n",
              s->rank, path);
      status = BRAID_RT_INVALID_ARGUMENT;
    }
  }
  braid_rt_checkpoint_close(r);
  braid_rt_program_checkpoint_outcome(status != BRAID_RT_OK);
  return step;
}

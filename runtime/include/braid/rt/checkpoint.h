/*===- checkpoint.h - Checkpoints in safetensors format ------------------===*/
/*
 * A checkpoint is one safetensors file holding whole (global) tensors keyed
 * by their global parameter names ("h.3.attn.q.weight", optimizer state as
 * "h.3.attn.q.weight.adamw.m"), so that a checkpoint written under one mesh
 * loads under another: each rank contributes the block of each tensor it
 * holds, and each rank later reads back whichever block its new layout
 * needs. The format, the keys the runtime reserves in "__metadata__" and
 * the integrity checks are described in docs/checkpoints.md.
 *
 *   writer: create on a communicator -> add_f32 per block held ->
 *           set_metadata -> commit (collective: rank 0 of the communicator
 *           gathers the blocks and writes `path` atomically) -> destroy
 *   reader: open (on any rank, not collective) -> read_block_f32 per block
 *           needed, metadata -> close
 *
 * Tensors are f32, row-major, at most BRAID_RT_CHECKPOINT_MAX_DIMS
 * dimensions. A block is the box [offsets[d], offsets[d] + local_shape[d])
 * of the global tensor, stored row-major in the caller's buffer.
 *
 * Errors: INVALID_ARGUMENT for a broken precondition (a block outside its
 * tensor, blocks that do not cover a tensor exactly, a tensor missing from
 * the file or of another shape), IO_ERROR when the file system refuses,
 * DATA_CORRUPT when a file is not a well-formed checkpoint (its message
 * names the file and what is wrong). Messages are in the context's last
 * error. Thread-compatible: one thread at a time per writer or reader.
 */
#ifndef BRAID_RT_CHECKPOINT_H
#define BRAID_RT_CHECKPOINT_H

#include "braid/rt/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_rt_checkpoint_writer braid_rt_checkpoint_writer_t;
typedef struct braid_rt_checkpoint_reader braid_rt_checkpoint_reader_t;

#define BRAID_RT_CHECKPOINT_MAX_DIMS 16

/* The metadata keys the runtime writes itself; user keys may not start with
   "braid.". The checksum of tensor NAME is stored under
   BRAID_RT_CHECKPOINT_CHECKSUM_PREFIX "NAME" as 16 lowercase hex digits of
   the FNV-1a 64 hash of its data bytes. */
#define BRAID_RT_CHECKPOINT_FORMAT_KEY "braid.format"
#define BRAID_RT_CHECKPOINT_FORMAT "braid-checkpoint-1"
#define BRAID_RT_CHECKPOINT_CHECKSUM_PREFIX "braid.fnv1a64."

/* Creates a writer of the checkpoint `path` (copied) over `comm`, a
   communicator of `ctx`: the ranks that will commit together, normally the
   world. Rank 0 of `comm` writes the file. Not collective. The caller owns
   *out_writer and releases it with braid_rt_checkpoint_writer_destroy. */
braid_rt_status_t
braid_rt_checkpoint_writer_create(braid_rt_context_t *ctx,
                                  braid_rt_comm_t *comm, const char *path,
                                  braid_rt_checkpoint_writer_t **out_writer);

/* Adds this rank's block of tensor `name`: a box of shape local_shape at
   `offsets` in the global tensor of shape global_shape, each `ndims` long
   (0..BRAID_RT_CHECKPOINT_MAX_DIMS; 0 is a scalar). `local_data` holds the
   block row-major; it is not copied and must stay valid and unchanged until
   commit returns. Every rank that holds a copy of a replicated block may add
   it; one copy is written (the lowest rank's). A rank adds each block at
   most once. Fails with INVALID_ARGUMENT, adding nothing, if the block
   leaves the tensor, `name` is empty, longer than 4096 bytes or
   "__metadata__", or this rank already added a block at these offsets. */
braid_rt_status_t braid_rt_checkpoint_writer_add_f32(
    braid_rt_checkpoint_writer_t *writer, const char *name, int ndims,
    const int64_t *global_shape, const int64_t *offsets,
    const int64_t *local_shape, const float *local_data);

/* Sets "__metadata__" entry `key` to `value` (both copied, valid UTF-8;
   keys starting with "braid." are reserved). A later call with the same key
   replaces the value. Only rank 0's metadata is written. */
braid_rt_status_t
braid_rt_checkpoint_writer_set_metadata(braid_rt_checkpoint_writer_t *writer,
                                        const char *key, const char *value);

/* Writes the checkpoint. Collective over the writer's communicator; every
   rank returns the same status and message. First every rank learns every
   rank's block list and checks that the blocks of each tensor agree on its
   global shape and, once identical copies are merged, cover it exactly
   (INVALID_ARGUMENT naming the tensor otherwise, and nothing is written).
   Then rank 0 receives the blocks, writes `path`.tmp, fsyncs it and renames
   it over `path`, so an existing checkpoint is either replaced whole or
   left untouched; on failure the .tmp file is removed. Commit once per
   writer (INVALID_ARGUMENT after). */
braid_rt_status_t
braid_rt_checkpoint_writer_commit(braid_rt_checkpoint_writer_t *writer);

/* Releases the writer (committed or not). Not collective. NULL is a no-op. */
void braid_rt_checkpoint_writer_destroy(braid_rt_checkpoint_writer_t *writer);

/* Opens checkpoint `path` for reading on this rank (not collective: each
   rank reads the file itself). Checks the whole header: length, JSON,
   dtypes, shapes, data offsets tiling the data section, metadata; for a
   file whose metadata says it is a Braid checkpoint, a checksum for every
   tensor. Tensor data is checked against its checksum when first read, or
   by braid_rt_checkpoint_verify. A safetensors file written by another
   tool (no "braid.format") is read without checksums. The caller owns
   *out_reader and releases it with braid_rt_checkpoint_close. */
braid_rt_status_t
braid_rt_checkpoint_open(braid_rt_context_t *ctx, const char *path,
                         braid_rt_checkpoint_reader_t **out_reader);

/* Reads the block of shape local_shape at `offsets` of tensor `name`,
   whose global shape must be `global_shape` (each `ndims` long), into
   `out_data` (row-major). F64 tensors are converted to f32. Fails with
   INVALID_ARGUMENT if the tensor is missing, has another shape or a dtype
   other than F32/F64, or the block leaves it; DATA_CORRUPT if its data does
   not match its checksum or cannot be read back. */
braid_rt_status_t braid_rt_checkpoint_read_block_f32(
    braid_rt_checkpoint_reader_t *reader, const char *name, int ndims,
    const int64_t *global_shape, const int64_t *offsets,
    const int64_t *local_shape, float *out_data);

/* Checks the data of every tensor against its checksum (DATA_CORRUPT
   naming the first bad tensor). */
braid_rt_status_t braid_rt_checkpoint_verify(braid_rt_checkpoint_reader_t *reader);

/* The number of tensors, and the name of tensor i (in the order of their
   data, 0 <= i < count; NULL otherwise). Owned by the reader. */
size_t braid_rt_checkpoint_num_tensors(const braid_rt_checkpoint_reader_t *reader);
const char *
braid_rt_checkpoint_tensor_name(const braid_rt_checkpoint_reader_t *reader,
                                size_t i);

/* The shape of tensor `name`: its number of dimensions in *out_ndims and
   the dimensions in out_shape (room for BRAID_RT_CHECKPOINT_MAX_DIMS).
   INVALID_ARGUMENT if there is no such tensor. */
braid_rt_status_t
braid_rt_checkpoint_tensor_shape(braid_rt_checkpoint_reader_t *reader,
                                 const char *name, int *out_ndims,
                                 int64_t *out_shape);

/* The value of "__metadata__" entry `key`, or NULL if there is none. Owned
   by the reader. */
const char *braid_rt_checkpoint_metadata(const braid_rt_checkpoint_reader_t *reader,
                                         const char *key);

/* Releases the reader. NULL is a no-op. */
void braid_rt_checkpoint_close(braid_rt_checkpoint_reader_t *reader);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_CHECKPOINT_H */

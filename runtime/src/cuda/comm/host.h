/*===- host.h - Host-side logic of the CUDA backend's communication ------===*/
/*
 * The decisions the CUDA backend makes on the host, as pure functions with
 * no CUDA, NCCL or MPI in them, so that host_test.c checks them on machines
 * without a GPU: which local rank and device a process takes, when a wait
 * has timed out, which deferred point-to-point transfers a wait issues,
 * and the compressed collectives' ring schedule.
 * How a mesh splits into axis groups and how messages name an operation are
 * shared with the CPU backend (common/mesh_shape.h, common/op_info.h).
 */
#ifndef BRAID_RT_CUDA_COMM_HOST_H
#define BRAID_RT_CUDA_COMM_HOST_H

#include "braid/rt/status.h"

#include <stddef.h>
#include <stdint.h>

/* getenv, or a fake in tests. */
typedef const char *(*braid_rt_cuda_getenv_fn)(const char *name);

/* Reads this process's rank among the ranks of its node from the launcher's
   environment. The first variable set wins, in this order:
   OMPI_COMM_WORLD_LOCAL_RANK (OpenMPI's mpirun), MPI_LOCALRANKID (MPICH and
   Intel MPI), LOCAL_RANK (torchrun), SLURM_LOCALID (srun): a launcher
   started inside another (mpirun or torchrun in a Slurm allocation) sets
   its own variable beside the outer one, and its value is the right one.
   None set: OK with *out_local_rank = -1 and *out_source = NULL. A set
   variable that is not an integer in 0..INT_MAX: INVALID_ARGUMENT and a
   message naming it in `error`. */
braid_rt_status_t
braid_rt_cuda_local_rank_from_env(braid_rt_cuda_getenv_fn getenv_fn,
                                  int *out_local_rank, const char **out_source,
                                  char *error, size_t capacity);

/* The number of processes a launcher started, from the first variable set
   of WORLD_SIZE (torchrun), OMPI_COMM_WORLD_SIZE, PMI_SIZE (MPICH, Intel
   MPI) and SLURM_NTASKS (srun); 1 when none is set. A value that is not an
   integer in 1..INT_MAX: INVALID_ARGUMENT and a message in `error`. The
   single-process build refuses to start as one of several. */
braid_rt_status_t
braid_rt_cuda_world_size_from_env(braid_rt_cuda_getenv_fn getenv_fn,
                                  int *out_size, const char **out_source,
                                  char *error, size_t capacity);

/* Chooses the device of world rank `world_rank`, local rank `local_rank` of
   `local_size` on its node (`source`: where the local rank came from, a
   variable or "MPI_Comm_split_type"; NULL for a single process), on a node that
   shows `device_count` devices (negative: CUDA could not count them;
   `cuda_error` says why) with CUDA_VISIBLE_DEVICES = `visible_devices` (NULL:
   unset). The device is the local rank, or 0 when the launcher made exactly one
   device visible to the process (srun --gpus-per-task=1). Otherwise, and when
   there is no device, INVALID_ARGUMENT with a message in `error` naming the
   rank, the local rank and the device count. */
braid_rt_status_t
braid_rt_cuda_choose_device(int world_rank, int local_rank, int local_size,
                            const char *source, int device_count,
                            const char *cuda_error, const char *visible_devices,
                            int *out_device, char *error, size_t capacity);

/* Whether a wait that began at `start_s` has run out of `timeout_s` seconds
   at `now_s` (0: never). */
int braid_rt_cuda_timed_out(double start_s, double now_s, double timeout_s);

/* A started transfer that has not been handed to NCCL yet. */
typedef struct {
  int is_send;
  const void *comm; /* identity only */
  int peer;
  int self; /* the peer is this rank */
} braid_rt_cuda_p2p_entry_t;

/* NCCL has no tags: a receive matches the sender's next send to it on the
   same communicator, and a send or receive on the communication stream
   holds up everything issued after it until its peer takes part. So the
   backend defers started transfers, `pending[0..n)` in start order, and
   issues them in groups at every wait and before every other operation:
   every pending send to another rank, plus, when `target` >= 0 is being
   waited for,
    - a receive from another rank: that receive alone, so that receives
      are issued in the order the program needs them, which is the order
      their peer sends them in a consistent schedule (earlier-started ones
      wait for their own wait; a receive's tag is checked when it
      completes);
    - a send or receive of this rank to itself, the j-th pending one of its
      kind on its communicator: the first j pending sends to itself and the
      first j pending receives from itself there. NCCL copies a message to
      oneself only when its send and receive are in the same group, so
      these are issued in matching pairs, never a send alone.
   Sets out_selected[i] to 1 for the entries to issue now, in index order,
   and returns how many. `target` < 0: the sends to other ranks only. */
size_t braid_rt_cuda_p2p_select(const braid_rt_cuda_p2p_entry_t *pending,
                                size_t n, ptrdiff_t target,
                                unsigned char *out_selected);

/* The compressed collectives' ring (compressed.c), step for step the CPU
   backend's (runtime/src/cpu/compressed.c), so that both sum the same
   values in the same order and round them at the same hops: `count`
   elements are cut into `size` chunks, the first count % size one element
   longer; chunk c is [begin, begin + length), as the CPU backend's
   braid_rt_ring_chunk_begin and _length (runtime/src/common/trace_events.h)
   cut them (braid_rt_cuda_host does not link braid_rt_common). */
size_t braid_rt_cuda_ring_chunk_begin(size_t count, int size, int c);
size_t braid_rt_cuda_ring_chunk_length(size_t count, int size, int c);

/* Step `step` (0..size-2) of the ring on rank `rank`: the chunk it sends to
   rank + 1 (rounded to 16 bits) and the chunk it receives from rank - 1.
   In the reduce-scatter half (gather 0) it adds what it receives to its own
   f32 values, so that after size - 1 steps chunk `rank` holds the whole
   sum, accumulated from rank + 1 round to `rank` itself; in the all_gather
   half (gather 1) it replaces its values with the owner's rounded sum. */
void braid_rt_cuda_ring_step(int size, int rank, int step, int gather,
                             int *out_send_chunk, int *out_recv_chunk);

/* The 16-bit words of device staging a ring over `count` elements needs:
   a send and a receive buffer of the largest chunk each (at least one
   word each, so that a buffer is never empty). */
size_t braid_rt_cuda_ring_staging_words(size_t count, int size);

#endif /* BRAID_RT_CUDA_COMM_HOST_H */

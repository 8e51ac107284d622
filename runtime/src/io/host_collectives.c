/*===- host_collectives.c - The writer's collectives on host buffers -----===*/
/*
 * The checkpoint writer communicates host buffers: flags, block lists, the
 * outcome message, and the blocks a program staged to the host. The
 * collectives take device memory (memory.h): where device memory is host
 * memory (the CPU backend) that is the host buffer itself; elsewhere (the
 * CUDA backend, whose NCCL moves device memory only and refuses a host
 * pointer) every call goes through a device buffer, copied on the default
 * stream and waited for with the context's timeout
 * (braid_rt_stream_synchronize), so that checkpoints are written by the
 * same code, byte for byte, on every backend.
 */

#include "internal.h"

#include "braid/rt/collectives.h"
#include "braid/rt/memory.h"

void braid_rt_io_comm_init(braid_rt_io_comm_t *c, braid_rt_context_t *ctx,
                           braid_rt_comm_t *comm) {
  c->ctx = ctx;
  c->comm = comm;
  c->device = NULL;
  c->capacity = 0;
}

void braid_rt_io_comm_release(braid_rt_io_comm_t *c) {
  braid_rt_memory_free(c->device);
  c->device = NULL;
  c->capacity = 0;
}

static int staged(void) { return !braid_rt_memory_is_host(); }

/* A device buffer of at least `bytes`, kept for the next call; `in` bytes
   of `host` copied to its start. */
static braid_rt_status_t stage_in(braid_rt_io_comm_t *c, const char *what,
                                  size_t bytes, const void *host, size_t in,
                                  char **out) {
  *out = NULL;
  braid_rt_status_t s;
  if (bytes > c->capacity || !c->device) {
    braid_rt_io_comm_release(c);
    if (bytes < 64)
      bytes = 64;
    s = braid_rt_memory_alloc(bytes, &c->device);
    if (s != BRAID_RT_OK)
      return braid_rt_fail(c->ctx, s,
                           "%s: no device buffer of %zu bytes to stage it "
                           "through (%s)",
                           what, bytes, braid_rt_status_string(s));
    c->capacity = bytes;
  }
  s = braid_rt_memory_copy_to_device(NULL, c->device, host, in);
  if (s != BRAID_RT_OK)
    return braid_rt_fail(c->ctx, s, "%s: copying %zu bytes to the device: %s",
                         what, in, braid_rt_status_string(s));
  *out = (char *)c->device;
  return BRAID_RT_OK;
}

/* Waits for the operation (`status`: how it was issued), then copies
   `bytes` from `device` to `host` (none when host is NULL). */
static braid_rt_status_t stage_out(braid_rt_io_comm_t *c, const char *what,
                                   braid_rt_status_t status, void *host,
                                   const void *device, size_t bytes) {
  if (status != BRAID_RT_OK)
    return status;
  if (host) {
    status = braid_rt_memory_copy_to_host(NULL, host, device, bytes);
    if (status != BRAID_RT_OK)
      return braid_rt_fail(c->ctx, status,
                           "%s: copying %zu bytes to the host: %s", what, bytes,
                           braid_rt_status_string(status));
  }
  /* Also where a blocking collective's timeout is seen on CUDA; the
     backend's message names the operation. */
  status = braid_rt_stream_synchronize(NULL);
  if (status != BRAID_RT_OK)
    return status;
  status = braid_rt_memory_synchronize(NULL);
  if (status != BRAID_RT_OK)
    return braid_rt_fail(c->ctx, status, "%s: synchronising: %s", what,
                         braid_rt_status_string(status));
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_io_all_reduce_sum_f64(braid_rt_io_comm_t *c,
                                                 double *buf, size_t count) {
  if (!staged())
    return braid_rt_all_reduce_sum_f64(c->comm, buf, count, NULL);
  size_t bytes = count * sizeof(double);
  char *device;
  braid_rt_status_t s =
      stage_in(c, "checkpoint all_reduce", bytes, buf, bytes, &device);
  if (s == BRAID_RT_OK)
    s = braid_rt_all_reduce_sum_f64(c->comm, (double *)device, count, NULL);
  return stage_out(c, "checkpoint all_reduce", s, buf, device, bytes);
}

braid_rt_status_t braid_rt_io_broadcast_f64(braid_rt_io_comm_t *c, double *buf,
                                            size_t count, int root) {
  if (!staged())
    return braid_rt_broadcast_f64(c->comm, buf, count, root, NULL);
  size_t bytes = count * sizeof(double);
  char *device;
  braid_rt_status_t s =
      stage_in(c, "checkpoint broadcast", bytes, buf, bytes, &device);
  if (s == BRAID_RT_OK)
    s = braid_rt_broadcast_f64(c->comm, (double *)device, count, root, NULL);
  return stage_out(c, "checkpoint broadcast", s, buf, device, bytes);
}

braid_rt_status_t braid_rt_io_all_gather_f64(braid_rt_io_comm_t *c,
                                             const double *send, double *recv,
                                             size_t send_count) {
  if (!staged())
    return braid_rt_all_gather_f64(c->comm, send, recv, send_count, NULL);
  size_t send_bytes = send_count * sizeof(double);
  size_t recv_bytes = (size_t)braid_rt_comm_size(c->comm) * send_bytes;
  char *device;
  braid_rt_status_t s =
      stage_in(c, "checkpoint all_gather", send_bytes + recv_bytes, send,
               send_bytes, &device);
  if (s == BRAID_RT_OK)
    s = braid_rt_all_gather_f64(c->comm, (const double *)device,
                                (double *)(device + send_bytes), send_count,
                                NULL);
  return stage_out(c, "checkpoint all_gather", s, recv, device + send_bytes,
                   recv_bytes);
}

braid_rt_status_t braid_rt_io_send_f32(braid_rt_io_comm_t *c, const float *buf,
                                       size_t count, int peer, int tag) {
  if (!staged())
    return braid_rt_send_f32(c->comm, buf, count, peer, tag, NULL);
  size_t bytes = count * sizeof(float);
  char *device;
  braid_rt_status_t s =
      stage_in(c, "checkpoint send", bytes, buf, bytes, &device);
  if (s == BRAID_RT_OK)
    s = braid_rt_send_f32(c->comm, (const float *)device, count, peer, tag,
                          NULL);
  /* The device buffer is reused by the next call: wait for this one. */
  return stage_out(c, "checkpoint send", s, NULL, device, 0);
}

braid_rt_status_t braid_rt_io_recv_f32(braid_rt_io_comm_t *c, float *buf,
                                       size_t count, int peer, int tag) {
  if (!staged())
    return braid_rt_recv_f32(c->comm, buf, count, peer, tag, NULL);
  size_t bytes = count * sizeof(float);
  char *device;
  braid_rt_status_t s = stage_in(c, "checkpoint recv", bytes, NULL, 0, &device);
  if (s == BRAID_RT_OK)
    s = braid_rt_recv_f32(c->comm, (float *)device, count, peer, tag, NULL);
  return stage_out(c, "checkpoint recv", s, buf, device, bytes);
}

/*===- staging_device.c - A fake device whose memory the host cannot touch ===*/
/*
 * memory.h for tests of the program runtime's host staging on a machine
 * without a GPU. Device memory is not host memory (is_host() is 0):
 *  - buffers are whole pages mapped PROT_NONE, so host code that reads or
 *    writes one directly faults; the handler names the address and exits 3;
 *  - the copies are deferred until braid_rt_memory_synchronize (or the next
 *    kernel: stream order), and copy_to_host poisons its destination at
 *    once, so reading a copy before synchronising sees 0xff bytes;
 *  - the kernels and collectives the test's code paths call are wrapped
 *    (-Wl,--wrap=NAME): each checks that its buffer is device memory, runs
 *    the pending copies, and runs the real CPU function with the pages
 *    opened for it.
 */
#define _GNU_SOURCE
#include "braid/rt/collectives.h"
#include "braid/rt/kernels.h"
#include "braid/rt/memory.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { MAX_REGIONS = 4096, MAX_COPIES = 4096 };

static struct {
  char *base;
  size_t size;
} regions[MAX_REGIONS];
static int num_regions;

static struct {
  void *dst;
  const void *src;
  size_t bytes;
} copies[MAX_COPIES];
static int num_copies;

static size_t page_round(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

static int find_region(const void *p) {
  for (int i = 0; i < num_regions; ++i)
    if (regions[i].base && (const char *)p >= regions[i].base &&
        (const char *)p < regions[i].base + regions[i].size)
      return i;
  return -1;
}

static void protect_all(int prot) {
  for (int i = 0; i < num_regions; ++i)
    if (regions[i].base)
      mprotect(regions[i].base, regions[i].size, prot);
}

static void on_fault(int sig, siginfo_t *info, void *context) {
  (void)context;
  if (find_region(info->si_addr) >= 0) {
    static const char msg[] = "staging_device: the host touched device "
                              "memory directly (a missing staging copy)\n";
    if (write(2, msg, sizeof msg - 1) < 0)
      _exit(3);
    _exit(3);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_handler(void) {
  static int installed;
  if (installed)
    return;
  installed = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}

/* Runs the pending copies, as a stream would before what follows them. */
static void drain(void) {
  protect_all(PROT_READ | PROT_WRITE);
  for (int i = 0; i < num_copies; ++i)
    memcpy(copies[i].dst, copies[i].src, copies[i].bytes);
  num_copies = 0;
  protect_all(PROT_NONE);
}

static void require_device(const void *p, const char *what) {
  if (find_region(p) < 0) {
    fprintf(stderr, "staging_device: %s was given host memory %p, not device "
                    "memory\n", what, p);
    exit(3);
  }
}

braid_rt_status_t braid_rt_memory_alloc(size_t bytes, void **out_ptr) {
  install_handler();
  *out_ptr = NULL;
  if (num_regions == MAX_REGIONS)
    return BRAID_RT_OUT_OF_MEMORY;
  size_t size = page_round(bytes ? bytes : 1);
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return BRAID_RT_OUT_OF_MEMORY;
  regions[num_regions].base = (char *)p;
  regions[num_regions].size = size;
  ++num_regions;
  *out_ptr = p;
  return BRAID_RT_OK;
}

void braid_rt_memory_free(void *ptr) {
  int i = ptr ? find_region(ptr) : -1;
  if (i < 0)
    return;
  drain();
  munmap(regions[i].base, regions[i].size);
  regions[i].base = NULL;
}

static braid_rt_status_t defer(void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return BRAID_RT_INVALID_ARGUMENT;
  if (!bytes)
    return BRAID_RT_OK;
  if (num_copies == MAX_COPIES)
    drain();
  copies[num_copies].dst = dst;
  copies[num_copies].src = src;
  copies[num_copies].bytes = bytes;
  ++num_copies;
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_memory_copy_to_device(braid_rt_stream_t *stream,
                                                 void *device_dst,
                                                 const void *host_src,
                                                 size_t bytes) {
  (void)stream;
  require_device(device_dst, "copy_to_device's destination");
  return defer(device_dst, host_src, bytes);
}

braid_rt_status_t braid_rt_memory_copy_to_host(braid_rt_stream_t *stream,
                                               void *host_dst,
                                               const void *device_src,
                                               size_t bytes) {
  (void)stream;
  require_device(device_src, "copy_to_host's source");
  if (find_region(host_dst) >= 0) {
    fprintf(stderr, "staging_device: copy_to_host into device memory\n");
    exit(3);
  }
  memset(host_dst, 0xff, bytes); /* what a read before synchronising sees */
  return defer(host_dst, device_src, bytes);
}

braid_rt_status_t braid_rt_memory_copy(braid_rt_stream_t *stream, void *dst,
                                       const void *src, size_t bytes) {
  (void)stream;
  require_device(dst, "memory_copy's destination");
  require_device(src, "memory_copy's source");
  return defer(dst, src, bytes);
}

braid_rt_status_t braid_rt_memory_synchronize(braid_rt_stream_t *stream) {
  (void)stream;
  drain();
  return BRAID_RT_OK;
}

int braid_rt_memory_is_host(void) { return 0; }

/*--- Wrapped kernels and collectives --------------------------------------*/

void __real_braid_rt_fill_f32(braid_rt_stream_t *stream, float value,
                              int64_t count, float *y);
void __wrap_braid_rt_fill_f32(braid_rt_stream_t *stream, float value,
                              int64_t count, float *y) {
  require_device(y, "braid_rt_fill_f32");
  drain();
  protect_all(PROT_READ | PROT_WRITE);
  __real_braid_rt_fill_f32(stream, value, count, y);
  protect_all(PROT_NONE);
}

braid_rt_status_t __real_braid_rt_all_reduce_sum_f32(braid_rt_comm_t *comm,
                                                     float *buf, size_t count,
                                                     braid_rt_stream_t *stream);
braid_rt_status_t __wrap_braid_rt_all_reduce_sum_f32(braid_rt_comm_t *comm,
                                                     float *buf, size_t count,
                                                     braid_rt_stream_t *stream) {
  require_device(buf, "braid_rt_all_reduce_sum_f32");
  drain();
  protect_all(PROT_READ | PROT_WRITE);
  braid_rt_status_t status =
      __real_braid_rt_all_reduce_sum_f32(comm, buf, count, stream);
  protect_all(PROT_NONE);
  return status;
}

/* The checkpoint writer's collectives (braid_rt_io), which stage their host
   buffers through device memory where device memory is not host memory. */
#define WRAP_COLLECTIVE(name, params, args, buf)                               \
  braid_rt_status_t __real_##name params;                                      \
  braid_rt_status_t __wrap_##name params {                                     \
    require_device(buf, #name);                                                \
    drain();                                                                   \
    protect_all(PROT_READ | PROT_WRITE);                                       \
    braid_rt_status_t status = __real_##name args;                             \
    protect_all(PROT_NONE);                                                    \
    return status;                                                             \
  }
WRAP_COLLECTIVE(braid_rt_all_reduce_sum_f64,
                (braid_rt_comm_t * comm, double *buf, size_t count,
                 braid_rt_stream_t *stream),
                (comm, buf, count, stream), buf)
WRAP_COLLECTIVE(braid_rt_broadcast_f64,
                (braid_rt_comm_t * comm, double *buf, size_t count, int root,
                 braid_rt_stream_t *stream),
                (comm, buf, count, root, stream), buf)
braid_rt_status_t __real_braid_rt_all_gather_f64(braid_rt_comm_t *comm,
                                                 const double *send,
                                                 double *recv, size_t count,
                                                 braid_rt_stream_t *stream);
braid_rt_status_t __wrap_braid_rt_all_gather_f64(braid_rt_comm_t *comm,
                                                 const double *send,
                                                 double *recv, size_t count,
                                                 braid_rt_stream_t *stream) {
  require_device(send, "braid_rt_all_gather_f64's send");
  require_device(recv, "braid_rt_all_gather_f64's recv");
  drain();
  protect_all(PROT_READ | PROT_WRITE);
  braid_rt_status_t status =
      __real_braid_rt_all_gather_f64(comm, send, recv, count, stream);
  protect_all(PROT_NONE);
  return status;
}
WRAP_COLLECTIVE(braid_rt_send_f32,
                (braid_rt_comm_t * comm, const float *buf, size_t count,
                 int peer, int tag, braid_rt_stream_t *stream),
                (comm, buf, count, peer, tag, stream), buf)
WRAP_COLLECTIVE(braid_rt_recv_f32,
                (braid_rt_comm_t * comm, float *buf, size_t count, int peer,
                 int tag, braid_rt_stream_t *stream),
                (comm, buf, count, peer, tag, stream), buf)

/* Id checks as a device backend makes them: the check runs (on the device's
   memory) but a bad id is only recorded, and braid_rt_poll_bad_ids, which
   the real CPU backend never needs, reports it. */
braid_rt_status_t __real_braid_rt_check_ids(braid_rt_stream_t *stream,
                                            const void *ids, int ids_i64,
                                            int64_t count, int64_t range,
                                            int64_t site,
                                            braid_rt_bad_id_t *bad);
static braid_rt_bad_id_t recorded_bad_id;
static int have_bad_id;
braid_rt_status_t __wrap_braid_rt_check_ids(braid_rt_stream_t *stream,
                                            const void *ids, int ids_i64,
                                            int64_t count, int64_t range,
                                            int64_t site,
                                            braid_rt_bad_id_t *bad) {
  (void)bad;
  require_device(ids, "braid_rt_check_ids");
  drain();
  protect_all(PROT_READ | PROT_WRITE);
  braid_rt_bad_id_t found;
  braid_rt_status_t status = __real_braid_rt_check_ids(
      stream, ids, ids_i64, count, range, site, &found);
  protect_all(PROT_NONE);
  if (status == BRAID_RT_INVALID_ARGUMENT && !have_bad_id) {
    recorded_bad_id = found;
    have_bad_id = 1;
  }
  return status == BRAID_RT_INVALID_ARGUMENT ? BRAID_RT_OK : status;
}

braid_rt_status_t __wrap_braid_rt_poll_bad_ids(braid_rt_stream_t *stream,
                                               braid_rt_bad_id_t *bad) {
  (void)stream;
  drain();
  if (!have_bad_id)
    return BRAID_RT_OK;
  have_bad_id = 0;
  if (bad)
    *bad = recorded_bad_id;
  return BRAID_RT_INVALID_ARGUMENT;
}

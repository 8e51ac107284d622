/*===- staging.c - The host's view of a program's device memory ----------===*/
/*
 * Where device memory is host memory (the CPU backend) a view is the device
 * buffer itself: no copy, no synchronisation, so CPU programs run exactly
 * as when they touched their buffers directly. Otherwise every view is a
 * host copy on the program's stream, synchronised before the host reads it
 * and before the host buffer is released.
 */

#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void staging_check(braid_rt_status_t status, const char *what) {
  if (status == BRAID_RT_OK)
    return;
  if (braid_rt_program_rank >= 0)
    fprintf(stderr, "error: rank %d: staging %s through host memory: %s\n",
            braid_rt_program_rank, what, braid_rt_status_string(status));
  else
    fprintf(stderr, "error: staging %s through host memory: %s\n", what,
            braid_rt_status_string(status));
  braid_rt_program_exit_error();
}

void braid_rt_program_to_host(void *host, const void *device, size_t bytes,
                              const char *what) {
  braid_rt_stream_t *stream = braid_rt_program_stream();
  staging_check(braid_rt_memory_copy_to_host(stream, host, device, bytes),
                what);
  staging_check(braid_rt_memory_synchronize(stream), what);
}

void braid_rt_program_to_device(void *device, const void *host, size_t bytes,
                                const char *what) {
  braid_rt_stream_t *stream = braid_rt_program_stream();
  staging_check(braid_rt_memory_copy_to_device(stream, device, host, bytes),
                what);
  /* The caller may reuse or release `host` when this returns. */
  staging_check(braid_rt_memory_synchronize(stream), what);
}

void *braid_rt_program_map(const void *device, size_t bytes, int read,
                           const char *what) {
  if (braid_rt_memory_is_host())
    return (void *)(uintptr_t)device; /* strchr's contract: see program.h */
  void *host = malloc(bytes ? bytes : 1);
  if (!host)
    staging_check(BRAID_RT_OUT_OF_MEMORY, what);
  if (read)
    braid_rt_program_to_host(host, device, bytes, what);
  return host;
}

void braid_rt_program_unmap(void *host, const void *device, size_t bytes,
                            int write, const char *what) {
  if (host == device)
    return; /* device memory is host memory: the view was the buffer */
  if (write)
    braid_rt_program_to_device((void *)(uintptr_t)device, host, bytes, what);
  free(host);
}

static double element(const void *p, int64_t i, int bytes, int is_float) {
  if (is_float)
    return (double)((const float *)p)[i];
  return bytes == 8 ? (double)((const int64_t *)p)[i]
                    : (double)((const int32_t *)p)[i];
}

double braid_rt_program_value(const void *device, int64_t i, int bytes,
                              int is_float) {
  char host[8];
  braid_rt_program_to_host(host, (const char *)device + i * bytes,
                           (size_t)bytes, "a result");
  return element(host, 0, bytes, is_float);
}

void braid_rt_program_print_tensor(const char *name, const void *device,
                                   int64_t count, int bytes, int is_float,
                                   int dump) {
  size_t size = (size_t)count * (size_t)bytes;
  void *host = braid_rt_program_map(device, size, /*read=*/1, name);
  double sum = 0, squares = 0;
  for (int64_t j = 0; j < count; ++j) {
    double v = element(host, j, bytes, is_float);
    sum += v;
    squares += v * v;
  }
  printf("%s sum %.17g l2 %.17g\n", name, sum, sqrt(squares));
  for (int64_t j = 0; dump && j < count; ++j)
    printf("%s%.17g%s", j % 8 ? " " : "  ", element(host, j, bytes, is_float),
           j % 8 == 7 || j + 1 == count ? "\n" : "");
  braid_rt_program_unmap(host, device, size, /*write=*/0, name);
}

void braid_rt_program_set_step(void *device, int bytes, int64_t step) {
  int32_t step32 = (int32_t)step;
  braid_rt_program_to_device(device, bytes == 8 ? (const void *)&step
                                                : (const void *)&step32,
                             (size_t)bytes, "the step");
}

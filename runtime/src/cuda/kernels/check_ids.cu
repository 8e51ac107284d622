//===- check_ids.cu - Id range checks that stay on the device -------------===//
//
// braid_rt_check_ids enqueues a kernel that records the first bad id it
// claims in a per-device record (an atomicCAS on `claimed`: with several
// bad ids, which one is recorded is a race, but it is always a bad one with
// its true position); braid_rt_poll_bad_ids reads and clears the record once
// per step. The ids never travel to the host, and nothing synchronises
// before the poll.
//
//===----------------------------------------------------------------------===//

#include "backend.h"

#include "braid/rt/cuda.h"
#include "braid/rt/kernels.h"

#include <cuda_runtime.h>

namespace {

struct BadIdRecord {
  int claimed;
  long long site, id, position, count, range;
};

// One per device (a __device__ variable exists once per device).
__device__ BadIdRecord braidRtCudaBadId;

BadIdRecord *deviceRecord() {
  thread_local braid_rt_cuda::DeviceSymbolCache cache;
  return (BadIdRecord *)braid_rt_cuda::deviceSymbolAddress(&braidRtCudaBadId,
                                                           cache);
}

template <class T>
__global__ void checkIdsKernel(const T *ids, int64_t count, int64_t range,
                               int64_t site, BadIdRecord *record) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t id = (int64_t)ids[i];
    if ((id < 0 || id >= range) && atomicCAS(&record->claimed, 0, 1) == 0) {
      record->site = site;
      record->id = id;
      record->position = i;
      record->count = count;
      record->range = range;
    }
  }
}

} // namespace

braid_rt_status_t braid_rt_check_ids(braid_rt_stream_t *stream,
                                     const void *ids, int ids_i64,
                                     int64_t count, int64_t range,
                                     int64_t site, braid_rt_bad_id_t *bad) {
  (void)bad; // reported by the poll
  if (count <= 0)
    return BRAID_RT_OK;
  BadIdRecord *record = deviceRecord();
  if (!record)
    return BRAID_RT_INTERNAL;
  constexpr int64_t kThreads = 256, kMaxBlocks = 1 << 16;
  int64_t blocks = (count + kThreads - 1) / kThreads;
  unsigned grid = (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  cudaStream_t s = braid_rt_cuda_stream(stream);
  if (ids_i64)
    checkIdsKernel<<<grid, kThreads, 0, s>>>((const int64_t *)ids, count,
                                              range, site, record);
  else
    checkIdsKernel<<<grid, kThreads, 0, s>>>((const int32_t *)ids, count,
                                              range, site, record);
  return cudaGetLastError() == cudaSuccess ? BRAID_RT_OK : BRAID_RT_INTERNAL;
}

braid_rt_status_t braid_rt_poll_bad_ids(braid_rt_stream_t *stream,
                                        braid_rt_bad_id_t *bad) {
  BadIdRecord *record = deviceRecord();
  if (!record)
    return BRAID_RT_INTERNAL;
  BadIdRecord host;
  cudaStream_t s = braid_rt_cuda_stream(stream);
  if (cudaMemcpyAsync(&host, record, sizeof host, cudaMemcpyDeviceToHost, s) !=
          cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess) {
    (void)cudaGetLastError();
    return BRAID_RT_INTERNAL;
  }
  if (!host.claimed)
    return BRAID_RT_OK;
  if (cudaMemsetAsync(record, 0, sizeof host, s) != cudaSuccess) {
    (void)cudaGetLastError();
    return BRAID_RT_INTERNAL;
  }
  if (bad) {
    bad->site = host.site;
    bad->id = host.id;
    bad->position = host.position;
    bad->count = host.count;
    bad->range = host.range;
  }
  return BRAID_RT_INVALID_ARGUMENT;
}

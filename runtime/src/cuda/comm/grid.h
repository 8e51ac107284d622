//===- grid.h - The launch grid of the comm layer's kernels -*- C++ -*-===//
//
// The elementwise kernels of compressed_kernels.cu and powersgd_kernels.cu
// stride by the grid, so one launch of at most kMaxBlocks blocks of kThreads
// covers any n.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RT_CUDA_COMM_GRID_H
#define BRAID_RT_CUDA_COMM_GRID_H

#include <stddef.h>

namespace braid_rt_cuda_comm {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 65535;

inline unsigned blocksFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

} // namespace braid_rt_cuda_comm

#endif // BRAID_RT_CUDA_COMM_GRID_H

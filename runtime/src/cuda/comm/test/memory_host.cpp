//===- memory_host.cpp - memory.cu built by the host compiler -------------===//
//
// The CUDA backend's memory.h (runtime/src/cuda/kernels/memory.cu) uses the
// CUDA runtime API only, no kernels: compiled here by the host C++ compiler
// and linked with fake_device.c, it runs on a machine without a GPU, so
// that the CUDA target's staging of checkpoints is tested with its own code
// (runtime-checkpoint-targets-cuda-fake).
//
//===----------------------------------------------------------------------===//

#include "../../kernels/memory.cu"

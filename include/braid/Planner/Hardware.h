//===- Hardware.h - Devices and networks for planning ----------*- C++ -*-===//
//
// What the planner knows about a machine: a device's peak FLOP/s per element
// type, the fraction of peak that each class of op achieves, its memory
// bandwidth and capacity, and the network as link levels (within a node,
// across nodes), each with a latency (alpha) and a bandwidth (beta) per
// collective kind. Descriptions are JSON files (share/braid/hardware/*.json,
// docs/planner.md#hardware-files), written by hand from vendor figures or
// by `braid-plan calibrate` from measurements.
//
// Collective times follow the ring model (Thakur et al. 2005; nccl-tests'
// bus bandwidth): on n devices,
//   all_reduce      2(n-1) alpha + 2(n-1)/n * bytes / beta
//   all_gather      (n-1) alpha  + (n-1)/n * bytes / beta   (bytes: the
//   reduce_scatter  (n-1) alpha  + (n-1)/n * bytes / beta    full tensor)
//   send_recv       alpha + bytes / beta
// so beta is the bus bandwidth per device, the figure nccl-tests reports.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PLANNER_HARDWARE_H
#define BRAID_PLANNER_HARDWARE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace mlir::braid::plan {

/// Classes of ops with their own achieved efficiency.
enum class OpClass {
  /// Matrix products (braid.matmul and its gradients): compute bound.
  Matmul,
  /// The attention core's forward (q k^T, softmax, p v): its products'
  /// FLOPs at its efficiency, plus its bytes at attentionBandwidth.
  Attention,
  /// Everything else that is not row-wise or transcendental (elementwise,
  /// embedding, data movement): bound by memory bandwidth.
  Memory,
  /// Row-wise reductions (RowReductionOpInterface: norms, softmax and
  /// their gradients): costed by bytes like Memory, at their own
  /// efficiency. On a CPU their per-row statistics and double accumulations
  /// make them several times slower per byte than a streaming kernel.
  RowWise,
  /// Row-wise reductions over class scores with integer labels (a loss such
  /// as cross-entropy and its gradient): by bytes, at their own efficiency.
  /// An exponential per score and little else per byte read: on a CPU
  /// slower per byte again than a norm, and over a large vocabulary most of
  /// a GPT head's memory-bound time.
  Loss,
  /// The optimizer step over a rank's parameters (the gradient norm's read
  /// of the gradients, then AdamW's update): by bytes, at its own
  /// efficiency. No op of a model's forward and backward is of this class;
  /// the plan cost model prices the step with it. On a CPU the update's
  /// square root and division per element (in double) make it slower per
  /// byte than memcpy or an add (7.9 GB/s against 15 and 22 here).
  Optimizer,
  /// Elementwise ops that evaluate a transcendental function per element
  /// (OpTrait::braid::Transcendental: GELU, SiLU, exp and their gradients):
  /// by bytes, at their own efficiency. On a CPU GELU's tanh makes it
  /// several times slower per byte than an add.
  Transcendental,
  /// The attention core's gradients (braid.attention_grad: the four
  /// products of its backward and the softmax's gradient): like Attention,
  /// at their own efficiency and attentionBackwardBandwidth. On this CPU
  /// the backward kernel takes 3.1 times the forward's time at every
  /// sequence length measured (16..512), though it counts twice its FLOPs.
  AttentionBackward,
};
constexpr int kNumOpClasses = 8;
llvm::StringRef getOpClassName(OpClass c);
/// Whether a class is costed by its bytes over memory bandwidth (else by
/// its FLOPs over peak).
inline bool isBytesBound(OpClass c) {
  return c == OpClass::Memory || c == OpClass::RowWise || c == OpClass::Loss ||
         c == OpClass::Optimizer || c == OpClass::Transcendental;
}

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, SendRecv };
constexpr int kNumCollectiveKinds = 4;
/// "all_reduce", "all_gather", "reduce_scatter", "send_recv": the keys of
/// hardware files.
llvm::StringRef getCollectiveKindName(CollectiveKind k);

/// Latency and bandwidth of one collective kind on one link level.
struct LinkCost {
  /// Seconds per ring step.
  double alpha = 0;
  /// Bus bandwidth per device, bytes per second.
  double beta = 1;
};

/// Time of collective `kind` over `bytes` (the whole tensor) on `n` devices
/// under `cost` (the ring formulas above). Zero when n <= 1 or bytes <= 0.
double getCollectiveTime(const LinkCost &cost, CollectiveKind kind,
                         double bytes, int n);

/// One level of the network.
struct LinkLevel {
  std::string name;
  LinkCost costs[kNumCollectiveKinds];
  const LinkCost &get(CollectiveKind k) const { return costs[(int)k]; }
};

struct Hardware {
  /// Short name ("a100-80g") and free text on where the figures come from.
  std::string name;
  std::string description;
  std::string source;
  /// Peak FLOP/s per element type name ("bf16", "f16", "f32", "f64").
  std::map<std::string, double> peakFlops;
  /// Achieved fraction of peak (Matmul, Attention) or of memory bandwidth
  /// (the others), per op class, in (0, 1]. A file without "rowwise",
  /// "loss", "optimizer" or "transcendental" gives those the memory
  /// efficiency; one without "attention_backward", the attention's.
  double efficiency[kNumOpClasses] = {1, 1, 1, 1, 1, 1, 1, 1};
  /// Device memory bandwidth, bytes/s.
  double memoryBandwidth = 1;
  /// The rate (bytes/s) at which the attention forward and backward
  /// kernels stream their tensors beside their products: what each query
  /// row costs whatever the sequence (the softmax's pass over the row, its
  /// statistics, loading and rescaling q, k, v): an attention op takes its
  /// FLOPs over peak x efficiency plus its bytes over this rate. On this
  /// CPU the forward at sequence 64 runs at two thirds of its rate at 256
  /// for that reason. 0 (no such term) in files that do not give it.
  double attentionBandwidth = 0;
  double attentionBackwardBandwidth = 0;
  /// Device memory, bytes.
  double deviceMemory = 0;
  /// Memory set aside per device for the runtime, library workspaces and
  /// fragmentation, bytes.
  double workspaceBytes = 0;
  int devicesPerNode = 1;
  /// Devices of a node that compute at full speed at the same time: fewer
  /// than devicesPerNode where devices are ranks sharing cores (this CPU
  /// machine with more ranks than cores / threads per rank); 0: all of them.
  /// The cost model then shares the node's compute among its devices: a
  /// step takes at least the node's work over this many devices, and the
  /// optimizer steps of all devices run at once on them.
  int concurrentDevicesPerNode = 0;
  /// Seconds each kernel costs beyond its work (the call, its checks, a
  /// parallel region or a GPU launch), per op the cost interface counts:
  /// what makes small micro-batches slower per sample than their FLOPs and
  /// bytes say. 0 in files that do not give it.
  double kernelOverhead = 0;
  /// Seconds a blocking collective or pipeline transfer waits, on average,
  /// for peers that the operating system has descheduled, when devices share
  /// cores (concurrentDevicesPerNode below the devices of the plan's node):
  /// added to each tp, pp and dp collective of such plans. 0 in files that
  /// do not give it.
  double descheduledWait = 0;
  /// Copies of each activation a repeated layer keeps for the backward
  /// (each reads and writes its bytes at memoryBandwidth, a copy's rate,
  /// and is a kernel): Braid's compiled layers copy it into the repeat's stack
  /// in F and out of it in B (2); the first copy is costed in F, the others in
  /// B. 0 (a framework that keeps references) in files that do not give it.
  double savedActivationCopies = 0;
  /// Links between devices of one node, and between nodes (per device).
  LinkLevel intraNode;
  LinkLevel interNode;

  /// Peak FLOP/s for `dtype`, or an error naming the types the file has.
  llvm::Expected<double> getPeakFlops(llvm::StringRef dtype) const;
  double getEfficiency(OpClass c) const { return efficiency[(int)c]; }
  /// Whether `devices` devices (a plan's, filling nodes of devicesPerNode)
  /// share cores: fewer of a node's devices compute at once than it holds.
  bool sharesCores(int devices) const {
    int node = std::min(devicesPerNode, devices);
    return concurrentDevicesPerNode > 0 && concurrentDevicesPerNode < node;
  }
  /// The level a group uses: within a node if all its devices are in one.
  const LinkLevel &getLevel(bool spansNodes) const {
    return spansNodes ? interNode : intraNode;
  }
};

/// Parses a hardware description. Errors are located:
/// "FILE: hardware.efficiency.matmul: expected a number in (0, 1], got 1.5".
llvm::Expected<Hardware> parseHardware(llvm::StringRef json,
                                       llvm::StringRef fileName);

/// Reads `nameOrPath`: a path to a JSON file, or the name of a shipped
/// description ("a100-80g", "h100-80g", "h200", "cpu-local") looked up in
/// the hardware directories (getHardwareSearchPath).
llvm::Expected<Hardware> loadHardware(llvm::StringRef nameOrPath);

/// Where shipped descriptions are looked for, in order: $BRAID_HARDWARE_DIR,
/// <dir of the running tool>/../share/braid/hardware, and the source tree's
/// share/braid/hardware.
std::vector<std::string> getHardwareSearchPath();

/// Names of the shipped descriptions found on the search path.
std::vector<std::string> listHardware();

/// Writes `hw` as a JSON file that parseHardware reads back.
void writeHardware(llvm::raw_ostream &os, const Hardware &hw);

} // namespace mlir::braid::plan

#endif // BRAID_PLANNER_HARDWARE_H

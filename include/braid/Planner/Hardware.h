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

#include <map>
#include <string>
#include <vector>

namespace mlir::braid::plan {

/// Classes of ops with their own achieved efficiency.
enum class OpClass {
  /// Matrix products (braid.matmul and its gradients): compute bound.
  Matmul,
  /// The attention core (q k^T, softmax, p v and their gradients).
  Attention,
  /// Everything else (elementwise, norms, softmax, embedding, loss): bound
  /// by memory bandwidth.
  Memory,
};
constexpr int kNumOpClasses = 3;
llvm::StringRef getOpClassName(OpClass c);

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
  /// (Memory), per op class, in (0, 1].
  double efficiency[kNumOpClasses] = {1, 1, 1};
  /// Device memory bandwidth, bytes/s.
  double memoryBandwidth = 1;
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
  /// Links between devices of one node, and between nodes (per device).
  LinkLevel intraNode;
  LinkLevel interNode;

  /// Peak FLOP/s for `dtype`, or an error naming the types the file has.
  llvm::Expected<double> getPeakFlops(llvm::StringRef dtype) const;
  double getEfficiency(OpClass c) const { return efficiency[(int)c]; }
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

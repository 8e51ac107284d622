//===- Calibration.h - Fitting hardware figures to measurements -*- C++ -*-===//
//
// `braid-plan calibrate` times GEMMs, an elementwise kernel and MPI
// collectives on this machine; these functions turn the timings into a
// hardware description's figures.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PLANNER_CALIBRATION_H
#define BRAID_PLANNER_CALIBRATION_H

#include "braid/Planner/Hardware.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::braid::plan {

/// One timing: a collective (or transfer) of `bytes` took `seconds`.
struct TimingSample {
  double bytes = 0;
  double seconds = 0;
};

/// Fit of the ring model of getCollectiveTime (alpha per ring step, beta
/// the bus bandwidth) to timings of `kind` on `n` ranks, by least squares
/// in relative error (each timing weighted by 1 / t^2, so that small sizes
/// fix the latency and large ones the bandwidth), after bounding each
/// size's time by the fastest time of any larger size (noise on a busy
/// machine only ever adds time). Fails with fewer than
/// two distinct sizes, a time that is not positive, or if the fit gives a
/// bandwidth that is not positive (timings that do not grow with size). A
/// negative intercept is clamped to zero latency.
llvm::Expected<LinkCost> fitLinkCost(CollectiveKind kind, int n,
                                     llvm::ArrayRef<TimingSample> samples);

/// How the calibration's ranks run: as braid-run places a program's ranks
/// on one machine (tools/braid-run), so that the hardware file describes
/// the ranks plans run on.
struct RankPlacement {
  int ranks = 1;
  int cores = 1;
  /// Per rank: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS of the ranks (and
  /// the threads of the kernels timed in the calibrating process).
  int threads = 1;
  /// Where `threads` came from: "--threads", "$OMP_NUM_THREADS" or
  /// "cores / ranks".
  std::string threadsFrom;
  /// Each rank bound to `threads` cores of its own (more than one rank,
  /// and ranks x threads fit on the cores); else not bound.
  bool bound = false;

  /// More ranks than cores (waiting ranks then yield their core).
  bool oversubscribed() const { return ranks > cores; }
  /// mpirun's options for this placement, after `-n ranks`, as braid-run
  /// passes them.
  std::vector<std::string> getMpirunArgs() const;
  /// One line, as braid-run prints it: "2 ranks x 1 thread on 2 cores,
  /// each bound to 1 core".
  std::string describe() const;
};

/// The placement of `ranks` ranks on `cores` cores as braid-run chooses it:
/// `threadsFlag` threads per rank if positive (--threads), else
/// `ompNumThreads` ($OMP_NUM_THREADS) if set, else cores / ranks, at least
/// 1. Fails on an $OMP_NUM_THREADS that is not a positive number.
llvm::Expected<RankPlacement>
chooseRankPlacement(int ranks, int cores, int threadsFlag,
                    std::optional<std::string> ompNumThreads);

} // namespace mlir::braid::plan

#endif // BRAID_PLANNER_CALIBRATION_H

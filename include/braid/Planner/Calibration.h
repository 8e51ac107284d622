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

} // namespace mlir::braid::plan

#endif // BRAID_PLANNER_CALIBRATION_H

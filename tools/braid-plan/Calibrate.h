//===- Calibrate.h - Measuring this machine for a hardware file -*- C++ -*-===//

#ifndef BRAID_TOOLS_BRAID_PLAN_CALIBRATE_H
#define BRAID_TOOLS_BRAID_PLAN_CALIBRATE_H

#include "braid/Planner/Hardware.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

struct CalibrationOptions {
  /// This executable, relaunched under mpirun as the timing ranks.
  std::string self;
  /// mpirun to use; empty: $BRAID_MPIRUN or mpirun on the PATH.
  std::string mpirun;
  int ranks = 2;
  /// Threads per rank; 0: as braid-run chooses ($OMP_NUM_THREADS, else
  /// cores / ranks, at least 1).
  int threads = 0;
  /// Smaller sizes, fewer repetitions.
  bool quick = false;
};

/// Times GEMMs, the attention and add kernels and memcpy in this process,
/// and the collectives on `ranks` MPI ranks, measures a rank's fixed memory
/// on them, and fits a hardware description. Everything runs with the
/// threads per rank of chooseRankPlacement, the ranks placed as braid-run
/// places them. Progress and the measurements go to `log`.
llvm::Expected<mlir::braid::plan::Hardware>
calibrateLocal(const CalibrationOptions &options, llvm::raw_ostream &log);

/// One rank of the collective timings (braid-plan --calibrate-comm-worker
/// [--quick]): rank 0 prints "kind bytes seconds" lines.
int runCommWorker(int argc, char **argv);

#endif // BRAID_TOOLS_BRAID_PLAN_CALIBRATE_H

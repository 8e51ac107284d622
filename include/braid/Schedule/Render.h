//===- Render.h - SVG timelines and Chrome traces of schedules --*- C++ -*-===//
//
// Pictures of a simulated schedule: an SVG timeline with one row per rank,
// F, B, W and full backward in different colours, the micro-batch number in
// every box and a time axis; and Chrome trace event JSON (open it in
// https://ui.perfetto.dev or chrome://tracing), one thread per rank.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_RENDER_H
#define BRAID_SCHEDULE_RENDER_H

#include "braid/Schedule/Schedule.h"
#include "braid/Schedule/Simulator.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::braid::sched {

/// Writes a standalone SVG document.
void writeSvgTimeline(llvm::raw_ostream &os, const Schedule &schedule,
                      const SimulationResult &result);

/// Writes Chrome trace event JSON. One time unit of the cost model is shown
/// as one millisecond.
void writeChromeTrace(llvm::raw_ostream &os, const Schedule &schedule,
                      const SimulationResult &result);

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_RENDER_H

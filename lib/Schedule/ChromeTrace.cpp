//===- ChromeTrace.cpp - Chrome trace event JSON of schedules -------------===//
//
// The Trace Event Format (complete "X" events, one thread per rank) that
// Perfetto and chrome://tracing open.
//
//===----------------------------------------------------------------------===//

#include "braid/Schedule/Render.h"

#include "llvm/Support/JSON.h"

using namespace mlir::braid::sched;

void mlir::braid::sched::writeChromeTrace(llvm::raw_ostream &os,
                                          const Schedule &schedule,
                                          const SimulationResult &result) {
  // Trace timestamps are microseconds; one cost-model unit is shown as 1 ms.
  const double usPerUnit = 1000;
  llvm::json::OStream json(os, /*IndentSize=*/1);
  json.object([&] {
    json.attribute("displayTimeUnit", "ms");
    json.attributeArray("traceEvents", [&] {
      json.object([&] {
        json.attribute("name", "process_name");
        json.attribute("ph", "M");
        json.attribute("pid", 0);
        json.attributeObject("args", [&] {
          json.attribute("name", "pipeline " + schedule.name);
        });
      });
      for (int r = 0; r < schedule.numRanks; ++r) {
        json.object([&] {
          json.attribute("name", "thread_name");
          json.attribute("ph", "M");
          json.attribute("pid", 0);
          json.attribute("tid", r);
          json.attributeObject("args", [&] {
            json.attribute("name", "rank " + std::to_string(r));
          });
        });
        json.object([&] {
          json.attribute("name", "thread_sort_index");
          json.attribute("ph", "M");
          json.attribute("pid", 0);
          json.attribute("tid", r);
          json.attributeObject("args",
                               [&] { json.attribute("sort_index", r); });
        });
      }
      for (int r = 0; r < schedule.numRanks; ++r) {
        for (size_t i = 0, e = schedule.ranks[r].size(); i < e; ++i) {
          const Action &a = schedule.ranks[r][i];
          const TimedAction &t = result.timeline[r][i];
          json.object([&] {
            json.attribute("pid", 0);
            json.attribute("tid", r);
            json.attribute("ts", t.start * usPerUnit);
            json.attributeObject("args", [&] {
              json.attribute("microbatch", a.microbatch);
              json.attribute("chunk", a.chunk);
              json.attribute("stage", schedule.getStage(r, a.chunk));
              if (a.isCommunication())
                json.attribute("peer", a.peer);
            });
            if (a.isCompute()) {
              json.attribute("name", getActionKindName(a.kind).str() +
                                         std::to_string(a.microbatch));
              json.attribute("cat", getActionKindName(a.kind));
              json.attribute("ph", "X");
              json.attribute("dur", (t.end - t.start) * usPerUnit);
              return;
            }
            // Sends and receives are instants: when the rank posts them.
            json.attribute("name", formatAction(a));
            json.attribute("cat", "p2p");
            json.attribute("ph", "i");
            json.attribute("s", "t");
          });
        }
      }
    });
  });
  os << '\n';
}

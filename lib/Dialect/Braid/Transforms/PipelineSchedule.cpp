//===- PipelineSchedule.cpp - Attach a verified pipeline schedule ----------===//
//
// Generates a schedule from the schedule library for the split's stages,
// timed by the FLOPs of the outlined pieces, verifies it and attaches it.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/CostUtils.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Verifier.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::braid {
#define GEN_PASS_DEF_PIPELINESCHEDULEPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

struct PipelineSchedulePass
    : public braid::impl::PipelineSchedulePassBase<PipelineSchedulePass> {
  using PipelineSchedulePassBase::PipelineSchedulePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](Operation *at, const Twine &message) {
      at->emitError() << "braid-pipeline-schedule: " << message;
      signalPassFailure();
    };
    auto forward = module.lookupSymbol<func::FuncOp>(entry);
    std::string gradName = entry + "_grad";
    auto grad = module.lookupSymbol<func::FuncOp>(gradName);
    if (!forward || !grad)
      return fail(module, "no functions @" + entry + " and @" + gradName +
                              "; run braid-pipeline-split, braid-autodiff "
                              "and braid-pipeline-outline first");
    auto stagesAttr =
        forward->getAttrOfType<DenseI64ArrayAttr>("braid.chunk_stages");
    if (!stagesAttr || stagesAttr.empty())
      return fail(forward, "@" + entry +
                               " has no braid.chunk_stages; run "
                               "braid-pipeline-split first");
    ArrayRef<int64_t> chunkStages = stagesAttr.asArrayRef();
    int numChunksTotal = chunkStages.size();
    int numRanks = *llvm::max_element(chunkStages) + 1;
    if (numChunksTotal % numRanks != 0)
      return fail(forward, "braid.chunk_stages does not give every stage the "
                           "same number of chunks");
    int chunksPerRank = numChunksTotal / numRanks;

    // F, B and W times per chunk: the FLOPs of its pieces, relative to the
    // mean F.
    sched::CostModel costs;
    costs.forward.assign(numChunksTotal, 0);
    costs.backward.assign(numChunksTotal, 0);
    costs.weight.assign(numChunksTotal, 0);
    costs.comm.assign(numChunksTotal - 1, 0);
    std::vector<double> *byPhase[] = {&costs.forward, &costs.backward,
                                      &costs.weight};
    const char *phases[] = {"F", "B", "W"};
    for (int c = 0; c < numChunksTotal; ++c)
      for (int p = 0; p < 3; ++p) {
        std::string name = gradName + ".c" + std::to_string(c) + "." + phases[p];
        if (auto piece = module.lookupSymbol<func::FuncOp>(name))
          for (Operation &op : piece.getBody().front())
            (*byPhase[p])[c] += getTotalFlops(&op);
        else if (p == 0)
          return fail(grad, "no function @" + name +
                                "; run braid-pipeline-outline first");
      }
    double mean = 0;
    for (double f : costs.forward)
      mean += f / numChunksTotal;
    if (mean > 0)
      for (std::vector<double> *times : byPhase)
        for (double &t : *times)
          t /= mean;

    std::optional<sched::ScheduleKind> kind =
        sched::parseScheduleKind(schedule);
    if (!kind)
      return fail(grad, "unknown schedule '" + schedule +
                            "'; expected gpipe, 1f1b, interleaved-1f1b, "
                            "zb-h1, zb-h2, zb-v or auto");
    sched::ScheduleRequest request;
    request.kind = *kind;
    request.numRanks = numRanks;
    // A training step's braid.pipeline fixes the micro-batch count.
    int64_t m = microbatches;
    WalkResult walk = module.walk([&](PipelineOp op) {
      if (op.getCallee() != gradName)
        return WalkResult::advance();
      if (m > 0 && m != op.getNumMicrobatches()) {
        fail(op, "microbatches=" + Twine(m) + ", but this braid.pipeline "
                 "runs @" + gradName + " on " +
                 Twine(op.getNumMicrobatches()) + " micro-batches");
        return WalkResult::interrupt();
      }
      m = op.getNumMicrobatches();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return;
    request.numMicrobatches = m > 0 ? m : numRanks;
    request.numChunks = chunksPerRank;
    request.costs = costs;
    if (memLimit > 0)
      request.memoryLimit = double(memLimit);
    llvm::Expected<sched::Schedule> built = sched::generateSchedule(request);
    if (!built)
      return fail(grad, llvm::toString(built.takeError()) +
                            " (the split has " + Twine(numRanks) +
                            " stages with " + Twine(chunksPerRank) +
                            " chunk(s) each)");
    // The schedule's placement of chunks on ranks must be the split's.
    for (int c = 0; c < numChunksTotal; ++c)
      if (built->getRankAndChunk(c).first != chunkStages[c])
        return fail(grad, "schedule '" + schedule + "' runs chunk " +
                              Twine(c) + " on stage " +
                              Twine(built->getRankAndChunk(c).first) +
                              ", but the split placed it on stage " +
                              Twine(chunkStages[c]) +
                              " (use placement=v for zb-v, loop otherwise)");
    sched::VerifyOptions verify;
    if (request.memoryLimit)
      verify.memoryLimit = request.memoryLimit;
    if (llvm::Error error = sched::verifySchedule(*built, verify))
      return fail(grad, "the generated schedule is invalid: " +
                            llvm::toString(std::move(error)));

    Builder b(&getContext());
    SmallVector<Attribute> ranks;
    for (const std::vector<sched::Action> &actions : built->ranks) {
      SmallVector<Attribute> list;
      for (const sched::Action &action : actions)
        list.push_back(b.getStringAttr(sched::formatAction(action)));
      ranks.push_back(b.getArrayAttr(list));
    }
    grad->setAttr(
        "braid.schedule",
        b.getDictionaryAttr(
            {b.getNamedAttr("name", b.getStringAttr(built->name)),
             b.getNamedAttr("microbatches",
                            b.getI64IntegerAttr(built->numMicrobatches)),
             b.getNamedAttr("ranks", b.getArrayAttr(ranks))}));

    if (!report)
      return;
    llvm::raw_ostream &os = llvm::outs();
    os << "braid-pipeline-schedule: " << built->name << " on " << numRanks
       << " stages x " << chunksPerRank << " chunk(s), "
       << built->numMicrobatches << " micro-batches\n";
    os << "chunk  F time  B time  W time (relative FLOPs)\n";
    for (int c = 0; c < numChunksTotal; ++c)
      os << llvm::format("%5d %7.3f %7.3f %7.3f\n", c, costs.forward[c],
                         costs.backward[c], costs.weight[c]);
    sched::printSchedule(os, *built);
    if (llvm::Expected<sched::SimulationResult> sim =
            sched::simulate(*built, costs))
      os << llvm::format("simulated bubble rate %.4f, peak memory %.1f "
                         "micro-batches\n",
                         sim->bubbleRate, sim->getMaxPeakMemory());
    else
      os << "simulation failed: " << llvm::toString(sim.takeError()) << "\n";
  }
};

} // namespace

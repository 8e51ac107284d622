//===- PipelineDriver.cpp - A scheduled gradient function, read -----------===//

#include "braid/Dialect/Braid/Utils/PipelineDriver.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::braid;

FailureOr<PipelineDriver> PipelineDriver::read(func::FuncOp fn) {
  auto module = fn->getParentOfType<ModuleOp>();
  auto schedule = fn->getAttrOfType<DictionaryAttr>("braid.schedule");
  if (!schedule)
    return fn.emitError() << "@" << fn.getName()
                          << " has no braid.schedule (run "
                             "braid-pipeline-outline and "
                             "braid-pipeline-schedule)";
  PipelineDriver driver;
  driver.fn = fn;
  auto mAttr = schedule.getAs<IntegerAttr>("microbatches");
  auto ranks = schedule.getAs<ArrayAttr>("ranks");
  if (!mAttr || !ranks)
    return fn.emitError("braid.schedule lacks 'microbatches' or 'ranks'");
  driver.microbatches = mAttr.getInt();

  for (Operation &op : fn.getBody().front().without_terminator()) {
    auto call = dyn_cast<func::CallOp>(op);
    auto callee = call ? module.lookupSymbol<func::FuncOp>(call.getCallee())
                       : func::FuncOp();
    auto chunk =
        callee ? callee->getAttrOfType<IntegerAttr>("braid.chunk") : nullptr;
    auto phase =
        callee ? callee->getAttrOfType<StringAttr>("braid.phase") : nullptr;
    if (!chunk || !phase || phase.getValue().empty())
      return op.emitOpError("is not a call of an outlined piece; pipelines run "
                            "functions made by braid-pipeline-outline");
    Piece piece{chunk.getInt(), phase.getValue()[0]};
    driver.pieces[piece] = call;
    driver.callPiece[call] = piece;
    for (Value r : call.getResults())
      driver.producer[r] = piece;
  }

  // @f_grad's forward function @f says which stage holds each chunk.
  StringRef name = fn.getName();
  auto forward = name.ends_with("_grad")
                     ? module.lookupSymbol<func::FuncOp>(
                           name.drop_back(StringRef("_grad").size()))
                     : func::FuncOp();
  auto stages =
      forward ? forward->getAttrOfType<DenseI64ArrayAttr>("braid.chunk_stages")
              : nullptr;
  if (!stages)
    return fn.emitError("no braid.chunk_stages on the forward function");
  int64_t numRanks = ranks.size();
  driver.stages.assign(stages.asArrayRef().begin(), stages.asArrayRef().end());
  driver.localChunks.resize(numRanks);
  for (auto [c, r] : llvm::enumerate(driver.stages)) {
    if (r < 0 || r >= numRanks)
      return fn.emitError() << "chunk " << c << " is on stage " << r
                            << ", but the schedule has " << numRanks
                            << " ranks";
    driver.localChunks[r].push_back(c);
  }
  for (auto [c, piece] : driver.pieces)
    if (c.first < 0 || c.first >= (int64_t)driver.stages.size())
      return piece.emitOpError()
             << "calls a piece of chunk " << c.first << ", but @"
             << forward.getName() << " has " << driver.stages.size()
             << " chunks";

  driver.actions.resize(numRanks);
  for (int64_t r = 0; r < numRanks; ++r) {
    auto list = dyn_cast<ArrayAttr>(ranks[r]);
    if (!list)
      return fn.emitError("braid.schedule: 'ranks' holds lists of actions");
    for (Attribute a : list) {
      auto text = dyn_cast<StringAttr>(a);
      std::optional<sched::Action> action =
          text ? sched::parseAction(text.getValue()) : std::nullopt;
      if (!action || action->microbatch >= driver.microbatches ||
          action->chunk >= (int64_t)driver.localChunks[r].size() ||
          (action->isCommunication() && action->peer >= numRanks))
        return fn.emitError() << "bad action '"
                              << (text ? text.getValue() : StringRef())
                              << "' in braid.schedule";
      driver.actions[r].push_back(*action);
    }
  }
  return driver;
}

bool PipelineDriver::isUsedOn(Value v, int64_t rank) const {
  return llvm::any_of(v.getUsers(), [&](Operation *user) {
    auto it = callPiece.find(user);
    return it != callPiece.end() && stages[it->second.first] == rank;
  });
}

bool PipelineDriver::isProducedByW(Value v) const {
  auto it = producer.find(v);
  return it != producer.end() && it->second.second == 'W';
}

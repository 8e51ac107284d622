//===- fuzz_braid_opt.cpp - libFuzzer harness for braid-opt's path -------===//
//
// braid-opt and braidc parse a module the user wrote, verify it and run
// the pass pipelines on it. Every failure must be a diagnostic: an input
// that does not parse, does not verify or that a pass refuses is fine; a
// crash, an assertion, a sanitizer report, a hang, or a pipeline that
// succeeds and leaves IR that does not verify is a finding.
//
// The input is one byte choosing pipelines (bit i runs pipeline i, each on
// its own clone of the module) followed by MLIR text. Diagnostics are
// swallowed. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Pipelines/BraidPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cstdint>
#include <memory>
#include <string>

using namespace mlir;
using namespace mlir::braid;

namespace {
/// The pipelines, by bit of the first input byte.
void buildPipeline(OpPassManager &pm, unsigned which) {
  CodegenOptions codegen;
  TrainingOptions &t = codegen.training;
  switch (which) {
  case 0: // braidc's forward program
    buildCodegenPipeline(pm, codegen);
    return;
  case 1: // a training step on one rank
    codegen.train = true;
    buildCodegenPipeline(pm, codegen);
    return;
  case 2: // dp x tp with ZeRO, sequence parallelism, buckets, async
    t.dp = 2;
    t.tp = 2;
    t.zero = 2;
    t.sp = true;
    t.bucketMb = 0.001;
    t.asyncCollectives = true;
    t.recompute = "selective";
    t.clipNorm = 1.0;
    codegen.train = true;
    buildCodegenPipeline(pm, codegen);
    return;
  case 3: // a 2-stage pipeline, 1F1B
    t.pp = 2;
    t.microbatches = 2;
    codegen.train = true;
    buildCodegenPipeline(pm, codegen);
    return;
  case 4: // interleaved chunks on a dp x pp mesh, SGD, full recompute
    t.pp = 2;
    t.dp = 2;
    t.schedule = "interleaved-1f1b";
    t.chunks = 2;
    t.microbatches = 4;
    t.optimizer = "sgd";
    t.recompute = "full";
    t.decay = "cosine";
    t.warmupSteps = 1;
    t.totalSteps = 4;
    codegen.train = true;
    buildCodegenPipeline(pm, codegen);
    return;
  case 5: // the zero-bubble V schedule on a tp x pp mesh (training passes)
    t.pp = 2;
    t.tp = 2;
    t.schedule = "zb-v";
    t.microbatches = 2;
    codegen.train = true;
    buildTrainingPipeline(pm, t);
    return;
  case 6: // shardings written by hand, propagated and partitioned
    pm.addPass(createPropagateShardingPass());
    pm.addPass(createPartitionPass());
    return;
  case 7: // the dialect's folders and canonicalization patterns
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    return;
  }
}

/// A fresh context every so often: parsed attributes and types are
/// uniqued in it for its lifetime.
std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registry.insert<BraidDialect, func::FuncDialect, arith::ArithDialect,
                  tensor::TensorDialect, emitc::EmitCDialect>();
  auto ctx =
      std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}
} // namespace

// LLVM's BumpPtrAllocator poisons its slabs for ASan in instrumented code
// only: MLIR's uninstrumented copy then allocates from a slab ours poisoned
// (uniqued attributes share one) without unpoisoning, a false
// use-after-poison. Manual poisoning off; ASan's own checks stay.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<MLIRContext> ctx;
  static unsigned uses = 0;
  if (!ctx || ++uses % 512 == 0)
    ctx = makeContext();
  if (size == 0)
    return 0;
  unsigned pipelines = data[0];
  // MLIR's lexer needs the NUL after the text that braid-opt's file buffers
  // have (libFuzzer's input has none).
  std::string text(reinterpret_cast<const char *>(data + 1), size - 1);

  ScopedDiagnosticHandler swallow(ctx.get(),
                                  [](Diagnostic &) { return success(); });
  ParserConfig config(ctx.get());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, config);
  if (!module || failed(verify(*module)))
    return 0;
  for (unsigned which = 0; which < 8; ++which) {
    if (!(pipelines & (1u << which)))
      continue;
    OwningOpRef<ModuleOp> copy = module->clone();
    PassManager pm(ctx.get());
    // The verifier runs once, after the pipeline: a pipeline that succeeds
    // must leave valid IR.
    pm.enableVerifier(false);
    buildPipeline(pm, which);
    if (succeeded(pm.run(*copy)) && failed(verify(*copy)))
      __builtin_trap(); // a pipeline succeeded and left invalid IR
  }
  return 0;
}

//===- braid-eval.cpp - Reference evaluator for braid IR -------------------===//
//
// Evaluates one function of a braid module with the ops' reference
// semantics and prints its results: rank-0 results in full precision, other
// tensors as shape and checksums (all values with --dump).
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Eval/EvalOpInterface.h"
#include "braid/Eval/Evaluator.h"
#include "braid/Eval/PipelineExecutor.h"
#include "braid/Support/OutputPath.h"
#include "braid/Support/SafeTensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <map>
#include <thread>

using namespace mlir;
using namespace mlir::braid;
namespace cl = llvm::cl;

static cl::OptionCategory category("braid-eval options");

static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string>
    entry("entry", cl::desc("Function to evaluate (default: 'forward', or "
                            "the module's only function)"),
          cl::value_desc("name"), cl::cat(category));
static cl::opt<uint64_t>
    seed("seed", cl::desc("Seed for parameter initialisation and generated "
                          "inputs (default 0)"),
         cl::init(0), cl::cat(category));
static cl::opt<bool> f64("f64",
                         cl::desc("Evaluate all floating-point values in f64 "
                                  "instead of their declared element types"),
                         cl::cat(category));
static cl::opt<std::string>
    weightsFile("weights", cl::desc("Read parameters from this safetensors "
                                    "file instead of their initializers"),
                cl::value_desc("W.safetensors"), cl::cat(category));
static cl::opt<bool> stopOnNonfinite(
    "stop-on-nonfinite",
    cl::desc("With --steps: stop (status 1) at a step whose loss or gradient "
             "norm is not finite, instead of warning that its update was "
             "skipped"),
    cl::cat(category));
static cl::opt<std::string>
    saveWeights("save-weights",
                cl::desc("Write the parameters used, by full name"),
                cl::value_desc("W.safetensors"), cl::cat(category));
static cl::opt<std::string>
    inputsFile("inputs", cl::desc("Read arguments by name (braid.name or "
                                  "argN) from this safetensors file; missing "
                                  "ones are generated from the seed"),
               cl::value_desc("I.safetensors"), cl::cat(category));
static cl::opt<std::string>
    saveInputs("save-inputs", cl::desc("Write the arguments used, by name"),
               cl::value_desc("I.safetensors"), cl::cat(category));
static cl::opt<std::string> saveOutputs(
    "save-outputs",
    cl::desc("Write the results as result0, result1, ...; a gradient result "
             "(braid.gradient_of) is written under its parameter's name, "
             "one tensor per layer instance"),
    cl::value_desc("O.safetensors"), cl::cat(category));
static cl::opt<bool> dump("dump", cl::desc("Print every value of every result"),
                          cl::cat(category));
static cl::opt<std::string> meshName(
    "mesh",
    cl::desc("Run a per-device program on every device of this braid.mesh "
             "(simulated, one thread each): sharded arguments and parameters "
             "(braid.block_of) get their blocks, collectives exchange data, "
             "and results are assembled into whole tensors"),
    cl::value_desc("name"), cl::cat(category));
static cl::opt<bool> pipeline(
    "pipeline",
    cl::desc("Run pipelines on simulated pipeline ranks in the order of "
             "their braid.schedule: the braid.pipeline ops of the entry "
             "(a training step; combines with --steps and --mesh), or an "
             "entry that is itself a scheduled gradient function, over the "
             "schedule's micro-batches (micro-batch i draws its inputs with "
             "seed + i; prints the means over micro-batches)"),
    cl::init(false), cl::cat(category));
static cl::opt<unsigned> steps(
    "steps",
    cl::desc("Train: run the entry (default train_step) N times, feeding "
             "the step number to its 'step' argument; parameters and "
             "optimizer state carry over between steps (a step with "
             "defer-validation: a step's line after the next call, a step "
             "after a rollback run again, a last call validating the last "
             "step)"),
    cl::value_desc("N"), cl::init(0), cl::cat(category));
static cl::opt<uint64_t>
    startStep("start-step",
              cl::desc("Number of the first step (to resume training)"),
              cl::init(0), cl::cat(category));
static cl::opt<std::string> optimizerStateFile(
    "optimizer-state",
    cl::desc("Read optimizer state (AdamW moments, SGD momentum) from this "
             "safetensors file instead of starting from zeros"),
    cl::value_desc("S.safetensors"), cl::cat(category));
static cl::opt<std::string> saveOptimizerState(
    "save-optimizer-state",
    cl::desc("Write the optimizer state after the last step"),
    cl::value_desc("S.safetensors"), cl::cat(category));

static EvalOptions evalOptions() {
  EvalOptions options;
  options.seed = seed;
  options.f64 = f64;
  options.pipelineSchedule = pipeline;
  return options;
}

static int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "braid-eval") << msg << "\n";
  return 1;
}

static FunctionOpInterface findEntry(ModuleOp module) {
  SmallVector<FunctionOpInterface> functions;
  for (auto fn : module.getOps<func::FuncOp>())
    functions.push_back(fn);
  if (!entry.empty() || functions.size() != 1) {
    StringRef defaultName = steps ? "train_step" : "forward";
    StringRef name = entry.empty() ? defaultName : StringRef(entry);
    for (FunctionOpInterface fn : functions)
      if (fn.getName() == name)
        return fn;
    std::string known;
    for (FunctionOpInterface fn : functions)
      known += (known.empty() ? "@" : ", @") + fn.getName().str();
    fail("no function @" + name + " in " + inputFile +
         (known.empty() ? "; it defines no functions"
                        : "; it defines " + known) +
         (entry.empty() ? " (choose one with --entry)" : ""));
    return nullptr;
  }
  return functions.front();
}

static void printTensor(llvm::raw_ostream &os, unsigned index, Type type,
                        const Tensor &t) {
  os << "result " << index << ": " << type;
  if (t.rank() == 0) {
    os << " = " << llvm::format("%.17g", t[0]) << "\n";
    return;
  }
  double sum = 0.0, sumSq = 0.0;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    sum += t[i];
    sumSq += t[i] * t[i];
  }
  os << " sum = " << llvm::format("%.17g", sum)
     << " l2 = " << llvm::format("%.17g", std::sqrt(sumSq)) << "\n";
  if (!dump)
    return;
  for (int64_t i = 0; i < t.numElements(); ++i)
    os << (i % 8 ? " " : "  ") << llvm::format("%.17g", t[i])
       << (i % 8 == 7 || i + 1 == t.numElements() ? "\n" : "");
}

/// Adds result `index` of `fn` to `outputs`: as "resultN", or, for a
/// gradient, under its parameter's full name (unstacked per instance).
static void addOutput(FunctionOpInterface fn, unsigned index, const Tensor &t,
                      TensorMap &outputs) {
  auto of = fn.getResultAttrOfType<StringAttr>(index, "braid.gradient_of");
  if (!of) {
    outputs.insert({"result" + std::to_string(index), t});
    return;
  }
  auto instances =
      fn.getResultAttrOfType<DenseI64ArrayAttr>(index, "braid.instances");
  if (!instances) {
    outputs.insert({of.str(), t});
    return;
  }
  StringRef pattern = of.getValue();
  auto [head, tail] = pattern.split("{}");
  auto names =
      fn.getResultAttrOfType<ArrayAttr>(index, "braid.instance_names");
  Tensor slice(t.shape().drop_front(), t.dtype());
  for (int64_t k = 0; k < instances[1]; ++k) {
    std::copy_n(t.data() + k * slice.numElements(), slice.numElements(),
                slice.data());
    std::string instance = names ? cast<StringAttr>(names[k]).str()
                                 : std::to_string(instances[0] + k);
    outputs.insert({(head + instance + tail).str(), slice});
  }
}

static int saveFile(StringRef path, const TensorMap &tensors) {
  if (llvm::Error err = writeSafeTensors(path, tensors))
    return fail(llvm::toString(std::move(err)));
  return 0;
}

namespace {

/// Runs functions of the module, on one device or on every device of a
/// mesh, keeping parameters and optimizer state between calls.
class Runner {
public:
  virtual ~Runner() = default;
  /// Evaluates `fn` on `given` inputs, filling `results` with whole
  /// tensors. With `checkWeights`, also fails on unused weights.
  virtual LogicalResult call(FunctionOpInterface fn, const TensorMap &given,
                             SmallVectorImpl<Tensor> &results,
                             bool checkWeights) = 0;
  /// The parameters (or optimizer state) as whole tensors.
  virtual FailureOr<TensorMap> tensors(bool state) = 0;
};

class SerialRunner : public Runner {
public:
  SerialRunner(Evaluator &evaluator) : evaluator(evaluator) {}
  LogicalResult call(FunctionOpInterface fn, const TensorMap &given,
                     SmallVectorImpl<Tensor> &results,
                     bool checkWeights) override {
    FailureOr<SmallVector<Tensor>> inputs = evaluator.makeInputs(fn, given);
    if (failed(inputs))
      return failure();
    FailureOr<SmallVector<Tensor>> out = evaluator.run(fn, *inputs);
    if (failed(out) ||
        (checkWeights && failed(evaluator.checkAllWeightsUsed(fn))))
      return failure();
    results.append(out->begin(), out->end());
    return success();
  }
  FailureOr<TensorMap> tensors(bool state) override {
    return state ? evaluator.getOptimizerState() : evaluator.getParameters();
  }

private:
  Evaluator &evaluator;
};

/// One evaluator per device of the mesh, each on its own thread per call,
/// exchanging data through an ExchangeHub.
class MeshRunner : public Runner {
public:
  MeshRunner(ModuleOp module, MeshOp mesh, const TensorMap *weights,
             const TensorMap *state)
      : mesh(mesh) {
    for (int64_t rank = 0, n = mesh.getNumDevices(); rank < n; ++rank) {
      devices.push_back(std::make_unique<Evaluator>(module, evalOptions()));
      if (weights)
        devices.back()->setWeights(*weights);
      if (state)
        devices.back()->setOptimizerState(*state);
    }
  }

  LogicalResult call(FunctionOpInterface fn, const TensorMap &given,
                     SmallVectorImpl<Tensor> &results,
                     bool checkWeights) override {
    int64_t n = devices.size();
    ExchangeHub hub(n);
    std::vector<SmallVector<Tensor>> perDevice(n);
    std::vector<char> ok(n, 0);
    std::vector<std::thread> threads;
    for (int64_t rank = 0; rank < n; ++rank)
      threads.emplace_back([&, rank] {
        Evaluator &evaluator = *devices[rank];
        evaluator.setPlacement(
            DevicePlacement{mesh, rank, getDeviceCoords(mesh, rank), &hub});
        FailureOr<SmallVector<Tensor>> inputs =
            evaluator.makeInputs(fn, given);
        FailureOr<SmallVector<Tensor>> out =
            succeeded(inputs) ? evaluator.run(fn, *inputs)
                              : FailureOr<SmallVector<Tensor>>(failure());
        if (failed(out) ||
            (checkWeights && failed(evaluator.checkAllWeightsUsed(fn)))) {
          hub.abort();
          return;
        }
        perDevice[rank] = std::move(*out);
        ok[rank] = 1;
      });
    for (std::thread &t : threads)
      t.join();
    if (llvm::is_contained(ok, 0))
      return failure();
    // A result without braid.block_of is replicated: every device must
    // hold the same tensor.
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      SmallVector<Tensor> blocks;
      for (int64_t r = 0; r < n; ++r)
        blocks.push_back(perDevice[r][i]);
      std::string error;
      FailureOr<Tensor> whole = assembleShards(
          blocks,
          shardingOr(fn.getResultAttrOfType<ShardingAttr>(i, "braid.block_of"),
                     blocks[0].rank()),
          mesh, error);
      if (failed(whole)) {
        fn.emitError() << "result " << i << ": " << error;
        return failure();
      }
      results.push_back(std::move(*whole));
    }
    return success();
  }

  FailureOr<TensorMap> tensors(bool state) override {
    TensorMap local = state ? devices[0]->getOptimizerState()
                            : devices[0]->getParameters();
    TensorMap whole;
    for (const auto &[name, first] : local) {
      SmallVector<Tensor> blocks;
      for (auto &device : devices) {
        TensorMap mine =
            state ? device->getOptimizerState() : device->getParameters();
        blocks.push_back(mine.find(name)->second);
      }
      std::string error;
      FailureOr<Tensor> t = assembleShards(
          blocks, shardingOr(devices[0]->getBlockOf(name), first.rank()),
          mesh, error);
      if (failed(t)) {
        fail("'" + name + "': " + error);
        return failure();
      }
      whole.insert({name, std::move(*t)});
    }
    return whole;
  }

private:
  /// `s`, or a replicated sharding of a rank-`rank` tensor.
  ShardingAttr shardingOr(ShardingAttr s, int64_t rank) {
    if (s)
      return s;
    MLIRContext *ctx = mesh.getContext();
    SmallVector<Attribute> dims(rank, ArrayAttr::get(ctx, {}));
    return ShardingAttr::get(ctx, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                             ArrayAttr::get(ctx, dims), nullptr,
                             ArrayRef<int64_t>());
  }

  MeshOp mesh;
  std::vector<std::unique_ptr<Evaluator>> devices;
};

/// Runs an outlined gradient function that carries a schedule on simulated
/// pipeline ranks (see PipelineExecutor.h) over the schedule's micro-batches,
/// micro-batch i with inputs drawn under seed + i.
class PipelineRunner : public Runner {
public:
  PipelineRunner(ModuleOp module, Evaluator &evaluator, EvalOptions options)
      : module(module), evaluator(evaluator), options(options) {}

  LogicalResult call(FunctionOpInterface fnOp, const TensorMap &given,
                     SmallVectorImpl<Tensor> &results,
                     bool checkWeights) override {
    auto fn = cast<func::FuncOp>(fnOp.getOperation());
    if (!given.empty())
      return fn.emitError() << "--pipeline draws micro-batch i's inputs "
                               "with seed + i; --inputs is not supported";
    auto schedule = fn->getAttrOfType<DictionaryAttr>("braid.schedule");
    int64_t m = schedule.getAs<IntegerAttr>("microbatches").getInt();
    std::vector<SmallVector<Tensor>> inputs;
    for (int64_t i = 0; i < m; ++i) {
      EvalOptions o = options;
      o.seed = options.seed + i;
      Evaluator maker(module, o);
      FailureOr<SmallVector<Tensor>> in = maker.makeInputs(fn, {});
      if (failed(in))
        return failure();
      inputs.push_back(std::move(*in));
    }
    if (failed(runScheduledPipeline(evaluator, fn, inputs, results)))
      return failure();
    if (checkWeights && failed(evaluator.checkAllWeightsUsed(fn)))
      return failure();
    return success();
  }
  FailureOr<TensorMap> tensors(bool state) override {
    return state ? evaluator.getOptimizerState() : evaluator.getParameters();
  }

private:
  ModuleOp module;
  Evaluator &evaluator;
  EvalOptions options;
};

} // namespace

/// The index of the argument or result of `fn` named `name` (braid.name).
static std::optional<unsigned> findNamed(FunctionOpInterface fn, StringRef name,
                                         bool result) {
  unsigned n = result ? fn.getNumResults() : fn.getNumArguments();
  for (unsigned i = 0; i < n; ++i) {
    auto attr = result ? fn.getResultAttrOfType<StringAttr>(i, "braid.name")
                       : fn.getArgAttrOfType<StringAttr>(i, "braid.name");
    if (attr && attr.getValue() == name)
      return i;
  }
  return std::nullopt;
}

/// Saves the weights and optimizer state, if asked to.
static int saveState(Runner &runner) {
  for (auto [path, state] : {std::make_pair(&saveWeights, false),
                             std::make_pair(&saveOptimizerState, true)}) {
    if (path->empty())
      continue;
    FailureOr<TensorMap> tensors = runner.tensors(state);
    if (failed(tensors))
      return 1;
    if (int rc = saveFile(*path, *tensors))
      return rc;
  }
  return 0;
}

/// Prints the line of a finished step as braid-eval --steps does, and says
/// when its update was skipped. Fails on that with --stop-on-nonfinite.
static int reportStep(uint64_t step, std::optional<double> loss,
                      std::optional<double> lr, std::optional<double> norm) {
  llvm::outs() << "step " << step;
  if (loss)
    llvm::outs() << " loss " << llvm::format("%.17g", *loss);
  if (lr)
    llvm::outs() << " lr " << llvm::format("%.6g", *lr);
  if (norm)
    llvm::outs() << " grad_norm " << llvm::format("%.6g", *norm);
  llvm::outs() << "\n";
  // braid-train-step skipped the update of a step whose loss or gradient
  // norm is not finite; say so, as compiled programs do.
  double lossValue = loss.value_or(0.0), normValue = norm.value_or(0.0);
  if (std::isfinite(lossValue) && std::isfinite(normValue))
    return 0;
  llvm::outs().flush();
  llvm::errs() << "warning: step " << step << ": the loss ("
               << llvm::format("%g", lossValue) << ") or the gradient norm ("
               << llvm::format("%g", normValue)
               << ") is not finite: the update was skipped (parameters "
                  "and optimizer state unchanged)\n";
  if (stopOnNonfinite)
    return fail("step " + std::to_string(step) +
                ": stopping on a non-finite loss or gradient norm "
                "(--stop-on-nonfinite)");
  return 0;
}

/// Runs `fn` for --steps steps, printing the loss of each, then saves what
/// was asked for. A step made with braid-train-step's defer-validation
/// (inputs previous_step and final, result retry) validates the previous
/// step's update while it runs: its line is printed after the next call,
/// a step whose predecessor was rolled back is run again, and a last call
/// with final = 1 validates the last step.
static int train(Runner &runner, FunctionOpInterface fn, TensorMap given) {
  if (!findNamed(fn, "step", /*result=*/false))
    return fail("@" + fn.getName() + " has no argument named 'step' "
                "(braid.name); --steps needs a training step (see "
                "braid-opt --braid-train-step)");
  std::optional<unsigned> lossIndex = findNamed(fn, "loss", true);
  std::optional<unsigned> lrIndex = findNamed(fn, "lr", true);
  std::optional<unsigned> normIndex = findNamed(fn, "grad_norm", true);
  std::optional<unsigned> retryIndex = findNamed(fn, "retry", true);
  bool deferred = retryIndex && findNamed(fn, "final", false) &&
                  findNamed(fn, "previous_step", false);
  if (deferred)
    normIndex = findNamed(fn, "previous_grad_norm", true);
  auto value = [](const SmallVector<Tensor> &results,
                  std::optional<unsigned> index) -> std::optional<double> {
    if (!index)
      return std::nullopt;
    return results[*index][0];
  };
  // defer-validation: the step waiting for its gradient norm.
  struct Pending {
    uint64_t step;
    std::optional<double> loss, lr;
  };
  std::optional<Pending> pending;
  auto call = [&](uint64_t step, bool final, bool first,
                  SmallVector<Tensor> &results) -> LogicalResult {
    results.clear();
    given["step"] = Tensor({}, DType::I64, static_cast<double>(step));
    if (deferred) {
      given["previous_step"] =
          Tensor({}, DType::I64, static_cast<double>(step ? step - 1 : 0));
      given["final"] = Tensor({}, DType::F32, final ? 1.0 : 0.0);
    }
    return runner.call(fn, given, results, first);
  };
  for (uint64_t step = startStep; step < startStep + steps; ++step) {
    SmallVector<Tensor> results;
    if (failed(call(step, /*final=*/false, step == startStep, results)))
      return 1;
    if (!deferred) {
      if (int rc = reportStep(step, value(results, lossIndex),
                              value(results, lrIndex),
                              value(results, normIndex)))
        return rc;
      continue;
    }
    if (pending)
      if (int rc = reportStep(pending->step, pending->loss, pending->lr,
                              value(results, normIndex)))
        return rc;
    // The previous update was rolled back after this step's forward and
    // backward pass had read it: this step's update was skipped; run it
    // again on the validated parameters.
    if (results[*retryIndex][0] != 0.0 &&
        failed(call(step, /*final=*/false, /*first=*/false, results)))
      return 1;
    pending = Pending{step, value(results, lossIndex), value(results, lrIndex)};
  }
  if (pending) {
    SmallVector<Tensor> results;
    if (failed(call(pending->step + 1, /*final=*/true, /*first=*/false,
                    results)))
      return 1;
    if (int rc = reportStep(pending->step, pending->loss, pending->lr,
                            value(results, normIndex)))
      return rc;
  }
  if (!saveInputs.empty() || !saveOutputs.empty())
    return fail("--save-inputs and --save-outputs do not apply to --steps");
  return saveState(runner);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "braid-eval: evaluate a function of a braid model with the reference "
      "semantics.\n\n"
      "Parameters come from their initializers under --seed, or from "
      "--weights. Inputs come from --inputs, or are generated from the "
      "seed (integers need a braid.range argument attribute). Rank-0 "
      "results print in full; tensors print as type, sum and L2 norm.\n\n"
      "With --steps N it trains: it runs a training step (from braid-opt "
      "--braid-autodiff --braid-train-step) N times on the same inputs and "
      "prints each step's loss, learning rate and gradient norm.\n");

  // The files written at the end: a directory that is missing or not
  // writable is found before the evaluation (or --steps of training) runs.
  for (cl::opt<std::string> *path :
       {&saveWeights, &saveInputs, &saveOutputs, &saveOptimizerState}) {
    if (path->empty())
      continue;
    if (std::string why = whyNotWritable(*path); !why.empty())
      return fail("--" + path->ArgStr.str() + " " + *path + ": " + why);
  }

  DialectRegistry registry;
  registry.insert<BraidDialect, func::FuncDialect>();
  registerEvalInterfaceExternalModels(registry);
  MLIRContext context(registry);
  context.loadDialect<BraidDialect, func::FuncDialect>();
  // Diagnostics name the op and its location; dumping the op is noise.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFile, &errorMessage);
  if (!file)
    return fail(errorMessage);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  FunctionOpInterface fn = findEntry(*module);
  if (!fn)
    return 1;

  Evaluator evaluator(*module, evalOptions());
  if (!weightsFile.empty()) {
    llvm::Expected<SafeTensorsFile> weights = readSafeTensors(weightsFile);
    if (!weights)
      return fail(llvm::toString(weights.takeError()));
    evaluator.setWeights(std::move(weights->tensors));
  }
  if (!optimizerStateFile.empty()) {
    llvm::Expected<SafeTensorsFile> state = readSafeTensors(optimizerStateFile);
    if (!state)
      return fail(llvm::toString(state.takeError()));
    evaluator.setOptimizerState(std::move(state->tensors));
  }
  TensorMap given;
  if (!inputsFile.empty()) {
    llvm::Expected<SafeTensorsFile> inputs = readSafeTensors(inputsFile);
    if (!inputs)
      return fail(llvm::toString(inputs.takeError()));
    given = std::move(inputs->tensors);
  }

  if (pipeline && !fn->hasAttr("braid.schedule")) {
    bool any = false;
    fn->walk([&](PipelineOp) { any = true; });
    if (!any)
      return fail("--pipeline: @" + fn.getName() +
                  " neither carries a braid.schedule nor contains "
                  "braid.pipeline ops");
  }
  std::unique_ptr<Runner> runner;
  std::optional<TensorMap> meshWeights, meshState;
  if (pipeline && fn->hasAttr("braid.schedule")) {
    if (!meshName.empty() || steps)
      return fail("--mesh and --steps run a training step whose "
                  "braid.pipeline ops are scheduled, not the scheduled "
                  "gradient function @" + fn.getName() + " itself");
    if (!saveInputs.empty())
      return fail("--save-inputs does not apply to --pipeline (micro-batch "
                  "i's inputs are drawn with seed + i)");
    runner = std::make_unique<PipelineRunner>(*module, evaluator,
                                              evalOptions());
  } else if (meshName.empty()) {
    runner = std::make_unique<SerialRunner>(evaluator);
  } else {
    auto mesh = module->lookupSymbol<MeshOp>(meshName);
    if (!mesh)
      return fail("no braid.mesh @" + meshName + " in " + inputFile);
    for (auto [file, map] : {std::make_pair(&weightsFile, &meshWeights),
                             std::make_pair(&optimizerStateFile, &meshState)}) {
      if (file->empty())
        continue;
      llvm::Expected<SafeTensorsFile> f = readSafeTensors(*file);
      if (!f)
        return fail(llvm::toString(f.takeError()));
      *map = std::move(f->tensors);
    }
    runner = std::make_unique<MeshRunner>(
        *module, mesh, meshWeights ? &*meshWeights : nullptr,
        meshState ? &*meshState : nullptr);
  }
  if (steps)
    return train(*runner, fn, given);

  if (!meshName.empty() && !saveInputs.empty())
    return fail("--save-inputs does not support --mesh yet");
  FailureOr<SmallVector<Tensor>> inputs = SmallVector<Tensor>();
  SmallVector<Tensor> resultTensors;
  if (failed(runner->call(fn, given, resultTensors, /*checkWeights=*/true)))
    return 1;
  if (meshName.empty()) {
    inputs = evaluator.makeInputs(fn, given);
    if (failed(inputs))
      return 1;
  }
  FailureOr<SmallVector<Tensor>> results = std::move(resultTensors);

  ArrayRef<Type> resultTypes = fn.getResultTypes();
  llvm::outs() << "@" << fn.getName() << " (seed " << seed
               << (f64 ? ", f64" : "")
               << (meshName.empty() ? "" : ", mesh @" + meshName) << "): "
               << results->size() << " result(s)\n";
  TensorMap outputs;
  for (auto [i, t] : llvm::enumerate(*results)) {
    // Whole tensors: with --mesh, larger than a device's result type.
    Type type = RankedTensorType::get(
        t.shape(), cast<RankedTensorType>(resultTypes[i]).getElementType());
    printTensor(llvm::outs(), i, type, t);
    addOutput(fn, i, t, outputs);
  }

  if (int rc = saveState(*runner))
    return rc;
  if (!saveInputs.empty()) {
    TensorMap named;
    for (auto [i, t] : llvm::enumerate(*inputs))
      named.insert({Evaluator::getArgumentName(fn, i), t});
    if (int rc = saveFile(saveInputs, named))
      return rc;
  }
  if (!saveOutputs.empty())
    if (int rc = saveFile(saveOutputs, outputs))
      return rc;
  return 0;
}

//===- braidc.cpp - Compile a braid model to a native executable ----------===//
//
// braidc MODEL.mlir -o PROG [--entry forward] [--emit exe|mlir|cpp]
//        [--dump-dir DIR] [--seed N]
//
// Runs the codegen pipeline (braid/Pipelines/BraidPipeline.h), translates
// the EmitC module to C++ with MLIR's C++ emitter, adds a main() that makes
// the entry's inputs as braid-eval does and prints its results
// (braid/Target/ProgramDriver.h), and compiles and links it against the
// runtime with the target's toolchain (braid/Target/Toolchain.h, paths fixed
// at build time, see docs/codegen.md). Single-device, per-device (a mesh) and
// pipelined (a scheduled braid.pipeline: an extra axis "pp") programs.
// `--mesh auto --devices N` chooses the training options with the planner's
// search (braid/Planner/Search.h) and compiles as if they had been given.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Pipelines/BraidPipeline.h"
#include "braid/Planner/Hardware.h"
#include "braid/Planner/Search.h"
#include "braid/Target/ProgramDriver.h"
#include "braid/Target/Toolchain.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

static cl::OptionCategory braidcCategory("braidc options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                                      cl::Required, cl::cat(braidcCategory));
static cl::opt<std::string> outputFile("o",
                                       cl::desc("Output file (required "
                                                "unless --plan-only)"),
                                       cl::value_desc("PROG"),
                                       cl::cat(braidcCategory));
static cl::opt<std::string> entry("entry",
                                  cl::desc("The function the program runs "
                                           "(default: forward)"),
                                  cl::init("forward"), cl::cat(braidcCategory));
static cl::opt<std::string>
    emit("emit",
         cl::desc("What to write: exe (an executable, the default), mlir (the "
                  "EmitC module), cpp (the C++ program) or cu (the CUDA "
                  "program, with --target cuda)"),
         cl::init("exe"), cl::cat(braidcCategory));
static cl::opt<std::string>
    dumpDir("dump-dir",
            cl::desc("Also write the EmitC module, the C++ program and the "
                     "compiler command to this directory"),
            cl::cat(braidcCategory));
static cl::opt<uint64_t> seed("seed",
                              cl::desc("The program's default --seed for "
                                       "parameters and inputs (default 0)"),
                              cl::init(0), cl::cat(braidcCategory));
static cl::opt<std::string>
    cxx("cxx", cl::desc("The C++ compiler"),
        cl::init(braid::CpuToolchain::getBuildOptions().cxx),
        cl::cat(braidcCategory));

// Training: derive the parallel training step from @forward.
static cl::OptionCategory trainCategory(
    "braidc training options (any of them, or --train, compiles the "
    "training step derived from @forward; the program runs train_step)");
static cl::opt<bool> train("train",
                           cl::desc("Compile the training step of @forward"),
                           cl::cat(trainCategory));
static cl::opt<std::string>
    meshSpec("mesh",
             cl::desc("Mesh degrees, e.g. dp=2,tp=2,pp=2 (each defaults to "
                      "1); the program runs on dp*tp*pp ranks. auto: the "
                      "planner chooses the mesh and the other training "
                      "options for --devices N"),
             cl::value_desc("dp=D,tp=T,pp=P|auto"), cl::cat(trainCategory));
// Every other training option, as TrainingOptions.def declares it (the
// same flag, default and help as braid-opt's --braid-codegen-pipeline).
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  static cl::opt<TYPE> NAME##Flag(FLAG, cl::desc(DESC), cl::init(DEFAULT),     \
                                  cl::cat(trainCategory));
#include "braid/Pipelines/TrainingOptions.def"

// Planning: --mesh auto.
static cl::OptionCategory planCategory(
    "braidc planning options (with --mesh auto: the planner searches dp x "
    "tp x pp, chunks, micro-batches, schedule, ZeRO, sp, recomputation and "
    "stage boundaries for the fastest predicted plan that fits, prints it "
    "with its braidc flags and compiles it; any training option given as "
    "well is kept fixed; docs/planner.md)");
static cl::opt<int> devices("devices",
                            cl::desc("Devices (ranks) the plan uses: dp x "
                                     "tp x pp = N"),
                            cl::value_desc("N"), cl::init(0),
                            cl::cat(planCategory));
static cl::opt<int> nodes("nodes",
                          cl::desc("Nodes the devices are spread over, "
                                   "N / K a node: at most the hardware "
                                   "file's devices per node (default: "
                                   "nodes filled to it)"),
                          cl::value_desc("K"), cl::init(0),
                          cl::cat(planCategory));
static cl::opt<std::string> deviceMemory(
    "device-memory",
    cl::desc("Memory per device, e.g. 80GiB, 512MiB, 2GB or bytes (default: "
             "the hardware file's)"),
    cl::value_desc("SIZE"), cl::cat(planCategory));
static cl::opt<std::string> hardwareFile(
    "hardware",
    cl::desc("Hardware description: a JSON file or a shipped name (a100-80g, "
             "h100-80g, h200, cpu-local; default cpu-local-<N>ranks for "
             "--devices N where one is shipped, else cpu-local: this machine "
             "as braid-plan --calibrate measured it)"),
    cl::value_desc("FILE|NAME"), cl::cat(planCategory));
static cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("Samples per step (default: the model's batch times "
             "--microbatches, or the model's batch): a multiple of the "
             "model's batch, which is one micro-batch over all dp ranks"),
    cl::value_desc("B"), cl::init(0), cl::cat(planCategory));
static cl::opt<bool> explainPlan(
    "explain",
    cl::desc("Print the ranked top plans, why the first wins, and every "
             "mesh not chosen with the reason (memory, divisibility, time)"),
    cl::cat(planCategory));
static cl::opt<bool> planOnly("plan-only",
                              cl::desc("Print the ranked plans and stop "
                                       "(no -o needed)"),
                              cl::cat(planCategory));
static cl::opt<bool> freeMicroBatch(
    "free-micro-batch",
    cl::desc("With --plan-only: also plan micro-batch sizes of 1, 2, 4 and 8 "
             "samples per dp rank, not only the program's batch / dp (such a "
             "plan compiles from a model written with batch dp x size)"),
    cl::cat(planCategory));
static cl::opt<int> topPlans("top", cl::desc("Plans ranked (default 5)"),
                             cl::init(5), cl::cat(planCategory));
static cl::opt<bool> compiledBuffers(
    "compiled-buffers",
    cl::desc("Count in each plan's memory the buffers braidc's program "
             "holds beside the model state and the saved activations "
             "(braid-plan --compiled-buffers: gradient means and "
             "accumulation, receives, arenas, sequence-parallel and ZeRO "
             "staging, a micro-batch's W results, what B hands a deferred "
             "W); on by default, =false: the model state and the "
             "schedule's activations only"),
    cl::init(true), cl::cat(planCategory));

static cl::opt<bool> singleProcess(
    "single-process",
    cl::desc("With --target cuda: a program for one GPU that runs without "
             "MPI or a launcher (the mesh must have one rank)"),
    cl::cat(braidcCategory));
static cl::opt<std::string>
    target("target",
           cl::desc("cpu (the default: C++ over OpenBLAS and MPI) or cuda "
                    "(CUDA C++ over cuBLAS and NCCL, compiled by nvcc; "
                    "compiled and host-tested, not yet run on a GPU)"),
           cl::init("cpu"), cl::cat(braidcCategory));
static cl::opt<bool> portable(
    "portable",
    cl::desc("CPU target: compile for any machine of this architecture (the "
             "compiler's default target and the portable kernels). Default: "
             "for this machine's CPU (-march=native and the kernels built "
             "for it), unless Braid was built with BRAID_NATIVE=OFF"),
    cl::cat(braidcCategory));

static cl::opt<bool>
    noFuse("no-fuse",
           cl::desc("Keep every op its own kernel: skip braid-fuse-elementwise "
                    "(and braid-fuse-matmul-epilogue), "
                    "which computes chains of elementwise ops (bias add, GELU, "
                    "residual add, scaling, activation gradients) and the "
                    "norms, softmax and cross-entropy they feed in one loop "
                    "nest each (same results, bit for bit on one thread)"),
           cl::cat(braidcCategory));

static cl::opt<bool> noMatmulEpilogue(
    "no-matmul-epilogue",
    cl::desc("Skip braid-fuse-matmul-epilogue, which folds a bias add over "
             "a matmul's rows (and a tanh GELU after it) into the matmul's "
             "GEMM call (CPU: applied to each block of the product; CUDA: "
             "cuBLASLt's BIAS / GELU_BIAS epilogues). --no-fuse skips it "
             "too"),
    cl::cat(braidcCategory));

static cl::opt<bool> noBufferReuse(
    "no-buffer-reuse",
    cl::desc("Give every allocation site of the generated code its own buffer, "
             "kept for the whole run. Default: each function's buffers share "
             "one arena, planned at compile time from the values' lifetimes, "
             "and elementwise ops and optimizer updates write in place where "
             "an operand dies (same results, bit for bit)"),
    cl::cat(braidcCategory));

static cl::opt<bool> memoryReport(
    "memory-report",
    cl::desc("Print the memory plan: the bytes each rank's program holds "
             "(parameters, gradients, optimizer state, activations, "
             "workspace, total; per pipeline stage) and its arenas"),
    cl::cat(braidcCategory));

/// Prints the memory plan braid-lower-to-emitc attached to `module`.
static void printMemoryReport(ModuleOp module, raw_ostream &os) {
  auto stages = module->getAttrOfType<ArrayAttr>("braidc.memory_plan");
  auto reuse = module->getAttrOfType<BoolAttr>("braidc.buffer_reuse");
  if (!stages || !reuse)
    return;
  os << "memory plan per rank (bytes; buffer reuse "
     << (reuse.getValue() ? "on" : "off")
     << "; the program's own buffers, not the runtime's or MPI's):\n";
  const char *columns[] = {"parameters",  "gradients", "optimizer_state",
                           "activations", "workspace", "total",
                           "arenas"};
  os << llvm::format("%-8s", "ranks");
  for (const char *c : columns)
    os << llvm::format(" %15s", c);
  os << llvm::format(" %10s\n", "total MiB");
  for (Attribute a : stages) {
    auto dict = cast<DictionaryAttr>(a);
    auto get = [&](StringRef name) {
      return dict.getAs<IntegerAttr>(name).getInt();
    };
    std::string label =
        stages.size() == 1 ? "all" : "stage " + std::to_string(get("stage"));
    os << llvm::format("%-8s", label.c_str());
    for (const char *c : columns)
      os << llvm::format(" %15lld", (long long)get(c));
    os << llvm::format(" %10.2f\n", get("total") / 1048576.0);
  }
}

/// Whether a training option was given (training is implied).
static bool trainingRequested() {
  if (train)
    return true;
  for (cl::Option *o : std::initializer_list<cl::Option *>{
           &meshSpec,
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC) &NAME##Flag,
#include "braid/Pipelines/TrainingOptions.def"
       })
    if (o->getNumOccurrences())
      return true;
  return false;
}

/// The training options from the command line; fails with a message on a
/// malformed --mesh or options that do not fit together.
static FailureOr<braid::TrainingOptions> trainingOptions() {
  braid::TrainingOptions t;
  SmallVector<StringRef> parts;
  if (meshSpec.getNumOccurrences() && meshSpec != "auto")
    StringRef(meshSpec).split(parts, ',', -1, /*KeepEmpty=*/true);
  llvm::StringSet<> seen;
  for (StringRef part : parts) {
    auto [axis, value] = part.split('=');
    axis = axis.trim();
    int64_t n = 0;
    int64_t *slot = axis == "dp"   ? &t.dp
                    : axis == "tp" ? &t.tp
                    : axis == "pp" ? &t.pp
                                   : nullptr;
    if (!slot || value.trim().getAsInteger(10, n) || n < 1) {
      errs() << "braidc: --mesh: expected dp=D,tp=T,pp=P with positive "
                "degrees, got '"
             << part << "' in '" << meshSpec << "'\n";
      return failure();
    }
    if (!seen.insert(axis).second) {
      errs() << "braidc: --mesh: axis '" << axis << "' is given twice in '"
             << meshSpec << "'\n";
      return failure();
    }
    *slot = n;
  }
  // 0 is the options' "pick the default"; given by hand it is a mistake.
  if (microbatchesFlag.getNumOccurrences() && microbatchesFlag < 1) {
    errs() << "braidc: --microbatches must be positive, got "
           << microbatchesFlag
           << "\n";
    return failure();
  }
  if (chunksFlag.getNumOccurrences() && chunksFlag < 1) {
    errs() << "braidc: --chunks must be positive, got " << chunksFlag << "\n";
    return failure();
  }
  bool autoMesh = meshSpec.getNumOccurrences() && meshSpec == "auto";
  if (chunksFlag.getNumOccurrences() && t.pp == 1 && !autoMesh) {
    errs() << "braidc: --chunks splits pipeline stages, but the mesh has no "
              "pp axis\n";
    return failure();
  }
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  t.NAME = NAME##Flag;
#include "braid/Pipelines/TrainingOptions.def"
  // With --mesh auto the degrees are not known yet: checked on the plan.
  if (autoMesh) {
    if (llvm::Expected<SmallVector<int64_t>> layers =
            braid::parseStageLayers(t.stageLayers);
        !layers) {
      errs() << "braidc: " << llvm::toString(layers.takeError()) << "\n";
      return failure();
    }
    return t;
  }
  if (llvm::Error error = braid::verifyTrainingOptions(t)) {
    errs() << "braidc: " << llvm::toString(std::move(error)) << "\n";
    return failure();
  }
  return t;
}

/// The planning flags without --mesh auto, or --mesh auto without
/// --devices, are mistakes.
static LogicalResult checkPlanningFlags(bool autoMesh) {
  if (autoMesh) {
    if (devices.getNumOccurrences() == 0) {
      errs() << "braidc: --mesh auto needs --devices N (the ranks the plan "
                "uses)\n";
      return failure();
    }
    if (devices < 1) {
      errs() << "braidc: --devices must be positive, got " << devices << "\n";
      return failure();
    }
    if (nodes.getNumOccurrences() && (nodes < 1 || devices % nodes != 0)) {
      errs() << "braidc: --nodes " << nodes << " must be positive and divide "
             << "--devices " << devices << "\n";
      return failure();
    }
    if (globalBatch.getNumOccurrences() && globalBatch < 1) {
      errs() << "braidc: --global-batch must be positive, got " << globalBatch
             << "\n";
      return failure();
    }
    if (freeMicroBatch && !planOnly) {
      errs() << "braidc: --free-micro-batch plans micro-batches the program "
                "cannot run: it needs --plan-only\n";
      return failure();
    }
    if (topPlans < 1) {
      errs() << "braidc: --top must be positive, got " << topPlans << "\n";
      return failure();
    }
    return success();
  }
  for (cl::Option *o : std::initializer_list<cl::Option *>{
           &devices, &nodes, &deviceMemory, &hardwareFile, &globalBatch,
           &explainPlan, &planOnly, &freeMicroBatch, &topPlans})
    if (o->getNumOccurrences()) {
      errs() << "braidc: --" << o->ArgStr
             << " is a planning option: it needs --mesh auto\n";
      return failure();
    }
  return success();
}

/// "80GiB", "512MiB", "2GB", "1e9" -> bytes.
static std::optional<double> parseSize(StringRef text) {
  text = text.trim();
  struct Unit {
    const char *suffix;
    double scale;
  } units[] = {{"TiB", 1024.0 * 1024 * 1024 * 1024},
               {"GiB", 1024.0 * 1024 * 1024},
               {"MiB", 1024.0 * 1024},
               {"KiB", 1024.0},
               {"TB", 1e12},
               {"GB", 1e9},
               {"MB", 1e6},
               {"KB", 1e3},
               {"B", 1}};
  double scale = 1;
  for (const Unit &u : units)
    if (text.consume_back(u.suffix)) {
      scale = u.scale;
      break;
    }
  double value = 0;
  if (text.trim().getAsDouble(value) || !(value > 0) ||
      !std::isfinite(value * scale))
    return std::nullopt;
  return value * scale;
}

/// --mesh auto: searches the plan and sets `options` to it (as if its flags
/// had been given). Returns an exit status when braidc should stop (an
/// error, or --plan-only).
static std::optional<int> planMesh(ModuleOp module,
                                   braid::TrainingOptions &options) {
  using namespace mlir::braid::plan;
  auto fail = [](const Twine &message) {
    errs() << "braidc: --mesh auto: " << message << "\n";
    return std::optional<int>(1);
  };
  // Ranks that share cores wait for each other differently with their
  // number, so a CPU description calibrated for exactly `devices` ranks
  // (cpu-local-<N>ranks, shipped or in BRAID_HARDWARE_DIR) is preferred.
  std::string hwName = "cpu-local";
  if (hardwareFile.getNumOccurrences()) {
    hwName = hardwareFile;
  } else {
    std::string perRanks =
        formatv("cpu-local-{0}ranks", static_cast<int64_t>(devices)).str();
    if (llvm::is_contained(listHardware(), perRanks))
      hwName = perRanks;
  }
  if (!hardwareFile.getNumOccurrences() && target == "cuda")
    return fail("--target cuda: give the GPU's --hardware (a100-80g, "
                "h100-80g, h200 or a file)");
  Expected<Hardware> hw = loadHardware(hwName);
  if (!hw) {
    std::string message = toString(hw.takeError());
    if (!hardwareFile.getNumOccurrences())
      message += " (the default for CPU programs; write it with braid-plan "
                 "--calibrate, or give --hardware)";
    return fail("--hardware: " + message);
  }
  // --nodes K: N / K devices a node, at most what the file's node holds
  // (fewer leave part of each node unused). The cost model counts
  // concurrent_devices_per_node only up to a node's devices, so a file's
  // core sharing follows the smaller node without changing it here.
  if (nodes.getNumOccurrences()) {
    int perNode = devices / nodes;
    if (perNode > hw->devicesPerNode) {
      int fewest = (devices + hw->devicesPerNode - 1) / hw->devicesPerNode;
      while (devices % fewest != 0)
        ++fewest;
      errs() << formatv("braidc: --nodes {0} puts {1} devices on a node; {2} "
                        "has {3} per node, so {4} devices need --nodes {5} "
                        "or more\n",
                        static_cast<int>(nodes), perNode, hwName,
                        hw->devicesPerNode, static_cast<int>(devices),
                        fewest);
      return 1;
    }
    hw->devicesPerNode = perNode;
  }
  if (deviceMemory.getNumOccurrences()) {
    std::optional<double> bytes = parseSize(deviceMemory);
    if (!bytes)
      return fail("--device-memory: expected a size such as 80GiB, 512MiB, "
                  "2GB or a number of bytes, got '" +
                  deviceMemory + "'");
    hw->deviceMemory = *bytes;
  }
  Expected<ModelCost> model = extractModelCost(module, "forward");
  if (!model)
    return fail(toString(model.takeError()));
  // AdamW's two f32 moments, plus an f32 master copy of 16-bit parameters
  // (mixed precision, as Megatron-LM); SGD's momentum.
  TrainingConfig config;
  config.compiledBuffers = compiledBuffers;
  if (options.precision == "bf16-mixed")
    config.precision = Precision::BF16Mixed;
  config.optimizerBytes = model->elementBytes < 4 ? 12 : 8;
  if (options.optimizer == "sgd")
    config.optimizerBytes = model->elementBytes < 4 ? 8 : 4;
  // --defer-validation holds, until the next step validates it, the state
  // each update started from (the f32 parameter and its f32 optimizer
  // state) and its f32 gradient, sharded as the optimizer state is.
  if (options.deferValidation)
    config.optimizerBytes += 4 + (options.optimizer == "sgd" ? 4 : 8) + 4;
  // The buckets and prefetch the compiled program will have. (Unbucketed
  // gradient reductions, --bucket-mb 0, are still priced as buckets: the
  // model has no per-tensor count for them.)
  if (options.bucketMb > 0)
    config.bucketCapBytes = options.bucketMb * (1 << 20);
  config.gatherBuckets = options.bucketMb > 0;
  config.zero3Prefetch = options.zero3Prefetch;
  PlanCostModel costModel(*model, *hw, config);

  ParallelismLimits limits = getParallelismLimits(module, "forward", devices);
  SearchOptions search;
  search.devices = devices;
  search.microBatchSamples = freeMicroBatch ? 0 : model->batch;
  search.tpDegrees = limits.tpDegrees;
  search.sequenceParallelTpDegrees = limits.sequenceParallelTpDegrees;
  search.illegalTp = limits.illegalTp;
  search.topK = topPlans;
  // Only --explain prints each mesh's need (the no-fit error's is exact).
  search.exactMeshMemory = explainPlan;
  if (globalBatch.getNumOccurrences())
    search.globalBatch = globalBatch;
  else if (microbatchesFlag.getNumOccurrences())
    search.globalBatch = model->batch * microbatchesFlag;
  else
    search.globalBatch = model->batch;
  // Training options given with --mesh auto stay as given.
  if (microbatchesFlag.getNumOccurrences())
    search.microbatches = microbatchesFlag;
  if (scheduleFlag.getNumOccurrences()) {
    std::optional<braid::sched::ScheduleKind> kind =
        braid::sched::parseScheduleKind(scheduleFlag);
    if (!kind)
      return fail("unknown --schedule '" + scheduleFlag + "'");
    search.schedule = *kind;
  }
  if (chunksFlag.getNumOccurrences())
    search.chunks = chunksFlag;
  if (zeroFlag.getNumOccurrences())
    search.zero = zeroFlag;
  if (spFlag.getNumOccurrences())
    search.sequenceParallel = spFlag;
  if (recomputeFlag.getNumOccurrences()) {
    std::optional<Recompute> r = parseRecompute(recomputeFlag);
    if (!r)
      return fail("unknown --recompute '" + recomputeFlag + "'");
    search.recompute = *r;
  }
  if (stageLayersFlag.getNumOccurrences()) {
    Expected<SmallVector<int64_t>> layers =
        braid::parseStageLayers(stageLayersFlag);
    if (!layers)
      return fail(toString(layers.takeError()));
    search.stageLayers = std::vector<int>(layers->begin(), layers->end());
  }

  Expected<SearchResult> result = searchPlans(costModel, search);
  if (!result)
    return fail(toString(result.takeError()));
  if (result->top.empty()) {
    auto [need, budget] =
        formatNeedAndBudget(result->minMemory, result->memoryBudget);
    std::string message =
        formatv("no plan fits in {0} per device on {1} devices; the smallest "
                "requirement found is {2}",
                budget, devices, need)
            .str();
    if (result->minMemoryPlan)
      message += " (" + getPlanFlags(*result->minMemoryPlan) + ")";
    message += ": give more --devices or a larger --device-memory";
    // --explain: each mesh's reason first, as when a plan fits.
    if (explainPlan) {
      printSearchResult(outs(), *result, costModel, true, limits.sequence);
      outs().flush();
    }
    return fail(message);
  }
  const PlanCost &best = result->top.front();
  std::string flags = getPlanFlags(best.plan);
  outs() << formatv("braidc: plan for {0} devices ({1}, global batch {2}): "
                    "{3:F2} ms per step predicted, {4} per device\n",
                    devices, hw->name, result->globalBatch, best.stepTime * 1e3,
                    formatMemory(best.getPeakMemory()));
  outs() << "flags: " << flags << "\n";
  if (explainPlan || planOnly) {
    printSearchResult(outs(), *result, costModel, explainPlan, limits.sequence);
    if (explainPlan) {
      outs() << "the chosen plan:\n";
      printPlanCost(outs(), best, *hw);
    }
  }
  outs().flush();
  if (planOnly)
    return 0;

  // As if the flags had been typed.
  const Plan &p = best.plan;
  options.dp = p.dp;
  options.tp = p.tp;
  options.pp = p.pp;
  options.microbatches = p.microbatches;
  options.zero = p.zero;
  options.sp = p.sequenceParallel;
  options.recompute = getRecomputeName(p.recompute).str();
  if (p.pp > 1) {
    options.schedule = braid::sched::getScheduleKindName(p.schedule).str();
    options.chunks = p.schedule == braid::sched::ScheduleKind::Interleaved1F1B
                         ? p.chunks
                         : 0;
    std::string layers;
    for (size_t i = 0; i < p.stageLayers.size(); ++i)
      layers += (i ? "," : "") + std::to_string(p.stageLayers[i]);
    options.stageLayers = layers;
  }
  if (Error error = braid::verifyTrainingOptions(options))
    return fail("the chosen plan: " + toString(std::move(error)));
  return std::nullopt;
}

static LogicalResult writeFile(StringRef path, StringRef contents) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file) {
    errs() << "braidc: " << error << "\n";
    return failure();
  }
  file->os() << contents;
  file->keep();
  return success();
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions({&braidcCategory, &trainCategory, &planCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "braidc: compile a braid model to a native executable (single device, "
      "a per-device program run on every rank of its mesh, or a pipelined "
      "training step run on every rank of pp x its mesh, by braid-run).\n"
      "\nThe program initialises the parameters and makes the entry's inputs "
      "from --seed as braid-eval does, runs the entry once and prints its "
      "results ('loss <value>' for a single rank-0 result). A training step "
      "(an argument named 'step') runs --steps N times and prints each step's "
      "loss, lr and grad_norm as braid-eval --steps does; it also takes "
      "--data, --save, --resume, --log-every and --trace, on one device too "
      "(a one-rank program on the runtime's context). A program on the "
      "runtime's context takes --timeout S: a collective or transfer that "
      "does not complete within S seconds (default 300, 0: none) ends every "
      "rank with an error naming it.\n");
  bool autoMesh = meshSpec.getNumOccurrences() && meshSpec == "auto";
  if (failed(checkPlanningFlags(autoMesh)))
    return 1;
  if (outputFile.empty() && !(autoMesh && planOnly)) {
    errs() << "braidc: -o PROG is required (only --mesh auto --plan-only "
              "writes nothing)\n";
    return 1;
  }
  // A directory as -o: the C++ went next to it (DIR.cpp) and the linker
  // failed on it.
  if (!outputFile.empty() && sys::fs::is_directory(outputFile)) {
    errs() << "braidc: -o " << outputFile
           << " is a directory; name the file to write\n";
    return 1;
  }
  if (emit != "exe" && emit != "mlir" && emit != "cpp" && emit != "cu") {
    errs() << "braidc: --emit must be exe, mlir, cpp or cu\n";
    return 1;
  }
  if (target != "cpu" && target != "cuda") {
    errs() << "braidc: --target " << target
           << " is not a target; the targets are cpu and cuda\n";
    return 1;
  }
  if (singleProcess && target != "cuda") {
    errs() << "braidc: --single-process is a CUDA target option (a CPU "
              "program on one rank runs without a launcher already)\n";
    return 1;
  }
  if (portable && target != "cpu") {
    errs() << "braidc: --portable is a CPU target option\n";
    return 1;
  }
  if (emit == "cu" && target != "cuda") {
    errs() << "braidc: --emit cu writes the CUDA program: it needs --target "
              "cuda\n";
    return 1;
  }
  auto toolchain = braid::createToolchain(target, cxx);
  // --emit stops before the toolchain: the CUDA program can be written
  // where it cannot be compiled.
  if (!toolchain && emit == "exe") {
    errs() << "braidc: --target " << target << ": "
           << toString(toolchain.takeError()) << "\n";
    return 1;
  }
  if (!toolchain)
    consumeError(toolchain.takeError());
  bool training = trainingRequested();
  if (training && entry.getNumOccurrences()) {
    errs() << "braidc: --entry does not combine with training options: the "
              "program runs the training step derived from @forward\n";
    return 1;
  }
  FailureOr<braid::TrainingOptions> trainOpts = braid::TrainingOptions();
  if (training && failed(trainOpts = trainingOptions()))
    return 1;
  if (singleProcess && trainOpts->dp * trainOpts->tp * trainOpts->pp > 1) {
    errs() << "braidc: --single-process runs one rank, but the mesh has "
           << trainOpts->dp * trainOpts->tp * trainOpts->pp << "\n";
    return 1;
  }

  DialectRegistry registry;
  registry.insert<braid::BraidDialect, func::FuncDialect, arith::ArithDialect,
                  tensor::TensorDialect, emitc::EmitCDialect>();
  MLIRContext context(registry);
  // Diagnostics as file:line:col with the source line, without the op
  // printed in generic form (a whole function when a pass reports on one).
  context.printOpOnDiagnostic(false);
  std::string error;
  auto input = openInputFile(inputFile, &error);
  if (!input) {
    errs() << "braidc: " << error << "\n";
    return 1;
  }
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  if (autoMesh) {
    std::optional<int> status = planMesh(*module, *trainOpts);
    if (status)
      return *status;
  }
  if (training) {
    // The training step first: the program's signature is train_step's.
    PassManager trainPm(&context);
    braid::buildTrainingPipeline(trainPm, *trainOpts);
    if (failed(trainPm.run(*module)))
      return 1;
    entry = "train_step";
  }
  FailureOr<braid::ProgramSignature> signature =
      braid::getProgramSignature(*module, entry);
  if (failed(signature))
    return 1;
  bool isStep = signature->isTrainingStep();

  PassManager pm(&context);
  braid::CodegenOptions options;
  options.entry = entry;
  options.spmd = isStep;
  options.target = target;
  options.fuse = !noFuse;
  options.fuseMatmulEpilogue = !noFuse && !noMatmulEpilogue;
  options.bufferReuse = !noBufferReuse;
  braid::buildCodegenPipeline(pm, options);
  if (failed(pm.run(*module)))
    return 1;
  if (memoryReport)
    printMemoryReport(*module, outs());

  std::string emitcText;
  {
    raw_string_ostream os(emitcText);
    module->print(os);
  }
  std::string cpp;
  {
    raw_string_ostream os(cpp);
    os << "// Generated by braidc from " << inputFile << " (entry @" << entry
       << ").\n";
    if (failed(emitc::translateToCpp(*module, os)))
      return 1;
    braid::printProgramMain(os, *signature, seed);
  }

  std::string commandPath;
  if (!dumpDir.empty()) {
    if (std::error_code ec = sys::fs::create_directories(dumpDir)) {
      errs() << "braidc: cannot create " << dumpDir << ": " << ec.message()
             << "\n";
      return 1;
    }
    SmallString<256> path(dumpDir);
    sys::path::append(path, "program.emitc.mlir");
    if (failed(writeFile(path, emitcText)))
      return 1;
    path = dumpDir;
    sys::path::append(path, target == "cuda" ? "program.cu" : "program.cpp");
    if (failed(writeFile(path, cpp)))
      return 1;
    path = dumpDir;
    sys::path::append(path, "compile.sh");
    commandPath = path.str().str();
  }
  if (emit == "mlir")
    return failed(writeFile(outputFile, emitcText));
  if (emit == "cpp" || emit == "cu")
    return failed(writeFile(outputFile, cpp));

  // The C++ goes next to the executable unless a dump directory holds it.
  SmallString<256> cppPath;
  if (!dumpDir.empty()) {
    cppPath = dumpDir;
    sys::path::append(cppPath, target == "cuda" ? "program.cu" : "program.cpp");
  } else {
    cppPath = outputFile;
    cppPath += target == "cuda" ? ".cu" : ".cpp";
    if (failed(writeFile(cppPath, cpp)))
      return 1;
  }
  braid::CompileJob job{cppPath.str().str(), outputFile,
                        signature->mesh.present};
  job.singleProcess = singleProcess;
  job.portable = portable;
  Error compiled = (*toolchain)->compile(job, commandPath);
  if (dumpDir.empty())
    sys::fs::remove(cppPath);
  if (compiled) {
    errs() << "braidc: " << toString(std::move(compiled)) << "\n";
    return 1;
  }
  return 0;
}

//===- braid-plan.cpp - Predict the step time and memory of a plan --------===//
//
// Reads a model (braid IR), a hardware description and an explicit parallel
// plan, and prints what the planner's cost model predicts: step time and its
// parts, TFLOP/s per device, per-stage F/B/W and per-rank memory. With
// --calibrate, measures this machine (GEMM, elementwise bandwidth, MPI
// collectives on two ranks) and writes a hardware description instead.
// docs/planner.md explains the model and the output.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Planner/Hardware.h"
#include "braid/Planner/ModelCost.h"
#include "braid/Planner/PlanCost.h"
#include "braid/Schedule/Generators.h"
#include "braid/Support/OutputPath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::plan;
using namespace llvm;

static cl::OptionCategory planCategory("braid-plan options");
static cl::OptionCategory calibrateCategory("calibration (--calibrate)");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<model.mlir> ('-': stdin)"),
                                      cl::init(""), cl::cat(planCategory));
static cl::opt<std::string>
    hardwareName("hardware",
                 cl::desc("Hardware description: a shipped name (see "
                          "--list-hardware) or a JSON file (default a100-80g)"),
                 cl::init("a100-80g"), cl::cat(planCategory));
static cl::opt<bool> listHardwareFlag("list-hardware",
                                      cl::desc("List the shipped hardware "
                                               "descriptions and exit"),
                                      cl::cat(planCategory));
static cl::opt<std::string> entry("entry",
                                  cl::desc("The model's forward function"),
                                  cl::init("forward"), cl::cat(planCategory));
static cl::opt<std::string>
    meshSpec("mesh",
             cl::desc("Mesh degrees, e.g. dp=2,tp=2,pp=2 (each "
                      "defaults to 1)"),
             cl::value_desc("dp=D,tp=T,pp=P"), cl::cat(planCategory));
static cl::opt<std::string>
    scheduleName("schedule",
                 cl::desc("Pipeline schedule with pp > 1: gpipe, 1f1b "
                          "(default), interleaved-1f1b, zb-h1, zb-h2, zb-v, "
                          "auto"),
                 cl::init("1f1b"), cl::cat(planCategory));
static cl::opt<int> chunks("chunks",
                           cl::desc("Model chunks per pipeline rank (default: "
                                    "what the schedule needs)"),
                           cl::init(0), cl::cat(planCategory));
static cl::opt<int>
    microbatches("microbatches",
                 cl::desc("Micro-batches per step (default: pp, or 1)"),
                 cl::init(0), cl::cat(planCategory));
static cl::opt<int64_t> microBatchSize(
    "mbs",
    cl::desc("Samples per micro-batch (default: the model's batch, "
             "dimension 0 of the entry's first argument)"),
    cl::init(0), cl::cat(planCategory));
static cl::opt<int> zero("zero", cl::desc("ZeRO stage 0-3 over dp"),
                         cl::init(0), cl::cat(planCategory));
static cl::opt<bool> sp("sp", cl::desc("Sequence parallelism over tp"),
                        cl::cat(planCategory));
static cl::opt<std::string> recomputeName("recompute",
                                          cl::desc("none (default), full or "
                                                   "selective"),
                                          cl::init("none"),
                                          cl::cat(planCategory));
static cl::opt<std::string> stageLayersSpec(
    "stage-layers",
    cl::desc("Layers per model stage, e.g. 3,3,2 (pp * chunks entries; "
             "default: as even as possible); the first and the last may be "
             "0 (the embedding or the head alone)"),
    cl::cat(planCategory));
static cl::opt<double>
    gradBytes("grad-bytes",
              cl::desc("Bytes per gradient element (default: the "
                       "parameters')"),
              cl::init(0), cl::cat(planCategory));
static cl::opt<double> optimizerBytes(
    "optimizer-bytes",
    cl::desc("Optimizer state bytes per parameter (default 8: AdamW's two "
             "f32 moments; 12 with an f32 master copy)"),
    cl::init(8), cl::cat(planCategory));
static cl::opt<bool> overlapGradReduce(
    "overlap-grad-reduce",
    cl::desc("Overlap the data-parallel gradient reduction with the "
             "backward (default: after the pipeline, as Megatron-LM 2021)"),
    cl::cat(planCategory));
static cl::opt<bool> tiedSumAtEnd(
    "tied-grad-at-step-end",
    cl::desc("Cost a tied parameter's gradient (GPT's wte) summed after "
             "the pipeline, as Megatron-LM and Braid's pipelines do: the "
             "first stage's W in the schedule, one exchange of the tied "
             "gradient after it (=false: the first stage's whole W after "
             "the schedule)"),
    cl::init(true), cl::cat(planCategory));
static cl::opt<bool> reducePerMicrobatch(
    "grad-reduce-per-microbatch",
    cl::desc("Without a pipeline, cost the data-parallel gradient reduction "
             "in every micro-batch, a bucket per layer, as braidc's "
             "programs run it (=false: once per step after the "
             "accumulation, as Megatron-LM)"),
    cl::init(true), cl::cat(planCategory));
static cl::opt<bool> compiledBuffers(
    "compiled-buffers",
    cl::desc("Also count the buffers braidc's compiled program holds "
             "(memory column 'buffers': a pipeline stage's gradient "
             "means and tied partials, receive buffers, the layers' and "
             "pieces' arenas, the gradient accumulation loop's sums, "
             "sequence-parallel and ZeRO reduce_scatter staging, a "
             "pipeline micro-batch's W results, what B hands a deferred "
             "W), and places the tied parameter where it keeps it (on the "
             "last pipeline rank too, its optimizer state there only); "
             "braidc --mesh auto counts them by default"),
    cl::cat(planCategory));
static cl::opt<std::string> precisionFlag(
    "precision",
    cl::desc("f32 (default) or bf16-mixed, as braidc's --precision: "
             "bf16-mixed counts the saved activations (and a pipeline's "
             "hand-offs within a chunk) at 2 bytes an element; "
             "cross-stage transfers, gradients, master weights and "
             "optimizer state stay f32, and compute is costed as f32"),
    cl::init("f32"), cl::cat(planCategory));
static cl::opt<int> repeat(
    "repeat",
    cl::desc("Evaluate the plan this many times and print the mean time of "
             "one evaluation (the cost a search pays per plan)"),
    cl::init(1), cl::cat(planCategory));
static cl::opt<bool> printModelCosts("model-costs",
                                     cl::desc("Also print the per-segment "
                                              "costs read from the model"),
                                     cl::cat(planCategory));
static cl::opt<bool>
    jsonOutput("json", cl::desc("Print the prediction as JSON instead"),
               cl::cat(planCategory));

static cl::opt<bool>
    calibrate("calibrate",
              cl::desc("Measure this machine (kernels, collectives, a "
                       "rank's fixed memory) and write a hardware "
                       "description (-o FILE, default stdout)"),
              cl::cat(calibrateCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("filename"),
                                       cl::init("-"),
                                       cl::cat(calibrateCategory));
static cl::opt<std::string>
    mpirun("mpirun",
           cl::desc("The mpirun that launches the calibration's ranks "
                    "(default: $BRAID_MPIRUN or mpirun)"),
           cl::init(""), cl::cat(calibrateCategory));
static cl::opt<int> calibrationRanks("ranks",
                                     cl::desc("Ranks for the collective "
                                              "timings and the fixed "
                                              "memory (default 2)"),
                                     cl::init(2), cl::cat(calibrateCategory));
// Registered as --threads in main (libLLVM registers a hidden --threads of
// its own when it loads).
static cl::opt<int> calibrationThreads(
    "calibrate-threads",
    cl::desc("Threads per rank for the calibration (default: as braid-run "
             "gives them, $OMP_NUM_THREADS, else cores / ranks, at least 1)"),
    cl::init(0), cl::cat(calibrateCategory));
static cl::opt<bool> quick("quick",
                           cl::desc("Smaller sizes and fewer repetitions "
                                    "(for tests)"),
                           cl::cat(calibrateCategory));
static cl::opt<bool> commWorker("calibrate-comm-worker", cl::Hidden,
                                cl::desc("Internal: one rank of the "
                                         "collective timings"));

static int fail(const Twine &message) {
  errs() << "braid-plan: " << message << "\n";
  return 1;
}

static FailureOr<Plan> readPlan(const ModelCost &model) {
  Plan plan;
  SmallVector<StringRef> parts;
  if (!meshSpec.empty())
    StringRef(meshSpec).split(parts, ',', -1, /*KeepEmpty=*/true);
  llvm::StringSet<> seen;
  for (StringRef part : parts) {
    auto [axis, value] = part.split('=');
    axis = axis.trim();
    int n = 0;
    int *slot = axis == "dp"   ? &plan.dp
                : axis == "tp" ? &plan.tp
                : axis == "pp" ? &plan.pp
                               : nullptr;
    if (!slot || value.trim().getAsInteger(10, n) || n < 1 ||
        !seen.insert(axis).second) {
      fail("--mesh: expected dp=D,tp=T,pp=P with positive degrees, each "
           "once, got '" +
           part + "' in '" + meshSpec + "'");
      return failure();
    }
    *slot = n;
  }
  std::optional<sched::ScheduleKind> kind =
      sched::parseScheduleKind(scheduleName);
  if (!kind) {
    std::string names;
    for (sched::ScheduleKind k : sched::getAllScheduleKinds())
      names +=
          (names.empty() ? "" : ", ") + sched::getScheduleKindName(k).str();
    fail("--schedule: unknown schedule '" + scheduleName + "' (expected " +
         names + ")");
    return failure();
  }
  plan.schedule = *kind;
  plan.chunks = chunks;
  plan.microbatches = microbatches ? microbatches : plan.pp;
  plan.microBatchSize = microBatchSize ? microBatchSize : model.batch;
  plan.zero = zero;
  plan.sequenceParallel = sp;
  std::optional<Recompute> r = parseRecompute(recomputeName);
  if (!r) {
    fail("--recompute: expected none, full or selective, got '" +
         recomputeName + "'");
    return failure();
  }
  plan.recompute = *r;
  if (!stageLayersSpec.empty()) {
    SmallVector<StringRef> sizes;
    StringRef(stageLayersSpec).split(sizes, ',');
    for (StringRef s : sizes) {
      int n = 0;
      if (s.trim().getAsInteger(10, n)) {
        fail("--stage-layers: expected comma-separated layer counts, got '" +
             stageLayersSpec + "'");
        return failure();
      }
      plan.stageLayers.push_back(n);
    }
  }
  return plan;
}

static json::Value toJson(const PlanCost &c) {
  json::Array stages, memory;
  for (const StageCost &s : c.stages)
    stages.push_back(json::Object{{"first_layer", s.firstLayer},
                                  {"layers", s.numLayers},
                                  {"forward", s.forward},
                                  {"backward", s.backward},
                                  {"weight", s.weight},
                                  {"tp_comm", s.tpComm},
                                  {"kernel_overhead", s.overhead},
                                  {"activation_bytes", s.activationBytes},
                                  {"params", s.params}});
  for (const RankMemory &m : c.memory)
    memory.push_back(json::Object{{"params", m.params},
                                  {"grads", m.grads},
                                  {"optimizer", m.optimizer},
                                  {"activations", m.activations},
                                  {"workspace", m.workspace},
                                  {"buffers", m.buffers},
                                  {"total", m.getTotal()}});
  json::Array collectives;
  for (const CollectiveCount &k : c.collectives)
    collectives.push_back(json::Object{{"rank", k.rank},
                                       {"axis", k.axis},
                                       {"kind", k.kind},
                                       {"what", k.what},
                                       {"count", k.count},
                                       {"bytes", k.bytes}});
  return json::Object{
      {"plan", c.plan.str()},
      {"step_time", c.stepTime},
      {"pipeline_time", c.pipelineTime},
      {"compute_time", c.computeTime},
      {"matmul_time", c.computeByClass[(int)OpClass::Matmul]},
      {"attention_time", c.computeByClass[(int)OpClass::Attention] +
                             c.computeByClass[(int)OpClass::AttentionBackward]},
      {"memory_bound_time", c.computeByClass[(int)OpClass::Memory]},
      {"rowwise_time", c.computeByClass[(int)OpClass::RowWise]},
      {"loss_time", c.computeByClass[(int)OpClass::Loss]},
      {"kernel_overhead_time", c.overheadTime},
      {"tp_comm_time", c.tpCommTime},
      {"bubble_time", c.bubbleTime},
      {"bubble_rate", c.bubbleRate},
      {"dp_comm_time", c.dpCommTime},
      {"step_end_comm_time", c.stepEndCommTime},
      {"optimizer_time", c.optimizerTime},
      {"tp_comm_bytes", c.tpCommBytes},
      {"pp_comm_bytes", c.ppCommBytes},
      {"dp_comm_bytes", c.dpCommBytes},
      {"model_flops", c.modelFlops},
      {"executed_flops", c.executedFlops},
      {"flops_per_device", c.flopsPerDevice},
      {"mfu", c.mfu},
      {"samples_per_second", c.samplesPerSecond},
      {"peak_memory", c.getPeakMemory()},
      {"fits", c.fits},
      {"stages", std::move(stages)},
      {"memory", std::move(memory)},
      {"collectives", std::move(collectives)}};
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // The worker is launched by mpirun with only its own flag.
  if (argc >= 2 && StringRef(argv[1]) == "--calibrate-comm-worker")
    return runCommWorker(argc, argv);
  // braid-run's flag for the threads per rank, in place of libLLVM's
  // (unused here).
  if (cl::Option *llvmThreads = cl::getRegisteredOptions().lookup("threads"))
    llvmThreads->removeArgument();
  calibrationThreads.setArgStr("threads");
  cl::HideUnrelatedOptions({&planCategory, &calibrateCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "braid-plan: predict a parallel plan's step time and memory\n\n"
      "  braid-plan MODEL.mlir --hardware a100-80g --mesh dp=8,tp=8,pp=2 \\\n"
      "      --schedule interleaved-1f1b --microbatches 16 --recompute full\n"
      "  braid-plan --calibrate -o cpu-local.json\n\n"
      "See docs/planner.md for the cost model and how to read the output.\n");

  if (listHardwareFlag) {
    for (const std::string &name : listHardware())
      outs() << name << "\n";
    return 0;
  }
  if (calibrate) {
    CalibrationOptions options;
    options.mpirun = mpirun;
    options.ranks = calibrationRanks;
    if (calibrationThreads.getNumOccurrences() && calibrationThreads < 1)
      return fail("--threads must be a positive number of threads");
    options.threads = calibrationThreads;
    options.quick = quick;
    options.self = sys::fs::getMainExecutable(argv[0], (void *)&fail);
    // Checked before the minutes of measuring, not after (the file is not
    // opened yet: an existing one stays as it is if calibration fails).
    if (outputFile != "-")
      if (std::string why = whyNotWritable(outputFile); !why.empty())
        return fail("-o " + outputFile + ": " + why);
    Expected<Hardware> hw = calibrateLocal(options, errs());
    if (!hw)
      return fail(toString(hw.takeError()));
    std::string error;
    auto out = openOutputFile(outputFile, &error);
    if (!out)
      return fail(error);
    writeHardware(out->os(), *hw);
    out->keep();
    return 0;
  }
  if (inputFile.empty())
    return fail("no model given (braid-plan MODEL.mlir ...; --help)");

  Expected<Hardware> hw = loadHardware(hardwareName);
  if (!hw)
    return fail(toString(hw.takeError()));

  DialectRegistry registry;
  registry.insert<BraidDialect, func::FuncDialect>();
  MLIRContext context(registry);
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file)
    return fail(error);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  Expected<ModelCost> model = extractModelCost(*module, entry);
  if (!model)
    return fail(inputFile + ": " + toString(model.takeError()));
  FailureOr<Plan> plan = readPlan(*model);
  if (failed(plan))
    return 1;
  // Written so that NaN fails too (it predicted a plan from NaN bytes).
  if (!(gradBytes >= 0) || !std::isfinite(gradBytes))
    return fail(formatv("--grad-bytes: expected a finite number of bytes >= "
                        "0 (0: the parameters'), got {0}",
                        gradBytes.getValue())
                    .str());
  if (!(optimizerBytes >= 0) || !std::isfinite(optimizerBytes))
    return fail(formatv("--optimizer-bytes: expected a finite number of "
                        "bytes >= 0, got {0}",
                        optimizerBytes.getValue())
                    .str());
  if (repeat < 1)
    return fail("--repeat: expected at least 1 evaluation, got " +
                Twine(repeat));
  TrainingConfig config;
  config.gradBytes = gradBytes;
  config.optimizerBytes = optimizerBytes;
  config.overlapGradientReduce = overlapGradReduce;
  config.tiedGradientAtStepEnd = tiedSumAtEnd;
  config.gradientReductionPerMicrobatch = reducePerMicrobatch;
  config.compiledBuffers = compiledBuffers;
  if (precisionFlag == "bf16-mixed")
    config.precision = Precision::BF16Mixed;
  else if (precisionFlag != "f32")
    return fail("--precision: expected f32 or bf16-mixed, got '" +
                precisionFlag + "'");
  PlanCostModel costModel(*model, *hw, config);
  auto start = std::chrono::steady_clock::now();
  Expected<PlanCost> cost = costModel.evaluate(*plan);
  if (!cost)
    return fail(toString(cost.takeError()));
  double first =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (repeat > 1) {
    start = std::chrono::steady_clock::now();
    for (int i = 1; i < repeat; ++i)
      cantFail(costModel.evaluate(*plan).takeError());
    double rest =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    errs() << formatv("braid-plan: first evaluation {0:F3} ms (generates "
                      "the schedule), then {1:F3} ms each over {2}\n",
                      first * 1e3, rest / (repeat - 1) * 1e3, repeat - 1);
  }
  if (jsonOutput) {
    outs() << formatv("{0:2}", toJson(*cost)) << "\n";
    return 0;
  }
  if (printModelCosts) {
    printModelCost(outs(), *model, plan->recompute);
    outs() << "\n";
  }
  printPlanCost(outs(), *cost, *hw);
  return 0;
}

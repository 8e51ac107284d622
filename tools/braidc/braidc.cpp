//===- braidc.cpp - Compile a braid model to a native executable ----------===//
//
// braidc MODEL.mlir -o PROG [--entry forward] [--emit exe|mlir|cpp]
//        [--dump-dir DIR] [--seed N]
//
// Runs the codegen pipeline (braid/Pipelines/BraidPipeline.h), translates
// the EmitC module to C++ with MLIR's C++ emitter, adds a main() that makes
// the entry's inputs as braid-eval does and prints its results, and compiles
// and links it against the runtime (paths fixed at build time, see
// tools/braidc/CMakeLists.txt and docs/codegen.md). Single-device, per-device
// (a mesh) and pipelined (a scheduled braid.pipeline: an extra axis "pp")
// programs.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Pipelines/BraidPipeline.h"

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
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace llvm;

static cl::OptionCategory braidcCategory("braidc options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                                      cl::Required, cl::cat(braidcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("PROG"), cl::Required,
                                       cl::cat(braidcCategory));
static cl::opt<std::string> entry("entry",
                                  cl::desc("The function the program runs "
                                           "(default: forward)"),
                                  cl::init("forward"), cl::cat(braidcCategory));
static cl::opt<std::string>
    emit("emit",
         cl::desc("What to write: exe (an executable, the default), mlir (the "
                  "EmitC module) or cpp (the C++ program)"),
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
static cl::opt<std::string> cxx("cxx", cl::desc("The C++ compiler"),
                                cl::init(BRAID_CXX), cl::cat(braidcCategory));

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
                      "1); the program runs on dp*tp*pp ranks"),
             cl::value_desc("dp=D,tp=T,pp=P"), cl::cat(trainCategory));
static cl::opt<std::string>
    scheduleName("schedule",
                 cl::desc("Pipeline schedule with pp > 1: gpipe, 1f1b "
                          "(default), interleaved-1f1b, zb-h1, zb-h2, zb-v, "
                          "auto"),
                 cl::init("1f1b"), cl::cat(trainCategory));
static cl::opt<int64_t>
    microbatches("microbatches",
                 cl::desc("Micro-batches per step (default: pp, or 1); the "
                          "program's inputs stack them"),
                 cl::init(0), cl::cat(trainCategory));
static cl::opt<int64_t>
    chunks("chunks",
           cl::desc("Model chunks per pipeline rank (default: what the "
                    "schedule needs: 2 for interleaved-1f1b and zb-v, else "
                    "1; interleaved-1f1b takes 2 or more)"),
           cl::init(0), cl::cat(trainCategory));
static cl::opt<int64_t> zero("zero", cl::desc("ZeRO stage 0-3 over dp"),
                             cl::init(0), cl::cat(trainCategory));
static cl::opt<bool> sp("sp", cl::desc("Sequence parallelism over tp"),
                        cl::cat(trainCategory));
static cl::opt<std::string>
    recompute("recompute", cl::desc("none (default), full or selective"),
              cl::init("none"), cl::cat(trainCategory));
static cl::opt<std::string> optimizer("optimizer",
                                      cl::desc("adamw (default) or sgd"),
                                      cl::init("adamw"),
                                      cl::cat(trainCategory));
static cl::opt<double> lr("lr", cl::desc("Peak learning rate (3e-4)"),
                          cl::init(3.0e-4), cl::cat(trainCategory));
static cl::opt<double> minLr("min-lr", cl::desc("Final learning rate (0)"),
                             cl::init(0.0), cl::cat(trainCategory));
static cl::opt<int64_t> warmupSteps("warmup-steps",
                                    cl::desc("Linear warm-up steps (0)"),
                                    cl::init(0), cl::cat(trainCategory));
static cl::opt<int64_t> totalSteps("total-steps",
                                   cl::desc("Steps of the decay (1)"),
                                   cl::init(1), cl::cat(trainCategory));
static cl::opt<std::string> decay("decay",
                                  cl::desc("constant (default), linear or "
                                           "cosine"),
                                  cl::init("constant"),
                                  cl::cat(trainCategory));
static cl::opt<double> clipNorm("clip-norm",
                                cl::desc("Gradient-norm clipping (0: off)"),
                                cl::init(0.0), cl::cat(trainCategory));
static cl::opt<bool>
    asyncCollectives("async-collectives",
                     cl::desc("Overlap collectives with the work between "
                              "their start and first use"),
                     cl::cat(trainCategory));
static cl::opt<std::string> target("target",
                                   cl::desc("cpu (the only target so far)"),
                                   cl::init("cpu"), cl::cat(braidcCategory));

/// Whether a training option was given (training is implied).
static bool trainingRequested() {
  if (train)
    return true;
  for (cl::Option *o : std::initializer_list<cl::Option *>{
           &meshSpec, &scheduleName, &microbatches, &chunks, &zero, &sp,
           &recompute,
           &optimizer, &lr, &minLr, &warmupSteps, &totalSteps, &decay,
           &clipNorm, &asyncCollectives})
    if (o->getNumOccurrences())
      return true;
  return false;
}

/// The training options from the command line; fails with a message on a
/// malformed --mesh or options that do not fit together.
static FailureOr<braid::TrainingOptions> trainingOptions() {
  braid::TrainingOptions t;
  SmallVector<StringRef> parts;
  if (meshSpec.getNumOccurrences())
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
  if (microbatches.getNumOccurrences() && microbatches < 1) {
    errs() << "braidc: --microbatches must be positive, got " << microbatches
           << "\n";
    return failure();
  }
  if (chunks.getNumOccurrences() && chunks < 1) {
    errs() << "braidc: --chunks must be positive, got " << chunks << "\n";
    return failure();
  }
  if (chunks.getNumOccurrences() && t.pp == 1) {
    errs() << "braidc: --chunks splits pipeline stages, but the mesh has no "
              "pp axis\n";
    return failure();
  }
  t.chunks = chunks;
  t.zero = zero;
  t.sp = sp;
  t.schedule = scheduleName;
  t.microbatches = microbatches;
  t.recompute = recompute;
  t.optimizer = optimizer;
  t.lr = lr;
  t.minLr = minLr;
  t.warmupSteps = warmupSteps;
  t.totalSteps = totalSteps;
  t.decay = decay;
  t.clipNorm = clipNorm;
  t.asyncCollectives = asyncCollectives;
  if (llvm::Error error = braid::verifyTrainingOptions(t)) {
    errs() << "braidc: " << llvm::toString(std::move(error)) << "\n";
    return failure();
  }
  return t;
}

namespace {
/// What main() needs to know about the entry's arguments and results.
struct TensorInfo {
  std::string name;
  RankedTensorType type;
  int64_t range = 0;   // integer inputs: braid.range
  bool isStep = false; // the step number of a training step
  /// An argument with braid.block_of: the whole shape and the block spec of
  /// braid_rt_program_block (per dimension: the number of axes, their
  /// indices); empty otherwise.
  std::vector<int64_t> global, spec;
  bool sharded = false;
};

/// The module's braid.mesh: a per-device program runs on its devices.
struct MeshInfo {
  bool present = false;
  std::vector<int64_t> dims;
  std::vector<std::string> names;
};
} // namespace

static MeshInfo meshInfo;

static std::string cType(Type element) {
  if (element.isF32())
    return "float";
  return element.isInteger(32) ? "int32_t" : "int64_t";
}

static std::string suffix(Type element) {
  if (element.isF32())
    return "f32";
  return element.isInteger(32) ? "i32" : "i64";
}

/// Reads the entry's signature before lowering; errors on the function.
static FailureOr<std::pair<std::vector<TensorInfo>, std::vector<TensorInfo>>>
getSignature(ModuleOp module) {
  auto fn = module.lookupSymbol<func::FuncOp>(entry);
  if (!fn) {
    module.emitError() << "no function @" << entry << " to compile";
    return failure();
  }
  std::vector<TensorInfo> args, results;
  braid::MeshOp mesh;
  for (braid::MeshOp m : module.getOps<braid::MeshOp>()) {
    if (mesh)
      return m.emitError() << "is a second braid.mesh; braidc compiles "
                              "programs on one mesh";
    mesh = m;
    meshInfo.present = true;
    meshInfo.dims.assign(m.getShape().begin(), m.getShape().end());
    for (Attribute a : m.getAxes())
      meshInfo.names.push_back(cast<StringAttr>(a).getValue().str());
  }
  // A scheduled braid.pipeline adds the innermost axis "pp": one stage per
  // rank of the schedule (the lowering's pipeline group).
  int64_t stages = 0;
  fn.walk([&](braid::PipelineOp pipeline) {
    auto driver = module.lookupSymbol<func::FuncOp>(pipeline.getCallee());
    auto schedule =
        driver ? driver->getAttrOfType<DictionaryAttr>("braid.schedule")
               : nullptr;
    if (auto ranks = schedule ? schedule.getAs<ArrayAttr>("ranks") : nullptr)
      stages = std::max<int64_t>(stages, ranks.size());
  });
  if (stages) {
    if (llvm::is_contained(meshInfo.names, "pp"))
      return mesh.emitError() << "has an axis 'pp', the name braidc gives "
                                 "the pipeline axis";
    meshInfo.present = true;
    meshInfo.dims.push_back(stages);
    meshInfo.names.push_back("pp");
  }
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    TensorInfo info;
    auto name = fn.getArgAttrOfType<StringAttr>(i, "braid.name");
    info.name = name ? name.str() : "arg" + std::to_string(i);
    info.type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    if (!info.type)
      return fn.emitError() << "argument '" << info.name
                            << "' is not a ranked tensor";
    Type element = info.type.getElementType();
    if (info.name == "step" && info.type.getRank() == 0 &&
        (element.isInteger(32) || element.isInteger(64))) {
      info.isStep = true;
    } else if (!element.isF32()) {
      auto range = fn.getArgAttrOfType<IntegerAttr>(i, "braid.range");
      if (!range || range.getInt() < 1 ||
          !(element.isInteger(32) || element.isInteger(64)))
        return fn.emitError()
               << "argument '" << info.name << "' of " << info.type
               << " needs to be f32, or i32 or i64 with a positive "
                  "'braid.range' argument attribute, for the program to "
                  "generate it";
      info.range = range.getInt();
    }
    if (auto block =
            fn.getArgAttrOfType<braid::ShardingAttr>(i, "braid.block_of")) {
      if (!mesh || block.getMesh().getValue() != mesh.getSymName() ||
          !block.getPartialAxes().empty() || info.isStep ||
          info.type.getRank() > 16)
        return fn.emitError() << "argument '" << info.name
                              << "' has a block_of that braidc cannot "
                                 "generate (another mesh, a partial sum, "
                                 "the step or a rank above 16)";
      info.sharded = true;
      for (unsigned d = 0; d < info.type.getRank(); ++d) {
        SmallVector<StringRef> axes = block.getDimAxes(d);
        info.spec.push_back(axes.size());
        int64_t count = 1;
        for (StringRef a : axes) {
          unsigned index = *mesh.getAxisIndex(a);
          info.spec.push_back(index);
          count *= mesh.getShape()[index];
        }
        info.global.push_back(info.type.getDimSize(d) * count);
      }
    }
    args.push_back(info);
  }
  unsigned numResults = fn.getNumResults();
  for (unsigned i = 0; i < numResults; ++i) {
    TensorInfo info;
    auto name = fn.getResultAttrOfType<StringAttr>(i, "braid.name");
    info.name = name ? name.str()
                     : numResults == 1 ? "loss" : "result" + std::to_string(i);
    info.type = dyn_cast<RankedTensorType>(fn.getResultTypes()[i]);
    if (!info.type)
      return fn.emitError() << "result " << i << " is not a ranked tensor";
    results.push_back(info);
  }
  return std::make_pair(args, results);
}

/// main(): initialise the parameters, make the inputs as braid-eval does
/// (same seed, same names), run the entry (a training step: --steps times,
/// on the same inputs, feeding the step number), print its results.
static void writeMain(raw_ostream &os, const std::vector<TensorInfo> &args,
                      const std::vector<TensorInfo> &results) {
  const TensorInfo *step = nullptr;
  for (const TensorInfo &arg : args)
    if (arg.isStep)
      step = &arg;
  os << R"(
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

)";
  // Leaving after a bad argument: a program on the runtime's context
  // releases it first (MPI_Finalize), as a successful run does.
  os << "static int braid_program_exit(int code) {\n";
  if (meshInfo.present)
    os << "  fflush(stdout);\n  braid_rt_program_spmd_finish();\n";
  os << "  return code;\n}\n\nint main(int argc, char **argv) {\n";
  if (meshInfo.present) {
    // One program on every rank of the mesh; only rank 0 prints.
    os << "  static const int64_t braid_mesh_dims[] = {";
    for (auto [i, d] : llvm::enumerate(meshInfo.dims))
      os << (i ? ", " : "") << d;
    os << "};\n  static const char *const braid_mesh_names[] = {";
    for (auto [i, n] : llvm::enumerate(meshInfo.names))
      os << (i ? ", " : "") << "\"" << n << "\"";
    // Options the runtime's context takes when it is created.
    os << "};\n  for (int i = 1; i + 1 < argc; ++i) {\n"
       << "    if (strcmp(argv[i], \"--trace\") == 0)\n"
       << "      braid_rt_program_spmd_trace = 1;\n"
       << "    if (strcmp(argv[i], \"--timeout\") == 0) {\n"
       << "      char *end;\n"
       << "      braid_rt_program_spmd_timeout = strtod(argv[i + 1], &end);\n"
       << "      if (end == argv[i + 1] || *end || "
          "!(braid_rt_program_spmd_timeout >= 0)) {\n"
       << "        fprintf(stderr, \"error: --timeout needs a number of "
          "seconds >= 0 (0: none), got '%s'\\n\", argv[i + 1]);\n"
       << "        return 2;\n      }\n    }\n  }\n"
       << "  braid_rt_program_spmd_start(&argc, &argv, "
       << meshInfo.dims.size() << ", braid_mesh_dims, braid_mesh_names);\n"
       << "  if (braid_rt_program_spmd_rank() != 0 && "
          "!freopen(\"/dev/null\", \"w\", stdout))\n    return 1;\n";
  }
  os << R"(  uint64_t seed = )"
     << seed << R"(ULL;
  int64_t steps = 1, start_step = 0;
  int64_t log_every = 1;
  int have_start_step = 0;
  const char *save_dir = NULL, *resume_dir = NULL, *trace_file = NULL;
  const char *data_source = NULL;
  int token_bytes = 2, dump = 0;
  uint64_t value = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--dump") == 0 && )"
     << (step ? "0" : "1") << R"() {
      dump = 1;
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      if (!braid_rt_program_parse_flag("--seed", argv[++i], 0, UINT64_MAX,
                                       &seed))
        return braid_program_exit(2);
    } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      if (!braid_rt_program_parse_flag("--steps", argv[++i], 0, INT64_MAX,
                                       &value))
        return braid_program_exit(2);
      steps = (int64_t)value;
    } else if (strcmp(argv[i], "--start-step") == 0 && i + 1 < argc) {
      if (!braid_rt_program_parse_flag("--start-step", argv[++i], 0,
                                       INT64_MAX, &value))
        return braid_program_exit(2);
      start_step = (int64_t)value;
      have_start_step = 1;
    } else if (strcmp(argv[i], "--save") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      save_dir = argv[++i];
    } else if (strcmp(argv[i], "--resume") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      resume_dir = argv[++i];
    } else if (strcmp(argv[i], "--log-every") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      if (!braid_rt_program_parse_flag("--log-every", argv[++i], 1,
                                       INT64_MAX, &value))
        return braid_program_exit(2);
      log_every = (int64_t)value;
    } else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      trace_file = argv[++i];
    } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc && )"
     << (meshInfo.present ? "1" : "0") << R"() {
      ++i; /* read before the context was created */
    } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      data_source = argv[++i];
    } else if (strcmp(argv[i], "--token-bytes") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      if (!braid_rt_program_parse_flag("--token-bytes", argv[++i], 2, 4,
                                       &value))
        return braid_program_exit(2);
      if (value == 3) {
        fprintf(stderr, "error: --token-bytes must be 2 or 4, got 3\n");
        return braid_program_exit(2);
      }
      token_bytes = (int)value;
    } else {
      fprintf(stderr, "usage: %s [--seed N] [--steps N] [--start-step N])"
     << (step ? " [--log-every K] [--data synthetic|FILE] [--token-bytes 2|4]"
              : " [--dump]")
     << (step ? " [--save DIR] [--resume DIR] [--trace FILE]" : "")
     << (meshInfo.present ? " [--timeout S]" : "")
     << R"(\n",
              argv[0]);
      return braid_program_exit(2);
    }
  }
  )" << braid::kProgramInitFunction
     << R"((seed);
)";
  if (step)
    os << "  if (resume_dir) {\n"
       << "    int64_t saved = braid_rt_program_resume(resume_dir, "
          "braid_num_slots, braid_slots, braid_params);\n"
       << "    if (!have_start_step)\n      start_step = saved;\n  }\n";
  else
    os << "  (void)have_start_step; (void)save_dir; (void)resume_dir;\n"
          "  (void)trace_file; (void)log_every; (void)data_source;\n"
          "  (void)token_bytes;\n";
  if (step)
    os << "  (void)dump;\n";
  std::string call = braid::getEmittedFunctionName(entry) + "(";
  // Per argument: the whole buffer and its size, and the code that copies
  // this rank's block of it (sharded arguments).
  std::vector<std::pair<std::string, int64_t>> wholes(args.size());
  std::vector<std::string> extracts(args.size());
  for (auto [i, arg] : llvm::enumerate(args)) {
    Type element = arg.type.getElementType();
    int64_t count = arg.type.getNumElements();
    std::string var = "in" + std::to_string(i);
    os << "  " << cType(element) << " *" << var << " = braid_rt_program_alloc_"
       << suffix(element) << "(" << count << ");\n";
    // A block of a sharded argument: the whole input, then this rank's block.
    std::string whole = var;
    int64_t wholeCount = count;
    if (arg.sharded) {
      whole = var + "_whole";
      wholeCount = 1;
      for (int64_t d : arg.global)
        wholeCount *= d;
      os << "  " << cType(element) << " *" << whole
         << " = braid_rt_program_alloc_" << suffix(element) << "("
         << wholeCount << ");\n";
    }
    if (arg.isStep)
      ;
    else if (element.isF32())
      os << "  braid_rt_program_init_f32(seed, \"" << arg.name
         << "\", BRAID_RT_INIT_NORMAL, 1.0, 0.0, " << wholeCount << ", "
         << whole << ");\n";
    else
      os << "  braid_rt_program_init_ids_" << suffix(element) << "(seed, \""
         << arg.name << "\", "
         << arg.range << ", " << wholeCount << ", " << whole << ");\n";
    if (arg.sharded) {
      auto list = [](const std::vector<int64_t> &v) {
        std::string out;
        for (int64_t x : v)
          out += std::to_string(x) + ", ";
        return out + "0";
      };
      std::string extract;
      raw_string_ostream e(extract);
      e << "  {\n    static const int64_t global[] = {" << list(arg.global)
        << "};\n    static const int64_t spec[] = {" << list(arg.spec)
        << "};\n    braid_rt_program_extract_block(" << whole << ", sizeof(*"
        << whole << "), " << arg.type.getRank() << ", global, spec, " << var
        << ");\n  }\n";
      os << extract;
      extracts[i] = extract;
    }
    wholes[i] = {whole, wholeCount};
    call += var + ", ";
  }
  for (auto [i, result] : llvm::enumerate(results)) {
    Type element = result.type.getElementType();
    std::string var = "out" + std::to_string(i);
    os << "  " << cType(element) << " *" << var << " = braid_rt_program_alloc_"
       << suffix(element) << "(" << result.type.getNumElements() << ");\n";
    call += var + ", ";
  }
  if (call.back() == ' ')
    call.resize(call.size() - 2);
  if (step) {
    // The format of braid-eval --steps.
    auto index = [&](StringRef name) -> int {
      for (auto [i, result] : llvm::enumerate(results))
        if (result.name == name && result.type.getRank() == 0)
          return i;
      return -1;
    };
    unsigned stepIndex = step - args.data();
    std::string dataFeed;
    // Tokens per step: the elements of the 'tokens' argument, if any (the
    // whole argument's, when each rank holds a block: the job's tokens).
    int64_t tokens = 0;
    for (const TensorInfo &arg : args)
      if (arg.name == "tokens") {
        tokens = arg.type.getNumElements();
        if (arg.sharded)
          for (auto [g, l] : llvm::zip(arg.global, arg.type.getShape()))
            tokens = tokens / l * g;
      }
    // --data: tokens and labels (i32 with braid.range, the same whole
    // shape) from the runtime's data source, each step's batch.
    int tokensIndex = -1, labelsIndex = -1;
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (arg.name == "tokens" && arg.range && arg.type.getElementType().isInteger(32))
        tokensIndex = i;
      if (arg.name == "labels" && arg.range && arg.type.getElementType().isInteger(32))
        labelsIndex = i;
    }
    if (tokensIndex >= 0 && labelsIndex >= 0 &&
        wholes[tokensIndex].second == wholes[labelsIndex].second) {
      const TensorInfo &t = args[tokensIndex];
      int64_t seqLen = t.sharded ? t.global.back() : t.type.getShape().back();
      int64_t batch = wholes[tokensIndex].second / seqLen;
      os << "  braid_rt_data_t *braid_data = NULL;\n"
         << "  if (data_source)\n    braid_data = braid_rt_program_data_open("
            "data_source, token_bytes, seed, "
         << t.range << ", " << seqLen << ", " << batch << ");\n";
      dataFeed = "    if (braid_data) {\n      braid_rt_program_data_batch("
                 "braid_data, s, " +
                 std::to_string(batch) + ", " + wholes[tokensIndex].first +
                 ", " + wholes[labelsIndex].first + ");\n" +
                 extracts[tokensIndex] + extracts[labelsIndex] + "    }\n";
    } else {
      os << "  (void)token_bytes;\n  if (data_source) {\n"
         << "    fprintf(stderr, \"error: --data needs a training step "
            "that takes i32 'tokens' and 'labels' with braid.range\\n\");\n"
         << "    return braid_program_exit(2);\n  }\n";
    }
    os << "  double total_s = 0;\n"
       << "  for (int64_t s = start_step; s < start_step + steps; ++s) {\n"
       << "    in" << stepIndex << "[0] = s;\n"
       << "    struct timespec t0, t1;\n"
       << dataFeed
       << "    clock_gettime(CLOCK_MONOTONIC, &t0);\n";
    if (meshInfo.present)
      os << "    if (trace_file) {\n      char name[32];\n"
         << "      snprintf(name, sizeof name, \"step %lld\", (long long)s);\n"
         << "      braid_rt_program_trace_begin(name, \"step\");\n    }\n";
    os << "    " << call << ");\n";
    if (meshInfo.present)
      os << "    if (trace_file)\n      braid_rt_program_trace_end();\n";
    os << "    clock_gettime(CLOCK_MONOTONIC, &t1);\n"
       << "    double step_s = (double)(t1.tv_sec - t0.tv_sec) +\n"
       << "                    1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);\n"
       << "    if (s > start_step || steps == 1)\n      total_s += step_s;\n"
       << "    if ((s - start_step) % log_every != 0 && s != start_step + "
          "steps - 1)\n      continue;\n"
       << "    printf(\"step %lld\", (long long)s);\n";
    for (auto [name, format] : {std::pair<StringRef, StringRef>{"loss", "%.17g"},
                                {"lr", "%.6g"},
                                {"grad_norm", "%.6g"}})
      if (int i = index(name); i >= 0)
        os << "    printf(\" " << name << " " << format << "\", (double)out"
           << i << "[0]);\n";
    os << "    printf(\" ms %.2f\", 1e3 * step_s);\n";
    if (tokens)
      os << "    printf(\" tokens/s %.0f\", " << tokens << " / step_s);\n";
    os << "    printf(\"\\n\");\n  }\n";
    // The first step (allocation, cold caches) is left out of the mean.
    os << "  int64_t timed = steps > 1 ? steps - 1 : steps;\n"
       << "  if (timed > 0) {\n"
       << "    printf(\"summary: %lld steps, %.2f ms/step\", (long long)steps,"
       << " 1e3 * total_s / timed);\n";
    if (tokens)
      os << "    printf(\", %.0f tokens/s\", " << tokens
         << " * timed / total_s);\n";
    os << "    if (timed < steps)\n"
       << "      printf(\" (step %lld excluded)\", (long long)start_step);\n"
       << "    printf(\"\\n\");\n  }\n";
    if (meshInfo.present)
      os << "  if (trace_file)\n    braid_rt_program_trace_write(trace_file);\n"
         << "  if (save_dir)\n    braid_rt_program_save(save_dir, start_step + "
            "steps, braid_num_slots, braid_slots, braid_params,\n"
         << "                          braid_pipeline_mask);\n"
         << "  fflush(stdout);\n  braid_rt_program_spmd_finish();\n";
    os << "  return 0;\n}\n";
    return;
  }
  os << "  " << call << ");\n";
  for (auto [i, result] : llvm::enumerate(results)) {
    std::string var = "out" + std::to_string(i);
    if (result.type.getRank() == 0) {
      os << "  printf(\"" << result.name << " %.17g\\n\", (double)" << var
         << "[0]);\n";
      continue;
    }
    // As braid-eval prints tensors: their sum and L2 norm, and with --dump
    // every value, eight to a line (tests compare them element by element).
    int64_t n = result.type.getNumElements();
    os << "  {\n    double sum = 0, squares = 0;\n    for (int64_t j = 0; j < "
       << n << "; ++j) {\n      sum += (double)"
       << var << "[j];\n      squares += (double)" << var << "[j] * (double)"
       << var << "[j];\n    }\n    printf(\"" << result.name
       << " sum %.17g l2 %.17g\\n\", sum, sqrt(squares));\n"
       << "    for (int64_t j = 0; dump && j < " << n << "; ++j)\n"
       << "      printf(\"%s%.17g%s\", j % 8 ? \" \" : \"  \", (double)" << var
       << "[j],\n             j % 8 == 7 || j + 1 == " << n
       << " ? \"\\n\" : \"\");\n  }\n";
  }
  if (meshInfo.present)
    os << "  fflush(stdout);\n  braid_rt_program_spmd_finish();\n";
  os << "  return 0;\n}\n";
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

/// Compiles `cppPath` into `outputFile` against the runtime.
static LogicalResult compile(StringRef cppPath, StringRef commandPath) {
  auto cxxPath = sys::findProgramByName(cxx);
  if (!cxxPath) {
    errs() << "braidc: C++ compiler '" << cxx << "' not found (--cxx)\n";
    return failure();
  }
  std::vector<std::string> argv = {*cxxPath, "-O2", "-std=c++17", "-w",
                                    "-I" BRAID_RT_INCLUDE_DIR,
                                    cppPath.str(), "-o", outputFile};
  SmallVector<StringRef> libs;
  // The communication layer before the libraries it uses (braid_rt_common).
  if (meshInfo.present)
    StringRef(BRAID_RT_SPMD_LINK_LIBS).split(libs, '|', -1, false);
  StringRef(BRAID_RT_LINK_LIBS).split(libs, '|', -1, /*KeepEmpty=*/false);
  for (StringRef lib : libs) {
    argv.push_back(lib.str());
    // Shared libraries outside the default paths (libomp) need an rpath.
    if (lib.ends_with(".so") || lib.contains(".so."))
      argv.push_back("-Wl,-rpath," + sys::path::parent_path(lib).str());
  }
  argv.push_back("-lm");
  std::string command;
  for (const std::string &a : argv)
    command += a + " ";
  if (!commandPath.empty() && failed(writeFile(commandPath, command + "\n")))
    return failure();
  SmallVector<StringRef> args(argv.begin(), argv.end());
  std::string error;
  int rc = sys::ExecuteAndWait(*cxxPath, args, std::nullopt, {}, 0, 0, &error);
  if (rc != 0) {
    errs() << "braidc: compiling the generated program failed (" << rc
           << (error.empty() ? "" : ": " + error) << "):\n  " << command
           << "\n";
    return failure();
  }
  return success();
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions({&braidcCategory, &trainCategory});
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
  if (emit != "exe" && emit != "mlir" && emit != "cpp") {
    errs() << "braidc: --emit must be exe, mlir or cpp\n";
    return 1;
  }
  if (target != "cpu") {
    errs() << "braidc: --target " << target
           << " is not supported yet; the only target is cpu\n";
    return 1;
  }
  bool training = trainingRequested();
  if (training && entry.getNumOccurrences()) {
    errs() << "braidc: --entry does not combine with training options: the "
              "program runs the training step derived from @forward\n";
    return 1;
  }
  FailureOr<braid::TrainingOptions> trainOpts = braid::TrainingOptions();
  if (training && failed(trainOpts = trainingOptions()))
    return 1;

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
  if (training) {
    // The training step first: the program's signature is train_step's.
    PassManager trainPm(&context);
    braid::buildTrainingPipeline(trainPm, *trainOpts);
    if (failed(trainPm.run(*module)))
      return 1;
    entry = "train_step";
  }
  auto signature = getSignature(*module);
  if (failed(signature))
    return 1;

  // A training step runs on the runtime's context even on one device (a
  // one-rank mesh): checkpoints, data files and traces come with it.
  bool isStep = llvm::any_of(signature->first,
                             [](const TensorInfo &arg) { return arg.isStep; });
  if (isStep && !meshInfo.present) {
    meshInfo.present = true;
    meshInfo.dims = {1};
    meshInfo.names = {"dp"};
  }

  PassManager pm(&context);
  braid::CodegenOptions options;
  options.entry = entry;
  options.spmd = isStep;
  braid::buildCodegenPipeline(pm, options);
  if (failed(pm.run(*module)))
    return 1;

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
    writeMain(os, signature->first, signature->second);
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
    sys::path::append(path, "program.cpp");
    if (failed(writeFile(path, cpp)))
      return 1;
    path = dumpDir;
    sys::path::append(path, "compile.sh");
    commandPath = path.str().str();
  }
  if (emit == "mlir")
    return failed(writeFile(outputFile, emitcText));
  if (emit == "cpp")
    return failed(writeFile(outputFile, cpp));

  // The C++ goes next to the executable unless a dump directory holds it.
  SmallString<256> cppPath;
  if (!dumpDir.empty()) {
    cppPath = dumpDir;
    sys::path::append(cppPath, "program.cpp");
  } else {
    cppPath = outputFile;
    cppPath += ".cpp";
    if (failed(writeFile(cppPath, cpp)))
      return 1;
  }
  LogicalResult compiled = compile(cppPath, commandPath);
  if (dumpDir.empty())
    sys::fs::remove(cppPath);
  return failed(compiled);
}

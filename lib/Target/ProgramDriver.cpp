//===- ProgramDriver.cpp - The main() of a generated program --------------===//
//
// Reads the entry's signature before lowering and prints the main() that
// braidc appends to the translated EmitC module (docs/codegen.md, "The
// program").
//
//===----------------------------------------------------------------------===//

#include "braid/Target/ProgramDriver.h"

#include "braid/Conversion/BraidToEmitC/BraidToEmitC.h"
#include "braid/Dialect/Braid/IR/ArgumentNames.h"
#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace llvm;

bool braid::ProgramSignature::isTrainingStep() const {
  return llvm::any_of(args,
                      [](const ProgramTensor &arg) { return arg.isStep; });
}

/// The C element type of an f32, i32 or i64 tensor, and the suffix of the
/// runtime's program functions for it.
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

/// The element size and float-ness arguments of the program runtime's
/// staging helpers (braid_rt_program_value, _print_tensor) for a tensor.
static std::string elementArgs(Type element) {
  return element.isInteger(64) ? "8, 0" : element.isF32() ? "4, 1" : "4, 0";
}

FailureOr<braid::ProgramSignature> braid::getProgramSignature(ModuleOp module,
                                                              StringRef entry) {
  auto fn = module.lookupSymbol<func::FuncOp>(entry);
  if (!fn) {
    module.emitError() << "no function @" << entry << " to compile";
    return failure();
  }
  ProgramSignature signature;
  signature.entry = entry.str();
  std::vector<ProgramTensor> &args = signature.args;
  std::vector<ProgramTensor> &results = signature.results;
  ProgramMesh &programMesh = signature.mesh;
  braid::MeshOp mesh;
  for (braid::MeshOp m : module.getOps<braid::MeshOp>()) {
    if (mesh)
      return m.emitError() << "is a second braid.mesh; braidc compiles "
                              "programs on one mesh";
    mesh = m;
    programMesh.present = true;
    programMesh.dims.assign(m.getShape().begin(), m.getShape().end());
    for (Attribute a : m.getAxes())
      programMesh.names.push_back(cast<StringAttr>(a).getValue().str());
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
    if (llvm::is_contained(programMesh.names, "pp"))
      return mesh.emitError() << "has an axis 'pp', the name braidc gives "
                                 "the pipeline axis";
    programMesh.present = true;
    programMesh.dims.push_back(stages);
    programMesh.names.push_back("pp");
  }
  // Inputs are generated and fed (--data: 'tokens', 'labels') by name.
  if (failed(braid::verifyDistinctArgumentNames(fn)))
    return failure();
  // braid-train-step's defer-validation adds the inputs previous_step and
  // final (and the result retry); elsewhere those are ordinary names.
  auto hasArgument = [&](StringRef name) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (braid::getArgumentName(fn, i) == name)
        return true;
    return false;
  };
  bool deferredStep = false;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, "braid.name"))
      deferredStep |= name.getValue() == "retry";
  deferredStep &= hasArgument("step") && hasArgument("previous_step") &&
                  hasArgument("final");
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    ProgramTensor info;
    info.name = braid::getArgumentName(fn, i);
    info.type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    if (!info.type)
      return fn.emitError()
             << "argument '" << info.name << "' is not a ranked tensor";
    Type element = info.type.getElementType();
    bool integer = element.isInteger(32) || element.isInteger(64);
    if (info.name == "step" && info.type.getRank() == 0 && integer) {
      info.isStep = true;
    } else if (deferredStep && info.name == "previous_step" &&
               info.type.getRank() == 0 && integer) {
      info.isPreviousStep = true;
    } else if (deferredStep && info.name == "final" &&
               info.type.getRank() == 0 && element.isF32()) {
      info.isFinal = true;
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
      if (auto data = fn.getArgAttrOfType<StringAttr>(i, "braid.data"))
        info.data = data.str();
      else if (info.name == "tokens" || info.name == "labels")
        info.data = info.name;
    }
    if (auto block =
            fn.getArgAttrOfType<braid::ShardingAttr>(i, "braid.block_of")) {
      if (!mesh || block.getMesh().getValue() != mesh.getSymName() ||
          !block.getPartialAxes().empty() || !block.getBlocks().empty() ||
          info.isStep || info.type.getRank() > 16)
        return fn.emitError() << "argument '" << info.name
                              << "' has a block_of that braidc cannot "
                                 "generate (another mesh, a partial sum, "
                                 "a split strided over blocks, the step or "
                                 "a rank above 16)";
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
    ProgramTensor info;
    auto name = fn.getResultAttrOfType<StringAttr>(i, "braid.name");
    info.name = name              ? name.str()
                : numResults == 1 ? "loss"
                                  : "result" + std::to_string(i);
    info.type = dyn_cast<RankedTensorType>(fn.getResultTypes()[i]);
    if (!info.type)
      return fn.emitError() << "result " << i << " is not a ranked tensor";
    results.push_back(info);
  }
  // A training step runs on the runtime's context even on one device (a
  // one-rank mesh): checkpoints, data files and traces come with it.
  if (signature.isTrainingStep() && !programMesh.present) {
    programMesh.present = true;
    programMesh.dims = {1};
    programMesh.names = {"dp"};
  }
  return signature;
}

/// main(): initialise the parameters, make the inputs as braid-eval does
/// (same seed, same names), run the entry (a training step: --steps times,
/// on the same inputs, feeding the step number), print its results. Every
/// buffer is device memory: main() writes and reads them only through the
/// program runtime's staging helpers (program.h), which copy nothing where
/// device memory is host memory.
void braid::printProgramMain(raw_ostream &os, const ProgramSignature &signature,
                             uint64_t seed) {
  const std::vector<ProgramTensor> &args = signature.args;
  const std::vector<ProgramTensor> &results = signature.results;
  const ProgramMesh &mesh = signature.mesh;
  const ProgramTensor *step = nullptr;
  for (const ProgramTensor &arg : args)
    if (arg.isStep)
      step = &arg;
  os << R"(
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

)";
  // The ranks the mesh needs, as text in the executable: braid-run reads
  // it and refuses another -n before launching any rank (a mismatch was
  // found by every rank after MPI started, and a huge -n never got there).
  if (mesh.present) {
    int64_t ranks = 1;
    for (int64_t d : mesh.dims)
      ranks *= d;
    os << "__attribute__((used)) static const char braid_program_ranks[] = "
          "\"BRAID_PROGRAM_RANKS="
       << ranks << ";\";\n\n";
  }
  // Leaving after a bad argument: a program on the runtime's context
  // releases it first (MPI_Finalize), as a successful run does.
  os << "static int braid_program_exit(int code) {\n";
  if (mesh.present)
    os << "  fflush(stdout);\n  braid_rt_program_spmd_finish();\n";
  os << "  return code;\n}\n\nint main(int argc, char **argv) {\n";
  if (mesh.present) {
    // One program on every rank of the mesh; only rank 0 prints.
    os << "  static const int64_t braid_mesh_dims[] = {";
    for (auto [i, d] : llvm::enumerate(mesh.dims))
      os << (i ? ", " : "") << d;
    os << "};\n  static const char *const braid_mesh_names[] = {";
    for (auto [i, n] : llvm::enumerate(mesh.names))
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
       << "  braid_rt_program_spmd_start(&argc, &argv, " << mesh.dims.size()
       << ", braid_mesh_dims, braid_mesh_names);\n"
       << "  if (braid_rt_program_spmd_rank() != 0 && "
          "!freopen(\"/dev/null\", \"w\", stdout))\n    return 1;\n";
  }
  os << R"(  uint64_t seed = )" << seed << R"(ULL;
  int64_t steps = 1, start_step = 0;
  int64_t log_every = 1, save_every = 0;
  int have_start_step = 0;
  const char *save_dir = NULL, *resume_dir = NULL, *trace_file = NULL;
  const char *data_source = NULL;
  int token_bytes = 2, dump = 0, stop_nonfinite = 0;
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
    } else if (strcmp(argv[i], "--save-every") == 0 && i + 1 < argc && )"
     << (step ? "1" : "0") << R"() {
      if (!braid_rt_program_parse_flag("--save-every", argv[++i], 1,
                                       INT64_MAX, &value))
        return braid_program_exit(2);
      save_every = (int64_t)value;
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
     << (mesh.present ? "1" : "0") << R"() {
      ++i; /* read before the context was created */
    } else if (strcmp(argv[i], "--stop-on-nonfinite") == 0 && )"
     << (step ? "1" : "0") << R"() {
      stop_nonfinite = 1;
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
     << (step ? " [--save DIR] [--save-every N] [--resume DIR] [--trace FILE]"
                " [--stop-on-nonfinite]"
              : "")
     << (mesh.present ? " [--timeout S]" : "") << R"(\n",
              argv[0]);
      return braid_program_exit(2);
    }
  }
  if (save_every && !save_dir) {
    fprintf(stderr, "error: --save-every needs --save DIR\n");
    return braid_program_exit(2);
  }
  )" << kProgramInitFunction
     << R"((seed);
)";
  // A bad --save or --trace path is found before the first step, not
  // after the last.
  if (step && mesh.present)
    os << "  braid_rt_program_check_outputs(save_dir, trace_file);\n";
  if (step)
    os << "  if (resume_dir) {\n"
       << "    int64_t saved = braid_rt_program_resume(resume_dir, "
          "braid_num_slots, braid_slots, braid_params);\n"
       << "    if (!have_start_step)\n      start_step = saved;\n  }\n";
  else
    os << "  (void)have_start_step; (void)save_dir; (void)resume_dir;\n"
          "  (void)trace_file; (void)log_every; (void)data_source;\n"
          "  (void)token_bytes; (void)stop_nonfinite; (void)save_every;\n";
  if (step)
    os << "  (void)dump;\n";
  std::string call = getEmittedFunctionName(signature.entry) + "(";
  // Per argument: the whole buffer and its size, and the code that copies
  // this rank's block of it (sharded arguments).
  std::vector<std::pair<std::string, int64_t>> wholes(args.size());
  std::vector<std::string> extracts(args.size());
  // Freed before main returns, so that LeakSanitizer (scripts/sanitize.sh)
  // sees a program that owns nothing at exit.
  std::string frees;
  for (auto [i, arg] : llvm::enumerate(args)) {
    Type element = arg.type.getElementType();
    int64_t count = arg.type.getNumElements();
    std::string var = "in" + std::to_string(i);
    os << "  " << cType(element) << " *" << var << " = braid_rt_program_alloc_"
       << suffix(element) << "(" << count << ");\n";
    frees += "  braid_rt_program_free(" + var + ");\n";
    // A block of a sharded argument: the whole input, then this rank's block.
    std::string whole = var;
    int64_t wholeCount = count;
    if (arg.sharded) {
      whole = var + "_whole";
      wholeCount = 1;
      for (int64_t d : arg.global)
        wholeCount *= d;
      os << "  " << cType(element) << " *" << whole
         << " = braid_rt_program_alloc_" << suffix(element) << "(" << wholeCount
         << ");\n";
      frees += "  braid_rt_program_free(" + whole + ");\n";
    }
    if (arg.isStep || arg.isPreviousStep || arg.isFinal)
      ;
    else if (element.isF32())
      os << "  braid_rt_program_init_f32(seed, \"" << arg.name
         << "\", BRAID_RT_INIT_NORMAL, 1.0, 0.0, " << wholeCount << ", "
         << whole << ");\n";
    else
      os << "  braid_rt_program_init_ids_" << suffix(element) << "(seed, \""
         << arg.name << "\", " << arg.range << ", " << wholeCount << ", "
         << whole << ");\n";
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
    frees += "  braid_rt_program_free(" + var + ");\n";
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
    for (const ProgramTensor &arg : args)
      if (arg.data == "tokens") {
        tokens = arg.type.getNumElements();
        if (arg.sharded)
          for (auto [g, l] : llvm::zip(arg.global, arg.type.getShape()))
            tokens = tokens / l * g;
      }
    // --data: tokens and labels (i32 or i64 with braid.range, of one element
    // type and the same whole shape) from the runtime's data source, each
    // step's batch. Imported PyTorch models take int64 ids.
    int tokensIndex = -1, labelsIndex = -1;
    for (auto [i, arg] : llvm::enumerate(args)) {
      Type element = arg.type.getElementType();
      if (!arg.range || !(element.isInteger(32) || element.isInteger(64)))
        continue;
      if (arg.data == "tokens")
        tokensIndex = i;
      if (arg.data == "labels")
        labelsIndex = i;
    }
    if (tokensIndex >= 0 && labelsIndex >= 0 &&
        wholes[tokensIndex].second == wholes[labelsIndex].second &&
        args[tokensIndex].type.getElementType() ==
            args[labelsIndex].type.getElementType()) {
      const ProgramTensor &t = args[tokensIndex];
      int64_t seqLen = t.sharded ? t.global.back() : t.type.getShape().back();
      int64_t batch = wholes[tokensIndex].second / seqLen;
      // A file token must be a valid id and, as the previous position's
      // label, a valid class.
      int64_t vocab = std::min(t.range, args[labelsIndex].range);
      os << "  braid_rt_data_t *braid_data = NULL;\n"
         << "  if (data_source)\n    braid_data = braid_rt_program_data_open("
            "data_source, token_bytes, seed, "
         << vocab << ", " << seqLen << ", " << batch << ");\n";
      dataFeed =
          "    if (braid_data) {\n      braid_rt_program_data_batch" +
          std::string(t.type.getElementType().isInteger(64) ? "_i64" : "") +
          "(braid_data, s, " + std::to_string(batch) + ", " +
          std::to_string(seqLen) + ", " + wholes[tokensIndex].first + ", " +
          wholes[labelsIndex].first + ");\n" + extracts[tokensIndex] +
          extracts[labelsIndex] + "    }\n";
      frees += "  braid_rt_data_close(braid_data);\n";
    } else {
      os << "  (void)token_bytes;\n  if (data_source) {\n"
         << "    fprintf(stderr, \"error: --data needs a training step "
            "that takes 'tokens' and 'labels' (braid.data, or by name) of "
            "one type, i32 or i64, with braid.range\\n\");\n"
         << "    return braid_program_exit(2);\n  }\n";
    }
    // braid-train-step's defer-validation: the step validates the
    // previous step's update while it runs (inputs previous_step and final,
    // results previous_grad_norm and retry).
    int previousIndex = -1, finalIndex = -1;
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (arg.isPreviousStep)
        previousIndex = i;
      if (arg.isFinal)
        finalIndex = i;
    }
    int retryIndex = index("retry");
    bool deferred = previousIndex >= 0 && finalIndex >= 0 && retryIndex >= 0;
    int lossIndex = index("loss"), lrIndex = index("lr"),
        normIndex = index(deferred ? "previous_grad_norm" : "grad_norm");
    int stepBytes = step->type.getElementType().isInteger(64) ? 8 : 4;
    auto value = [&](int i) {
      return "braid_rt_program_value(out" + std::to_string(i) + ", 0, " +
             elementArgs(results[i].type.getElementType()) + ")";
    };
    // One call of the step at `stepExpr` (with `final` for the validating
    // call of defer-validation), traced as `traceName` of `traceStep`.
    auto emitCall = [&](StringRef stepExpr, StringRef final,
                        StringRef traceName, StringRef traceStep) {
      os << "    braid_rt_program_set_step(in" << stepIndex << ", "
         << stepBytes << ", " << stepExpr << ");\n";
      if (deferred)
        os << "    braid_rt_program_set_step(in" << previousIndex << ", "
           << stepBytes << ", (" << stepExpr << ") > 0 ? (" << stepExpr
           << ") - 1 : 0);\n"
           << "    {\n      float final_v = " << final << ";\n"
           << "      braid_rt_program_to_device(in" << finalIndex
           << ", &final_v, sizeof final_v, \"final\");\n    }\n";
      if (mesh.present)
        os << "    if (trace_file) {\n      char name[48];\n"
           << "      snprintf(name, sizeof name, \"" << traceName
           << "\", (long long)" << traceStep << ");\n"
           << "      braid_rt_program_trace_begin(name, \"step\");\n    }\n";
      // Ids checked on a device (braid_rt_check_ids) are reported here,
      // once per step; on the CPU a bad id has already ended the program.
      os << "    " << call << ");\n"
         << "    braid_rt_program_poll_bad_ids();\n";
      if (mesh.present)
        os << "    if (trace_file)\n      braid_rt_program_trace_end();\n";
    };
    // The line of a finished step (every log_every steps and the last), and
    // a warning when its update was skipped (braid-train-step skips a step
    // whose loss or gradient norm is not finite), every step, on one rank.
    auto emitReport = [&](StringRef s, StringRef loss, StringRef lr,
                          StringRef norm, StringRef ms) {
      os << "    {\n      double loss_v = " << loss << ", lr_v = " << lr
         << ", norm_v = " << norm << ";\n      (void)lr_v;\n";
      if (lossIndex >= 0 && normIndex >= 0)
        os << "      if (!isfinite(loss_v) || !isfinite(norm_v)) {\n"
           << "        if ("
           << (mesh.present ? "braid_rt_program_spmd_rank() == 0" : "1")
           << ")\n"
           << "          fprintf(stderr, \"warning: step %lld: the loss (%g) "
              "or the gradient norm (%g) is not finite: the update was "
              "skipped (parameters and optimizer state unchanged)\\n\", "
              "(long long)"
           << s << ", loss_v, norm_v);\n"
           << "        if (stop_nonfinite) {\n"
           << "          fprintf(stderr, \"error: step %lld: stopping on a "
              "non-finite loss or gradient norm (--stop-on-nonfinite)\\n\", "
              "(long long)"
           << s << ");\n"
           << "          fflush(stdout);\n"
           << "          braid_rt_program_exit_error();\n        }\n"
           << "      }\n";
      os << "      if ((" << s << " - start_step) % log_every == 0 || " << s
         << " == start_step + steps - 1) {\n"
         << "        printf(\"step %lld\", (long long)" << s << ");\n";
      if (lossIndex >= 0)
        os << "        printf(\" loss %.17g\", loss_v);\n";
      if (lrIndex >= 0)
        os << "        printf(\" lr %.6g\", lr_v);\n";
      if (normIndex >= 0)
        os << "        printf(\" grad_norm %.6g\", norm_v);\n";
      os << "        printf(\" ms %.2f\", 1e3 * " << ms << ");\n";
      if (tokens)
        os << "        printf(\" tokens/s %.0f\", " << tokens << " / " << ms
           << ");\n";
      os << "        printf(\"\\n\");\n      }\n    }\n";
    };
    auto orZero = [&](int i) { return i >= 0 ? value(i) : std::string("0"); };
    os << "  double total_s = 0;\n";
    if (deferred)
      os << "  /* defer-validation: the step whose line waits for its norm. */\n"
         << "  int have_pending = 0;\n  int64_t pending_s = 0, reruns = 0;\n"
         << "  double pending_loss = 0, pending_lr = 0, pending_ms = 0;\n";
    os << "  for (int64_t s = start_step; s < start_step + steps; ++s) {\n"
       << "    struct timespec t0, t1;\n"
       << dataFeed << "    clock_gettime(CLOCK_MONOTONIC, &t0);\n";
    emitCall("s", "0.0f", "step %lld", "s");
    if (deferred) {
      // The previous step is validated: its line. A rollback changed the
      // parameters this step's forward pass read, so the step skipped its
      // update: run it again.
      os << "    if (have_pending) {\n";
      emitReport("pending_s", "pending_loss", "pending_lr", value(normIndex),
                 "pending_ms");
      os << "    }\n    if (" << value(retryIndex) << " != 0) {\n"
         << "      ++reruns;\n";
      emitCall("s", "0.0f", "step %lld (again)", "s");
      os << "    }\n";
    }
    os << "    clock_gettime(CLOCK_MONOTONIC, &t1);\n"
       << "    double step_s = (double)(t1.tv_sec - t0.tv_sec) +\n"
       << "                    1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);\n"
       << "    if (s > start_step || steps == 1)\n      total_s += step_s;\n";
    if (deferred)
      os << "    have_pending = 1;\n    pending_s = s;\n"
         << "    pending_loss = " << orZero(lossIndex) << ";\n"
         << "    pending_lr = " << orZero(lrIndex) << ";\n"
         << "    pending_ms = step_s;\n";
    else
      emitReport("s", orZero(lossIndex), orZero(lrIndex), orZero(normIndex),
                 "step_s");
    // defer-validation: a call that only validates the last step, before
    // the checkpoint (the run's end, or --save-every) holds its update.
    auto emitValidation = [&]() {
      emitCall("pending_s + 1", "1.0f", "validate step %lld", "pending_s");
      emitReport("pending_s", "pending_loss", "pending_lr", value(normIndex),
                 "pending_ms");
      os << "    have_pending = 0;\n";
    };
    // --save-every: every step a multiple of N begins from a checkpoint
    // (steps are global, so a resumed run saves at the same steps), but
    // the last, which --save writes after the loop.
    if (mesh.present) {
      os << "    if (save_every && (s + 1) % save_every == 0 && s + 1 < "
            "start_step + steps) {\n";
      if (deferred)
        emitValidation();
      os << "      braid_rt_program_save_step(save_dir, s + 1, "
            "braid_num_slots, braid_slots, braid_params, "
            "braid_pipeline_mask);\n    }\n";
    } else {
      os << "    (void)save_every;\n";
    }
    os << "  }\n";
    if (deferred) {
      os << "  if (have_pending) {\n";
      emitValidation();
      os << "  }\n";
    }
    // The first step (allocation, cold caches) is left out of the mean.
    os << "  int64_t timed = steps > 1 ? steps - 1 : steps;\n"
       << "  if (timed > 0) {\n"
       << "    printf(\"summary: %lld steps, %.2f ms/step\", (long long)steps,"
       << " 1e3 * total_s / timed);\n";
    if (tokens)
      os << "    printf(\", %.0f tokens/s\", " << tokens
         << " * timed / total_s);\n";
    os << "    if (timed < steps)\n"
       << "      printf(\" (step %lld excluded)\", (long long)start_step);\n";
    if (deferred)
      os << "    if (reruns)\n      printf(\"; %lld step%s run again after "
            "the previous step's rollback\", (long long)reruns, reruns == 1 "
            "? \"\" : \"s\");\n";
    os
       << "    printf(\"\\n\");\n  }\n";
    // The checkpoint first: a trace that cannot be written ends the program
    // and must not cost it the run's result.
    if (mesh.present)
      os << "  if (save_dir)\n    braid_rt_program_save(save_dir, start_step + "
            "steps, braid_num_slots, braid_slots, braid_params,\n"
         << "                          braid_pipeline_mask);\n"
         << "  if (trace_file)\n    braid_rt_program_trace_write(trace_file);\n";
    // Before the runtime's context ends (a device buffer needs it).
    os << frees;
    if (mesh.present)
      os << "  fflush(stdout);\n  braid_rt_program_spmd_finish();\n";
    os << "  return 0;\n}\n";
    return;
  }
  os << "  " << call << ");\n  braid_rt_program_poll_bad_ids();\n";
  // As braid-eval prints results: a scalar's value; a tensor's sum and L2
  // norm, and with --dump every value (tests compare them one by one).
  for (auto [i, result] : llvm::enumerate(results)) {
    std::string var = "out" + std::to_string(i);
    std::string args = elementArgs(result.type.getElementType());
    if (result.type.getRank() == 0)
      os << "  printf(\"" << result.name
         << " %.17g\\n\", braid_rt_program_value(" << var << ", 0, " << args
         << "));\n";
    else
      os << "  braid_rt_program_print_tensor(\"" << result.name << "\", " << var
         << ", " << result.type.getNumElements() << ", " << args
         << ", dump);\n";
  }
  os << frees;
  if (mesh.present)
    os << "  fflush(stdout);\n  braid_rt_program_spmd_finish();\n";
  os << "  return 0;\n}\n";
}

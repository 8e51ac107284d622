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
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Pipelines/BraidPipeline.h"
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
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
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
                      "1); the program runs on dp*tp*pp ranks"),
             cl::value_desc("dp=D,tp=T,pp=P"), cl::cat(trainCategory));
// Every other training option, as TrainingOptions.def declares it (the
// same flag, default and help as braid-opt's --braid-codegen-pipeline).
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  static cl::opt<TYPE> NAME##Flag(FLAG, cl::desc(DESC), cl::init(DEFAULT),     \
                                  cl::cat(trainCategory));
#include "braid/Pipelines/TrainingOptions.def"
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
           cl::desc("Keep every op its own kernel: skip braid-fuse-elementwise, "
                    "which computes chains of elementwise ops (bias add, GELU, "
                    "residual add, scaling, activation gradients) in one loop "
                    "nest each (same results, bit for bit)"),
           cl::cat(braidcCategory));

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
  if (chunksFlag.getNumOccurrences() && t.pp == 1) {
    errs() << "braidc: --chunks splits pipeline stages, but the mesh has no "
              "pp axis\n";
    return failure();
  }
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  t.NAME = NAME##Flag;
#include "braid/Pipelines/TrainingOptions.def"
  if (llvm::Error error = braid::verifyTrainingOptions(t)) {
    errs() << "braidc: " << llvm::toString(std::move(error)) << "\n";
    return failure();
  }
  return t;
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

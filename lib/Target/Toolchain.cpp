//===- Toolchain.cpp - Compiling a generated program, per target ----------===//
//
// The build fixes the compiler and the libraries (BRAID_CXX, BRAID_RT_*,
// lib/Target/CMakeLists.txt); '|' separates the libraries in a definition.
//
//===----------------------------------------------------------------------===//

#include "braid/Target/Toolchain.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::braid;
using namespace llvm;

Toolchain::~Toolchain() = default;

Error Toolchain::compile(const CompileJob &job, StringRef commandPath) const {
  Expected<std::vector<std::string>> argv = getCommand(job);
  if (!argv)
    return argv.takeError();
  std::string command;
  for (const std::string &a : *argv)
    command += a + " ";
  if (!commandPath.empty()) {
    std::string error;
    auto file = openOutputFile(commandPath, &error);
    if (!file)
      return createStringError(error);
    file->os() << command << "\n";
    file->keep();
  }
  SmallVector<StringRef> args(argv->begin(), argv->end());
  std::string error;
  int rc =
      sys::ExecuteAndWait(args.front(), args, std::nullopt, {}, 0, 0, &error);
  if (rc != 0)
    return createStringError(
        "compiling the generated program failed (" + std::to_string(rc) +
        (error.empty() ? "" : ": " + error) + "):\n  " + command);
  return Error::success();
}

static std::vector<std::string> splitLibs(StringRef libs) {
  SmallVector<StringRef> parts;
  libs.split(parts, '|', -1, /*KeepEmpty=*/false);
  return {parts.begin(), parts.end()};
}

CpuToolchain::Options CpuToolchain::getBuildOptions() {
  return {BRAID_CXX, BRAID_RT_INCLUDE_DIR, splitLibs(BRAID_RT_LINK_LIBS),
          splitLibs(BRAID_RT_SPMD_LINK_LIBS)};
}

Expected<std::vector<std::string>>
CpuToolchain::getCommand(const CompileJob &job) const {
  ErrorOr<std::string> cxx = sys::findProgramByName(options.cxx);
  if (!cxx)
    return createStringError("C++ compiler '" + options.cxx +
                             "' not found (--cxx)");
  std::vector<std::string> argv = {
      *cxx,       "-O2", "-std=c++17", "-w", "-I" + options.includeDir,
      job.source, "-o",  job.output};
  // The communication layer before the libraries it uses (braid_rt_common).
  std::vector<std::string> libs;
  if (job.spmd)
    libs = options.spmdLibs;
  llvm::append_range(libs, options.libs);
  for (StringRef lib : libs) {
    argv.push_back(lib.str());
    // Shared libraries outside the default paths (libomp) need an rpath.
    if (lib.ends_with(".so") || lib.contains(".so."))
      argv.push_back("-Wl,-rpath," + sys::path::parent_path(lib).str());
  }
  argv.push_back("-lm");
  return argv;
}

Expected<std::string> CudaToolchain::findNvcc() {
  if (ErrorOr<std::string> nvcc = sys::findProgramByName("nvcc"))
    return *nvcc;
  std::vector<std::string> dirs;
  if (std::optional<std::string> cudaPath = sys::Process::GetEnv("CUDA_PATH"))
    dirs.push_back(*cudaPath + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  SmallVector<StringRef> paths(dirs.begin(), dirs.end());
  if (ErrorOr<std::string> nvcc = sys::findProgramByName("nvcc", paths))
    return *nvcc;
  return createStringError(
      "no nvcc on PATH, in $CUDA_PATH/bin or in /usr/local/cuda/bin");
}

Expected<std::vector<std::string>>
CudaToolchain::getCommand(const CompileJob &job) const {
  return createStringError("the CUDA target is not built yet (nvcc: " + nvcc +
                           ")");
}

Expected<std::unique_ptr<Toolchain>> braid::createToolchain(StringRef target,
                                                            StringRef cxx) {
  if (target == "cpu") {
    CpuToolchain::Options options = CpuToolchain::getBuildOptions();
    options.cxx = cxx.str();
    return std::make_unique<CpuToolchain>(std::move(options));
  }
  if (target == "cuda") {
    Expected<std::string> nvcc = CudaToolchain::findNvcc();
    if (!nvcc)
      return createStringError("the CUDA target needs the CUDA toolkit: " +
                               toString(nvcc.takeError()));
    return std::make_unique<CudaToolchain>(std::move(*nvcc));
  }
  return createStringError("no target '" + target + "' (cpu or cuda)");
}

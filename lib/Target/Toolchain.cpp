//===- Toolchain.cpp - Compiling a generated program, per target ----------===//
//
// The build fixes the compiler and the libraries (BRAID_CXX, BRAID_RT_*,
// lib/Target/CMakeLists.txt); '|' separates the libraries in a definition.
//
//===----------------------------------------------------------------------===//

#include "braid/Target/Toolchain.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
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
  return {BRAID_CXX,
          BRAID_RT_INCLUDE_DIR,
          splitLibs(BRAID_RT_LINK_LIBS),
          splitLibs(BRAID_RT_SPMD_LINK_LIBS),
          splitLibs(BRAID_PROGRAM_FLAGS),
          splitLibs(BRAID_RT_NATIVE_LINK_LIBS),
          splitLibs(BRAID_NATIVE_FLAGS)};
}

Expected<std::vector<std::string>>
CpuToolchain::getCommand(const CompileJob &job) const {
  ErrorOr<std::string> cxx = sys::findProgramByName(options.cxx);
  if (!cxx)
    return createStringError("C++ compiler '" + options.cxx +
                             "' not found (--cxx)");
  if (job.singleProcess)
    return createStringError("a single-process program (without MPI) is a "
                             "CUDA target option");
  // The kernels round without FMA contraction; so does the program (fused
  // loops give the kernels' results wherever the operations are theirs).
  std::vector<std::string> argv = {*cxx, "-O2", "-std=c++17", "-w",
                                   "-ffp-contract=off"};
  bool native = !job.portable && !options.nativeLibs.empty();
  if (native)
    llvm::append_range(argv, options.nativeFlags);
  llvm::append_range(argv,
                     std::vector<std::string>{"-I" + options.includeDir,
                                              job.source, "-o", job.output});
  llvm::append_range(argv, options.flags);
  // The communication layer before the libraries it uses (braid_rt_common).
  std::vector<std::string> libs;
  if (job.spmd)
    libs = options.spmdLibs;
  llvm::append_range(libs, native ? options.nativeLibs : options.libs);
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

bool CudaToolchain::isBuilt() { return BRAID_CUDA_ENABLED; }

CudaToolchain::Options CudaToolchain::getBuildOptions() {
#if BRAID_CUDA_ENABLED
  return {BRAID_NVCC,
          BRAID_CUDA_HOST_CXX,
          BRAID_CUDA_ARCHS,
          BRAID_RT_INCLUDE_DIR,
          splitLibs(BRAID_RT_CUDA_LINK_LIBS),
          splitLibs(BRAID_RT_CUDA_SPMD_LINK_LIBS),
          splitLibs(BRAID_RT_CUDA_SINGLE_LINK_LIBS)};
#else
  return {};
#endif
}

Expected<std::vector<std::string>>
CudaToolchain::getCommand(const CompileJob &job) const {
  if (!sys::fs::can_execute(options.nvcc))
    return createStringError("nvcc '" + options.nvcc +
                             "' (the one Braid was built with) is missing");
  // The source is CUDA C++ by its name (braidc writes program.cu); `-x cu`
  // would apply to the libraries after it too.
  if (!StringRef(job.source).ends_with(".cu"))
    return createStringError("the CUDA program must be a .cu file, got " +
                             job.source);
  // The shared CUDA runtime, as the libraries linked below use: nvcc's
  // default (static) would put a second copy in the program.
  std::vector<std::string> argv = {options.nvcc, "-O2", "-std=c++17", "-w",
                                   "-cudart=shared"};
  if (!options.hostCxx.empty())
    argv.push_back("-ccbin=" + options.hostCxx);
  SmallVector<StringRef> archs;
  StringRef(options.archs).split(archs, ',', -1, /*KeepEmpty=*/false);
  for (StringRef arch : archs)
    argv.push_back(("-gencode=arch=compute_" + arch + ",code=sm_" + arch).str());
  llvm::append_range(argv, std::vector<std::string>{
                               "-I" + options.includeDir, job.source, "-o",
                               job.output});
  // The link line, as for the CPU target; nvcc passes libraries through and
  // takes linker options after -Xlinker.
  std::vector<std::string> libs;
  if (job.spmd)
    libs = job.singleProcess ? options.singleProcessLibs : options.spmdLibs;
  llvm::append_range(libs, options.libs);
  for (StringRef lib : libs) {
    argv.push_back(lib.str());
    if (lib.ends_with(".so") || lib.contains(".so."))
      argv.push_back("-Xlinker=-rpath," + sys::path::parent_path(lib).str());
  }
  argv.push_back("-lm");
  return argv;
}

Expected<std::unique_ptr<Toolchain>> braid::createToolchain(StringRef target,
                                                            StringRef cxx) {
  if (target == "cpu") {
    CpuToolchain::Options options = CpuToolchain::getBuildOptions();
    options.cxx = cxx.str();
    return std::make_unique<CpuToolchain>(std::move(options));
  }
  if (target == "cuda") {
    if (CudaToolchain::isBuilt())
      return std::make_unique<CudaToolchain>(CudaToolchain::getBuildOptions());
    Expected<std::string> nvcc = CudaToolchain::findNvcc();
    return createStringError(
        "this Braid was built without the CUDA target (BRAID_ENABLE_CUDA is "
        "off: CMake found no usable nvcc, cuBLAS or NCCL; see its "
        "configure output); " +
        (nvcc ? "nvcc is at " + *nvcc + ": reconfigure to build it"
              : toString(nvcc.takeError())));
  }
  return createStringError("no target '" + target + "' (cpu or cuda)");
}

//===- Toolchain.h - Compiling a generated program, per target --*- C++ -*-===//
//
// braidc writes one C++ program (the translated EmitC module and its main())
// and hands it to the toolchain of its target, which compiles and links it
// against that target's runtime. The compiler and the libraries are fixed
// when Braid is built (lib/Target/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_TARGET_TOOLCHAIN_H
#define BRAID_TARGET_TOOLCHAIN_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir::braid {

/// One generated program to compile.
struct CompileJob {
  /// The generated C++ and the executable to write.
  std::string source, output;
  /// Whether the program runs on the runtime's context: it links the
  /// communication layer and MPI too.
  bool spmd = false;
  /// For a program on the runtime's context: one process, linking the
  /// communication layer's single-process variant instead of MPI (CUDA
  /// target only; the program runs without a launcher).
  bool singleProcess = false;
  /// For the CPU target: compile for any machine of the architecture (the
  /// compiler's default target, the portable kernels) instead of this
  /// machine's CPU.
  bool portable = false;
};

/// How a target turns a generated program into an executable.
class Toolchain {
public:
  virtual ~Toolchain();

  /// The target's name, as braidc's --target spells it.
  virtual llvm::StringRef getTarget() const = 0;

  /// The command (the compiler's path, then its arguments) that compiles
  /// `job`; an error when the compiler is missing.
  virtual llvm::Expected<std::vector<std::string>>
  getCommand(const CompileJob &job) const = 0;

  /// Compiles `job`. With a non-empty `commandPath`, first writes the
  /// command there as one shell line, so that it can be rerun by hand.
  llvm::Error compile(const CompileJob &job,
                      llvm::StringRef commandPath = "") const;
};

/// The CPU target: the host C++ compiler, linking the runtime's kernels and
/// their dependencies (OpenBLAS, OpenMP), and for a program on the runtime's
/// context the communication layer and MPI before them. Programs are for
/// this machine's CPU (-march=native, the native kernels) unless the job is
/// portable; either way without FMA contraction, as the kernels.
class CpuToolchain : public Toolchain {
public:
  struct Options {
    /// The C++ compiler: a name looked up on PATH, or a path.
    std::string cxx;
    /// The runtime's headers (braid/rt/...).
    std::string includeDir;
    /// What every program links, and what a program on the runtime's
    /// context links before that.
    std::vector<std::string> libs, spmdLibs;
    /// Compile and link flags the runtime was built with and every program
    /// must share, e.g. the sanitizers of scripts/sanitize.sh.
    std::vector<std::string> flags;
    /// A program for this machine's CPU: `libs` with the kernels built for
    /// it, and the flags that compile for it (-march=native). Empty when
    /// Braid was built without them (BRAID_NATIVE off): every program is
    /// portable.
    std::vector<std::string> nativeLibs, nativeFlags;
  };

  /// The compiler and libraries Braid was built with.
  static Options getBuildOptions();

  explicit CpuToolchain(Options options) : options(std::move(options)) {}

  llvm::StringRef getTarget() const override { return "cpu"; }
  llvm::Expected<std::vector<std::string>>
  getCommand(const CompileJob &job) const override;

private:
  Options options;
};

/// The CUDA target: nvcc (with the host compiler CUDA supports) compiles the
/// generated program as CUDA C++ for the build's architectures and links
/// the program runtime, the CUDA kernels, cuBLAS and cudart, and for a
/// program on the runtime's context the CUDA context and NCCL
/// communication and MPI before them.
class CudaToolchain : public Toolchain {
public:
  struct Options {
    std::string nvcc, hostCxx;
    /// Comma-separated SM architectures, e.g. "90".
    std::string archs;
    std::string includeDir;
    std::vector<std::string> libs, spmdLibs, singleProcessLibs;
  };

  /// Whether this Braid was built with the CUDA target (BRAID_ENABLE_CUDA).
  static bool isBuilt();
  /// The nvcc, architectures and libraries Braid was built with.
  static Options getBuildOptions();
  /// Finds nvcc on PATH, in $CUDA_PATH/bin or in /usr/local/cuda/bin; an
  /// error naming the places searched when there is none.
  static llvm::Expected<std::string> findNvcc();

  explicit CudaToolchain(Options options) : options(std::move(options)) {}

  llvm::StringRef getNvcc() const { return options.nvcc; }
  llvm::StringRef getTarget() const override { return "cuda"; }
  llvm::Expected<std::vector<std::string>>
  getCommand(const CompileJob &job) const override;

private:
  Options options;
};

/// The toolchain of `target` ("cpu" or "cuda"), with `cxx` as the CPU
/// target's C++ compiler; an error for another target, or for cuda when
/// this Braid was built without it (saying whether nvcc is there).
llvm::Expected<std::unique_ptr<Toolchain>>
createToolchain(llvm::StringRef target, llvm::StringRef cxx);

} // namespace mlir::braid

#endif // BRAID_TARGET_TOOLCHAIN_H

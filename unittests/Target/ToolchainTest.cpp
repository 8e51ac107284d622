//===- ToolchainTest.cpp - The toolchains' commands and errors ------------===//

#include "braid/Target/Toolchain.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

using namespace mlir::braid;
using namespace llvm;

namespace {

/// Libraries in the shapes the build passes: archives, a shared library and
/// a versioned one (both need an rpath).
CpuToolchain::Options testOptions(std::string cxx) {
  return {std::move(cxx),
          "/rt/include",
          {"/k/libkernels.a", "/b/libopenblas.so", "/o/libomp.so.5"},
          {"/i/libio.a", "/m/libmpi.so"},
          /*flags=*/{},
          /*nativeLibs=*/{},
          /*nativeFlags=*/{}};
}

std::vector<std::string> command(const Toolchain &toolchain,
                                 const CompileJob &job) {
  Expected<std::vector<std::string>> argv = toolchain.getCommand(job);
  if (!argv) {
    ADD_FAILURE() << toString(argv.takeError());
    return {};
  }
  return *argv;
}

// Tests that a single-device program links the kernels and their
// dependencies, with an rpath after each shared library, and -lm last.
TEST(CpuToolchainTest, SingleDeviceCommand) {
  CpuToolchain toolchain(testOptions("/bin/sh"));
  std::vector<std::string> expected = {"/bin/sh",
                                       "-O2",
                                       "-std=c++17",
                                       "-w",
                                       "-ffp-contract=off",
                                       "-I/rt/include",
                                       "prog.cpp",
                                       "-o",
                                       "prog",
                                       "/k/libkernels.a",
                                       "/b/libopenblas.so",
                                       "-Wl,-rpath,/b",
                                       "/o/libomp.so.5",
                                       "-Wl,-rpath,/o",
                                       "-lm"};
  EXPECT_EQ(command(toolchain, {"prog.cpp", "prog", /*spmd=*/false}), expected);
}

// Tests that a program on the runtime's context links the communication
// layer and MPI before the libraries they use.
TEST(CpuToolchainTest, SpmdCommand) {
  CpuToolchain toolchain(testOptions("/bin/sh"));
  std::vector<std::string> expected = {"/bin/sh",
                                       "-O2",
                                       "-std=c++17",
                                       "-w",
                                       "-ffp-contract=off",
                                       "-I/rt/include",
                                       "prog.cpp",
                                       "-o",
                                       "prog",
                                       "/i/libio.a",
                                       "/m/libmpi.so",
                                       "-Wl,-rpath,/m",
                                       "/k/libkernels.a",
                                       "/b/libopenblas.so",
                                       "-Wl,-rpath,/b",
                                       "/o/libomp.so.5",
                                       "-Wl,-rpath,/o",
                                       "-lm"};
  EXPECT_EQ(command(toolchain, {"prog.cpp", "prog", /*spmd=*/true}), expected);
}

// Tests that with native kernels a program is compiled for this machine's
// CPU and links them, and that a portable job or a build without them gets
// neither.
TEST(CpuToolchainTest, NativeUnlessPortable) {
  CpuToolchain::Options options = testOptions("/bin/sh");
  options.nativeLibs = {"/k/libkernels_native.a", "/b/libopenblas.so"};
  options.nativeFlags = {"-march=native"};
  CpuToolchain toolchain(options);
  std::vector<std::string> native = {"/bin/sh",
                                     "-O2",
                                     "-std=c++17",
                                     "-w",
                                     "-ffp-contract=off",
                                     "-march=native",
                                     "-I/rt/include",
                                     "prog.cpp",
                                     "-o",
                                     "prog",
                                     "/i/libio.a",
                                     "/m/libmpi.so",
                                     "-Wl,-rpath,/m",
                                     "/k/libkernels_native.a",
                                     "/b/libopenblas.so",
                                     "-Wl,-rpath,/b",
                                     "-lm"};
  EXPECT_EQ(command(toolchain, {"prog.cpp", "prog", /*spmd=*/true}), native);

  CompileJob portable{"prog.cpp", "prog", /*spmd=*/true};
  portable.portable = true;
  std::vector<std::string> expected =
      command(CpuToolchain(testOptions("/bin/sh")), {"prog.cpp", "prog", true});
  EXPECT_EQ(command(toolchain, portable), expected);
  EXPECT_FALSE(llvm::is_contained(expected, "-march=native"));
  EXPECT_TRUE(llvm::is_contained(expected, "/k/libkernels.a"));
}

// Tests that a missing compiler is an error naming it and braidc's flag.
TEST(CpuToolchainTest, MissingCompiler) {
  CpuToolchain toolchain(testOptions("braid-no-such-compiler"));
  Expected<std::vector<std::string>> argv = toolchain.getCommand({});
  ASSERT_FALSE(argv);
  EXPECT_EQ(toString(argv.takeError()),
            "C++ compiler 'braid-no-such-compiler' not found (--cxx)");
}

// Tests that compile() writes the command as one shell line, runs it and
// reports a failing compiler with its status and the command.
TEST(CpuToolchainTest, CompileWritesAndRunsTheCommand) {
  SmallString<128> dir;
  ASSERT_FALSE(sys::fs::createUniqueDirectory("braid-toolchain", dir));
  SmallString<128> path(dir);
  sys::path::append(path, "compile.sh");
  CompileJob job{"prog.cpp", "prog", false};

  CpuToolchain ok(testOptions("/bin/true"));
  EXPECT_FALSE(errorToBool(ok.compile(job, path)));
  ErrorOr<std::unique_ptr<MemoryBuffer>> written = MemoryBuffer::getFile(path);
  ASSERT_TRUE(written);
  EXPECT_EQ((*written)->getBuffer().str(),
            "/bin/true -O2 -std=c++17 -w -ffp-contract=off -I/rt/include "
            "prog.cpp -o prog "
            "/k/libkernels.a /b/libopenblas.so -Wl,-rpath,/b /o/libomp.so.5 "
            "-Wl,-rpath,/o -lm \n");

  CpuToolchain failing(testOptions("/bin/false"));
  EXPECT_EQ(toString(failing.compile(job)),
            "compiling the generated program failed (1):\n  /bin/false -O2 "
            "-std=c++17 -w -ffp-contract=off -I/rt/include prog.cpp -o prog "
            "/k/libkernels.a "
            "/b/libopenblas.so -Wl,-rpath,/b /o/libomp.so.5 -Wl,-rpath,/o "
            "-lm ");
  sys::fs::remove_directories(dir);
}

// Tests that the build's options name the runtime headers and libraries
// that exist once Braid is built.
TEST(CpuToolchainTest, BuildOptionsExist) {
  CpuToolchain::Options options = CpuToolchain::getBuildOptions();
  EXPECT_FALSE(options.cxx.empty());
  SmallString<128> header(options.includeDir);
  sys::path::append(header, "braid", "rt", "kernels.h");
  EXPECT_TRUE(sys::fs::exists(header)) << header.str().str();
  ASSERT_FALSE(options.libs.empty());
  ASSERT_FALSE(options.spmdLibs.empty());
  // The native kernels come with their flags, in place of the portable ones.
  EXPECT_EQ(options.nativeLibs.empty(), options.nativeFlags.empty());
  if (!options.nativeLibs.empty()) {
    EXPECT_EQ(options.nativeLibs.size(), options.libs.size());
    EXPECT_TRUE(llvm::any_of(options.nativeLibs, [](const std::string &lib) {
      return StringRef(lib).contains("libbraid_rt_kernels_native.");
    }));
  }
  for (const std::vector<std::string> *libs :
       {&options.libs, &options.spmdLibs, &options.nativeLibs})
    for (const std::string &lib : *libs)
      if (sys::path::is_absolute(lib))
        EXPECT_TRUE(sys::fs::exists(lib)) << lib;
}

// Tests that the CUDA toolchain exists exactly when Braid was built with
// it, compiling with the build's nvcc for its architectures as CUDA C++,
// with the CUDA runtime libraries; and that an unknown target is an error.
TEST(ToolchainTest, CreateByTarget) {
  Expected<std::unique_ptr<Toolchain>> cpu = createToolchain("cpu", "c++");
  ASSERT_TRUE(bool(cpu)) << toString(cpu.takeError());
  EXPECT_EQ((*cpu)->getTarget(), "cpu");

  Expected<std::unique_ptr<Toolchain>> cuda = createToolchain("cuda", "c++");
  if (CudaToolchain::isBuilt()) {
    ASSERT_TRUE(bool(cuda)) << toString(cuda.takeError());
    EXPECT_EQ((*cuda)->getTarget(), "cuda");
    CudaToolchain::Options options = CudaToolchain::getBuildOptions();
    Expected<std::vector<std::string>> argv =
        (*cuda)->getCommand({"p.cu", "p", /*spmd=*/true});
    ASSERT_TRUE(bool(argv)) << toString(argv.takeError());
    EXPECT_EQ(argv->front(), options.nvcc);
    auto has = [&](StringRef s) { return llvm::is_contained(*argv, s); };
    EXPECT_TRUE(has("p.cu"));
    EXPECT_FALSE(bool((*cuda)->getCommand({"p.cpp", "p", false})));
    EXPECT_TRUE(has("-gencode=arch=compute_90,code=sm_90") ||
                !StringRef(options.archs).contains("90"));
    // The SPMD part (context, NCCL) before what every program links.
    auto find = [&](StringRef part) {
      return llvm::find_if(*argv, [&](const std::string &a) {
        return StringRef(a).contains(part);
      });
    };
    EXPECT_NE(find("libbraid_rt_cuda."), argv->end());
    EXPECT_NE(find("nccl"), argv->end());
    EXPECT_LT(find("libbraid_rt_program_spmd"), find("libbraid_rt_kernels_cuda"));
    EXPECT_NE(find("cublas"), argv->end());
    EXPECT_NE(find("libmpi"), argv->end());
    // One process: the single-process variant, no MPI.
    CompileJob single{"p.cu", "p", /*spmd=*/true};
    single.singleProcess = true;
    Expected<std::vector<std::string>> one = (*cuda)->getCommand(single);
    ASSERT_TRUE(bool(one)) << toString(one.takeError());
    auto inOne = [&](StringRef part) {
      return llvm::any_of(*one, [&](const std::string &a) {
        return StringRef(a).contains(part);
      });
    };
    EXPECT_TRUE(inOne("libbraid_rt_cuda_single"));
    EXPECT_FALSE(inOne("libmpi"));
    EXPECT_FALSE(inOne("libbraid_rt_cuda.a"));
  } else {
    ASSERT_FALSE(cuda);
    EXPECT_TRUE(StringRef(toString(cuda.takeError()))
                    .starts_with("this Braid was built without the CUDA "
                                 "target"));
  }

  Expected<std::unique_ptr<Toolchain>> other = createToolchain("tpu", "c++");
  ASSERT_FALSE(other);
  EXPECT_EQ(toString(other.takeError()), "no target 'tpu' (cpu or cuda)");
}

} // namespace

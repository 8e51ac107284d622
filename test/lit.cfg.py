# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "BRAID"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.braid_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
config.environment["PYTHONPATH"] = os.path.join(config.braid_src_root, "python")

llvm_config.use_default_substitutions()
# `not` and `count` are substituted only after a pipe; find them on PATH too.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
config.substitutions.append(("%PYTHON", config.python_executable))
config.substitutions.append(("%braid_src", config.braid_src_root))

tool_dirs = [config.braid_tools_dir, config.llvm_tools_dir]
tools = ["braid-opt", "braid-eval", "braidc", "braid-run", "braid-trace"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The CUDA target is built (BRAID_ENABLE_CUDA): its tests compile CUDA
# programs; none runs one (no GPU is assumed).
if getattr(config, "braid_cuda", False):
    config.available_features.add("cuda-toolkit")
# The kernels are also built for this machine's CPU (BRAID_NATIVE): braidc
# compiles for it unless --portable.
if getattr(config, "braid_native", False):
    config.available_features.add("braid-native")

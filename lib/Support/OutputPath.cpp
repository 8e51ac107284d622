//===- OutputPath.cpp - Check an output file's path before the work -------===//

#include "braid/Support/OutputPath.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

std::string mlir::braid::whyNotWritable(llvm::StringRef path) {
  namespace fs = llvm::sys::fs;
  if (fs::is_directory(path))
    return "is a directory";
  llvm::SmallString<256> dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  if (!fs::is_directory(dir) || fs::access(dir, fs::AccessMode::Write))
    return "cannot write in '" + dir.str().str() +
           "' (no such directory, or not writable)";
  return "";
}

//===- OutputPath.h - Check an output path before the work ------*- C++ -*-===//
//
// A tool that writes its results at the end (braid-eval's --save-*,
// braid-plan --calibrate's -o) checks the paths first, so that a typo does
// not cost the evaluation, training or minutes of measuring it follows.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SUPPORT_OUTPUTPATH_H
#define BRAID_SUPPORT_OUTPUTPATH_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::braid {

/// Why a file cannot be written at `path`: "is a directory", or "cannot
/// write in 'DIR' (no such directory, or not writable)" where the
/// directory holding it is missing, not a directory (a path under a
/// regular file) or not writable by this process. Empty where it can be.
/// Nothing is created or opened: an existing file stays as it is until the
/// tool writes it.
std::string whyNotWritable(llvm::StringRef path);

} // namespace mlir::braid

#endif // BRAID_SUPPORT_OUTPUTPATH_H

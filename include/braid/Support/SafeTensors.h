//===- SafeTensors.h - Read and write .safetensors files --------*- C++ -*-===//
//
// The safetensors format: an 8-byte little-endian header length N, N bytes
// of JSON mapping each tensor name to {dtype, shape, data_offsets} (plus an
// optional "__metadata__" map of strings), then the raw little-endian data.
// Every field of an untrusted file is checked before use.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SUPPORT_SAFETENSORS_H
#define BRAID_SUPPORT_SAFETENSORS_H

#include "braid/Support/Tensor.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace mlir::braid {

/// Named tensors in insertion order.
using TensorMap =
    llvm::MapVector<std::string, Tensor, std::map<std::string, unsigned>>;

struct SafeTensorsFile {
  TensorMap tensors; ///< In the order of their data offsets.
  std::map<std::string, std::string> metadata;
};

/// Parses a safetensors image held in memory. `name` is used in messages.
llvm::Expected<SafeTensorsFile> parseSafeTensors(llvm::StringRef bytes,
                                                 llvm::StringRef name);

/// Reads and validates a safetensors file.
llvm::Expected<SafeTensorsFile> readSafeTensors(llvm::StringRef path);

/// Serialises tensors (each in its own dtype) in map order.
std::string serializeSafeTensors(
    const TensorMap &tensors,
    const std::map<std::string, std::string> &metadata = {});

/// Writes a safetensors file atomically: to a temporary file in the same
/// directory, then renamed over `path`, so an existing file is never left
/// half-written.
llvm::Error writeSafeTensors(
    llvm::StringRef path, const TensorMap &tensors,
    const std::map<std::string, std::string> &metadata = {});

} // namespace mlir::braid

#endif // BRAID_SUPPORT_SAFETENSORS_H

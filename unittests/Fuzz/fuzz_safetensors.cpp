//===- fuzz_safetensors.cpp - libFuzzer harness for the SafeTensors reader ===//
//
// braid-eval reads weights, optimizer state and inputs with
// parseSafeTensors; a file that is not a valid image must come back as an
// llvm::Error, never a crash, a hang or a sanitizer report. What parses is
// written back with serializeSafeTensors and must parse again to the same
// names, shapes, dtypes and values (as braid-eval writes what it read).
//
//===----------------------------------------------------------------------===//

#include "braid/Support/SafeTensors.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

using namespace mlir::braid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  llvm::Expected<SafeTensorsFile> file = parseSafeTensors(bytes, "fuzz");
  if (!file) {
    if (llvm::toString(file.takeError()).empty())
      __builtin_trap(); // a refusal without a message
    return 0;
  }
  std::string image = serializeSafeTensors(file->tensors, file->metadata);
  llvm::Expected<SafeTensorsFile> again = parseSafeTensors(image, "again");
  if (!again) {
    llvm::consumeError(again.takeError());
    __builtin_trap(); // what we write we cannot read
  }
  if (again->tensors.size() != file->tensors.size() ||
      again->metadata != file->metadata)
    __builtin_trap();
  for (const auto &[name, t] : file->tensors) {
    auto it = again->tensors.find(name);
    if (it == again->tensors.end() || it->second.dtype() != t.dtype() ||
        it->second.shape() != t.shape())
      __builtin_trap();
    for (int64_t i = 0, n = t.numElements(); i < n; ++i) {
      double a = t[i], b = it->second[i];
      if (!(a == b || (std::isnan(a) && std::isnan(b))))
        __builtin_trap(); // a value changed on the round trip
    }
  }
  return 0;
}

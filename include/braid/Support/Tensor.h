//===- Tensor.h - Dense tensors for reference evaluation --------*- C++ -*-===//
//
// The values braid-eval computes with: a shape and row-major data held in
// double precision whatever the element type, plus the element type the
// values are rounded to. Plain C++: no MLIR dependency, so the runtime's
// tests can use it too.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SUPPORT_TENSOR_H
#define BRAID_SUPPORT_TENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mlir::braid {

/// Element types a tensor can hold (the safetensors dtypes Braid uses).
enum class DType { F64, F32, F16, BF16, I64, I32 };

/// Safetensors spelling ("F32", ...) and its inverse.
llvm::StringRef dtypeName(DType dtype);
std::optional<DType> parseDType(llvm::StringRef name);
/// Bytes per element in a file.
unsigned dtypeSize(DType dtype);
bool isFloatDType(DType dtype);
/// Rounds `value` to the nearest value representable in `dtype` (ties to
/// even for floats; integers are truncated toward zero).
double roundToDType(double value, DType dtype);

class Tensor {
public:
  Tensor() = default;
  Tensor(llvm::ArrayRef<int64_t> shape, DType dtype, double fill = 0.0);

  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t rank() const { return shape_.size(); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t numElements() const { return data_.size(); }
  DType dtype() const { return dtype_; }
  void setDType(DType dtype) { dtype_ = dtype; }

  double *data() { return data_.data(); }
  const double *data() const { return data_.data(); }
  double &operator[](int64_t i) { return data_[i]; }
  double operator[](int64_t i) const { return data_[i]; }

  /// Row-major strides of the shape.
  llvm::SmallVector<int64_t> strides() const;
  /// Rounds every element to the tensor's dtype.
  void roundToDType();

private:
  llvm::SmallVector<int64_t> shape_;
  std::vector<double> data_;
  DType dtype_ = DType::F64;
};

/// Product of the dimensions.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// The NumPy broadcast of two shapes, or std::nullopt if they are
/// incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// For each element of a tensor of shape `to`, the flat index of the element
/// of a tensor of shape `from` (NumPy-broadcastable to `to`) it reads.
std::vector<int64_t> broadcastIndexMap(llvm::ArrayRef<int64_t> from,
                                       llvm::ArrayRef<int64_t> to);

} // namespace mlir::braid

#endif // BRAID_SUPPORT_TENSOR_H

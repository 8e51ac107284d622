//===- Tensor.cpp - Dense tensors for reference evaluation -----------------===//

#include "braid/Support/Tensor.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir::braid;

llvm::StringRef mlir::braid::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return "F64";
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  }
  llvm_unreachable("unknown DType");
}

std::optional<DType> mlir::braid::parseDType(llvm::StringRef name) {
  for (DType d : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                  DType::I32})
    if (dtypeName(d) == name)
      return d;
  return std::nullopt;
}

unsigned mlir::braid::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  }
  llvm_unreachable("unknown DType");
}

bool mlir::braid::isFloatDType(DType dtype) {
  return dtype != DType::I64 && dtype != DType::I32;
}

static double roundThrough(double value, const llvm::fltSemantics &sem) {
  llvm::APFloat f(value);
  bool lost;
  f.convert(sem, llvm::APFloat::rmNearestTiesToEven, &lost);
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return f.convertToDouble();
}

double mlir::braid::roundToDType(double value, DType dtype) {
  switch (dtype) {
  case DType::F64:
    return value;
  case DType::F32:
    return static_cast<double>(static_cast<float>(value));
  case DType::F16:
    return roundThrough(value, llvm::APFloat::IEEEhalf());
  case DType::BF16:
    return roundThrough(value, llvm::APFloat::BFloat());
  case DType::I64:
  case DType::I32:
    return std::trunc(value);
  }
  llvm_unreachable("unknown DType");
}

Tensor::Tensor(llvm::ArrayRef<int64_t> shape, DType dtype, double fill)
    : shape_(shape.begin(), shape.end()),
      data_(mlir::braid::numElements(shape), fill), dtype_(dtype) {}

llvm::SmallVector<int64_t> Tensor::strides() const {
  llvm::SmallVector<int64_t> s(shape_.size(), 1);
  for (int64_t i = (int64_t)shape_.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape_[i + 1];
  return s;
}

void Tensor::roundToDType() {
  if (dtype_ == DType::F64)
    return;
  for (double &v : data_)
    v = mlir::braid::roundToDType(v, dtype_);
}

int64_t mlir::braid::numElements(llvm::ArrayRef<int64_t> shape) {
  // Zero first: [2^40, 2^40, 0] is empty, not an overflow.
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::optional<llvm::SmallVector<int64_t>>
mlir::braid::broadcastShapes(llvm::ArrayRef<int64_t> a,
                             llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> mlir::braid::broadcastIndexMap(llvm::ArrayRef<int64_t> from,
                                                    llvm::ArrayRef<int64_t> to) {
  size_t rank = to.size(), offset = rank - from.size();
  // Stride of each output dimension in the source (0 where broadcast).
  llvm::SmallVector<int64_t> srcStride(rank, 0);
  int64_t s = 1;
  for (int64_t i = (int64_t)from.size() - 1; i >= 0; --i) {
    srcStride[i + offset] = from[i] == 1 ? 0 : s;
    s *= from[i];
  }
  int64_t n = numElements(to);
  std::vector<int64_t> map(n);
  llvm::SmallVector<int64_t> idx(rank, 0);
  int64_t src = 0;
  for (int64_t flat = 0; flat < n; ++flat) {
    map[flat] = src;
    // Odometer increment of the output index, updating the source offset.
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      if (++idx[d] < to[d]) {
        src += srcStride[d];
        break;
      }
      src -= srcStride[d] * (to[d] - 1);
      idx[d] = 0;
    }
  }
  return map;
}

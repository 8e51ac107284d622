//===- TensorTest.cpp - Tensor shapes, broadcasting and rounding -----------===//

#include "braid/Support/Tensor.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace mlir::braid;

namespace {

TEST(TensorTest, BroadcastShapesFollowNumPy) {
  auto s = broadcastShapes({2, 1, 4}, {3, 1});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(llvm::ArrayRef<int64_t>(*s), llvm::ArrayRef<int64_t>({2, 3, 4}));
  EXPECT_FALSE(broadcastShapes({2, 3}, {4}).has_value());
  auto scalar = broadcastShapes({}, {5});
  ASSERT_TRUE(scalar.has_value());
  EXPECT_EQ(llvm::ArrayRef<int64_t>(*scalar), llvm::ArrayRef<int64_t>({5}));
}

TEST(TensorTest, BroadcastIndexMapRepeatsStretchedDimensions) {
  // [2, 1] -> [2, 3]: each row repeats its single element.
  std::vector<int64_t> map = broadcastIndexMap({2, 1}, {2, 3});
  EXPECT_EQ(map, (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  // [3] -> [2, 3]: each row reads the whole vector.
  map = broadcastIndexMap({3}, {2, 3});
  EXPECT_EQ(map, (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  // Identity.
  map = broadcastIndexMap({2, 2}, {2, 2});
  EXPECT_EQ(map, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(TensorTest, StridesAreRowMajor) {
  Tensor t({2, 3, 4}, DType::F32);
  EXPECT_EQ(t.numElements(), 24);
  EXPECT_EQ(llvm::ArrayRef<int64_t>(t.strides()),
            llvm::ArrayRef<int64_t>({12, 4, 1}));
}

TEST(TensorTest, RoundingMatchesTheElementType) {
  double x = 1.0 + std::ldexp(1.0, -30);
  EXPECT_EQ(roundToDType(x, DType::F64), x);
  EXPECT_EQ(roundToDType(x, DType::F32), 1.0);
  // bf16 has 8 significand bits: 1 + 2^-8 is a tie, rounded to even (1).
  EXPECT_EQ(roundToDType(1.0 + std::ldexp(1.0, -8), DType::BF16), 1.0);
  EXPECT_EQ(roundToDType(1.0 + 3 * std::ldexp(1.0, -8), DType::BF16),
            1.0 + std::ldexp(1.0, -6));
  // f16's largest finite value is 65504.
  EXPECT_EQ(roundToDType(65504.0, DType::F16), 65504.0);
  EXPECT_TRUE(std::isinf(roundToDType(70000.0, DType::F16)));
  EXPECT_EQ(roundToDType(-2.7, DType::I32), -2.0);
}

TEST(TensorTest, DTypeNamesRoundTrip) {
  for (DType d : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                  DType::I32})
    EXPECT_EQ(parseDType(dtypeName(d)), d);
  EXPECT_FALSE(parseDType("F8").has_value());
}

} // namespace

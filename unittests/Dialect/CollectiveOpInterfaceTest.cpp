//===- CollectiveOpInterfaceTest.cpp - What each collective reports -------===//
//
// Checks every accessor of CollectiveOpInterface on every collective, the
// blocking and the started form, against the op as written, and that
// every braid op over mesh axes implements the interface.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <optional>

using namespace mlir;
using namespace mlir::braid;

namespace {

// One of each collective on a 2 x 4 mesh: %x is 4 x 8 f32.
constexpr const char *kProgram = R"mlir(
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @all(%x: tensor<4x8xf32>) {
  %0 = braid.all_reduce max %x on @mesh ["dp", "tp"] {braid.cause = "c"} : tensor<4x8xf32>
  %1 = braid.all_reduce_start sum %x on @mesh ["tp"] : tensor<4x8xf32> -> !braid.future<tensor<4x8xf32>>
  %2 = braid.all_gather %x on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x32xf32>
  %3 = braid.all_gather_start %x on @mesh ["dp"] {dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<8x8xf32>>
  %4 = braid.reduce_scatter %x on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x2xf32>
  %5 = braid.reduce_scatter_start %x on @mesh ["dp"] {dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<2x8xf32>>
  %6 = braid.all_to_all %x on @mesh ["tp"] {split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<16x2xf32>
  %7 = braid.all_to_all_start %x on @mesh ["dp"] {split_dim = 0 : i64, concat_dim = 1 : i64} : tensor<4x8xf32> -> !braid.future<tensor<2x16xf32>>
  %8 = braid.all_slice %x on @mesh ["dp"] {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %9 = braid.broadcast_from %x on @mesh ["tp"] {root = 3 : i64} : tensor<4x8xf32>
  %10 = braid.broadcast_from_start %x on @mesh ["dp"] {root = 1 : i64} : tensor<4x8xf32> -> !braid.future<tensor<4x8xf32>>
  return
}
)mlir";

/// What the op as written says, one row per op of kProgram, in order.
struct Expected {
  const char *name;
  CollectiveKind kind;
  std::optional<ReduceKind> reduction;
  std::optional<int64_t> scatterDim, gatherDim, root;
  bool started;
  const char *axes;
  int64_t groupSize;
  SmallVector<int64_t> resultShape;
  // Ring model, n = groupSize: bytes sent as a multiple of S; steps.
  double traffic;
  int64_t steps;
  // The started form createStart builds, or null.
  const char *start;
};

// clang-format off
const Expected kExpected[] = {
    {"braid.all_reduce", CollectiveKind::all_reduce, ReduceKind::max, {}, {},
     {}, false, "dp,tp", 8, {4, 8}, 2.0 * 7 / 8, 14, "braid.all_reduce_start"},
    {"braid.all_reduce_start", CollectiveKind::all_reduce, ReduceKind::sum,
     {}, {}, {}, true, "tp", 4, {4, 8}, 2.0 * 3 / 4, 6, nullptr},
    {"braid.all_gather", CollectiveKind::all_gather, {}, {}, 1, {}, false,
     "tp", 4, {4, 32}, 3.0 / 4, 3, "braid.all_gather_start"},
    {"braid.all_gather_start", CollectiveKind::all_gather, {}, {}, 0, {}, true,
     "dp", 2, {8, 8}, 1.0 / 2, 1, nullptr},
    {"braid.reduce_scatter", CollectiveKind::reduce_scatter, ReduceKind::sum, 1,
     {}, {}, false, "tp", 4, {4, 2}, 3.0 / 4, 3, "braid.reduce_scatter_start"},
    {"braid.reduce_scatter_start", CollectiveKind::reduce_scatter,
     ReduceKind::sum, 0, {}, {}, true, "dp", 2, {2, 8}, 1.0 / 2, 1, nullptr},
    {"braid.all_to_all", CollectiveKind::all_to_all, {}, 1, 0, {}, false, "tp",
     4, {16, 2}, 3.0 / 4, 3, "braid.all_to_all_start"},
    {"braid.all_to_all_start", CollectiveKind::all_to_all, {}, 0, 1, {}, true,
     "dp", 2, {2, 16}, 1.0 / 2, 1, nullptr},
    {"braid.all_slice", CollectiveKind::all_slice, {}, 1, {}, {}, false, "dp",
     2, {4, 4}, 0.0, 0, nullptr},
    {"braid.broadcast_from", CollectiveKind::broadcast_from, {}, {}, {}, 3,
     false, "tp", 4, {4, 8}, 1.0, 3, "braid.broadcast_from_start"},
    {"braid.broadcast_from_start", CollectiveKind::broadcast_from, {}, {}, {},
     1, true, "dp", 2, {4, 8}, 1.0, 1, nullptr},
};
// clang-format on

class CollectiveOpInterfaceTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx.loadDialect<BraidDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kProgram, &ctx);
    ASSERT_TRUE(module);
    for (Operation &op : module->lookupSymbol<func::FuncOp>("all").getOps())
      if (!isa<func::ReturnOp>(op))
        ops.push_back(&op);
    mesh = module->lookupSymbol<MeshOp>("mesh");
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  SmallVector<Operation *> ops;
  MeshOp mesh;
};

TEST_F(CollectiveOpInterfaceTest, AccessorsMatchTheOps) {
  ASSERT_EQ(ops.size(), std::size(kExpected));
  for (auto [op, want] : llvm::zip(ops, kExpected)) {
    SCOPED_TRACE(want.name);
    ASSERT_EQ(op->getName().getStringRef(), want.name);
    auto coll = dyn_cast<CollectiveOpInterface>(op);
    ASSERT_TRUE(coll);
    EXPECT_EQ(coll.getCollectiveKind(), want.kind);
    EXPECT_EQ(coll.getReduction(), want.reduction);
    EXPECT_EQ(coll.getScatterDim(), want.scatterDim);
    EXPECT_EQ(coll.getGatherDim(), want.gatherDim);
    EXPECT_EQ(coll.getGroupRoot(), want.root);
    EXPECT_EQ(coll.isStarted(), want.started);
    EXPECT_EQ(coll.getInput(), op->getOperand(0));
    EXPECT_EQ(coll.getMeshAttr().getValue(), "mesh");
    std::string axes;
    for (Attribute a : coll.getAxes())
      axes += (axes.empty() ? "" : ",") + cast<StringAttr>(a).getValue().str();
    EXPECT_EQ(axes, want.axes);
    EXPECT_EQ(coll.getGroupSize(mesh), want.groupSize);
    EXPECT_EQ(coll.getResultTensorType(),
              RankedTensorType::get(want.resultShape, Float32Type::get(&ctx)));
    EXPECT_DOUBLE_EQ(coll.getRingTraffic(want.groupSize), want.traffic);
    EXPECT_EQ(coll.getRingSteps(want.groupSize), want.steps);
  }
}

TEST_F(CollectiveOpInterfaceTest, CreateStartCopiesOperandsAndAttributes) {
  OpBuilder b(&ctx);
  for (auto [op, want] : llvm::zip(ops, kExpected)) {
    SCOPED_TRACE(want.name);
    auto coll = cast<CollectiveOpInterface>(op);
    b.setInsertionPoint(op);
    Operation *start = coll.createStart(b);
    if (!want.start) {
      EXPECT_EQ(start, nullptr);
      continue;
    }
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->getName().getStringRef(), want.start);
    EXPECT_EQ(start->getNextNode(), op);
    EXPECT_EQ(start->getOperands(), op->getOperands());
    EXPECT_EQ(start->getAttrDictionary(), op->getAttrDictionary());
    EXPECT_EQ(start->getResult(0).getType(),
              FutureType::get(
                  &ctx, cast<RankedTensorType>(op->getResult(0).getType())));
    auto started = dyn_cast<CollectiveOpInterface>(start);
    ASSERT_TRUE(started);
    EXPECT_TRUE(started.isStarted());
    EXPECT_EQ(started.getCollectiveKind(), want.kind);
    EXPECT_TRUE(succeeded(verify(start)));
    start->erase();
  }
}

// A new collective that forgets the interface would be invisible to the
// passes and the lowering: every registered braid op with mesh axes must
// implement it (`mesh` and `axes`; the vocabulary-parallel ops' are
// `vocab_axes`, braid.reduce's `axes` are tensor dimensions).
TEST_F(CollectiveOpInterfaceTest, EveryOpOverMeshAxesImplementsIt) {
  int count = 0;
  for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "braid")
      continue;
    auto attrs = llvm::map_range(name.getAttributeNames(),
                                 [](StringAttr a) { return a.getValue(); });
    bool overMeshAxes =
        llvm::is_contained(attrs, "mesh") && llvm::is_contained(attrs, "axes");
    bool implements = name.hasInterface<CollectiveOpInterface>();
    EXPECT_EQ(overMeshAxes, implements) << name.getStringRef().str();
    count += implements;
  }
  EXPECT_EQ(count, int(std::size(kExpected)));
}

} // namespace

//===- ZeroShardTest.cpp - the planner against braid-shard's ZeRO-3 -------===//
//
// The planner's copy of braid-shard's ZeRO-3 dimension choice checked
// against the pass itself (its own file: the dialect's ops and the
// planner's types share names).
//
//===----------------------------------------------------------------------===//

#include "braid/Planner/PlanCost.h"

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "gtest/gtest.h"

#include "GptModel.h"

using namespace mlir;
using namespace mlir::braid;

// PlanCost.cpp's isDividedAlongVocab mirrors braid-shard's choice of the
// dimension ZeRO-3 divides a parameter along (Shard.cpp: the first one dp
// divides that tp does not split): braid-shard's shardings of the test
// GPT's tied wte (128 x 64; tp divides its vocabulary) against the
// model's.
TEST(ZeroShardTest, ZeroThreeDividesTheDimensionBraidShardDoes) {
  MLIRContext context;
  context.loadDialect<BraidDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> gpt = parseSourceString<ModuleOp>(kGpt4, &context);
  ASSERT_TRUE(gpt);
  llvm::Expected<plan::ModelCost> m = plan::extractModelCost(*gpt);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  plan::Hardware hw;
  hw.name = "test";
  plan::PlanCostModel costs(*m, hw);
  const plan::ModelCost &mc = costs.getModel();
  ASSERT_EQ(mc.vocabTables.size(), 1u);
  const plan::VocabTable &table = mc.vocabTables[0];
  ASSERT_GT(table.heads, 0);
  int checked = 0;
  for (int64_t tp : {1, 2, 4})
    for (int64_t dp : {2}) { // (the GPT's batch is 2)
      OwningOpRef<ModuleOp> module =
          parseSourceString<ModuleOp>(kGpt4, &context);
      ASSERT_TRUE(module);
      PassManager pm(&context);
      ShardPassOptions options;
      options.dp = dp;
      options.tp = tp;
      options.zero = 3;
      pm.addPass(createShardPass(options));
      ASSERT_TRUE(succeeded(pm.run(*module)));
      int dpDim = -2;
      module->walk([&](ShardOp shard) {
        auto param = shard.getInput().getDefiningOp<ParamOp>();
        if (!param || param.getState() ||
            shard.getInput().getType().getShape() !=
                llvm::ArrayRef<int64_t>(table.shape))
          return;
        Sharding sh = Sharding::fromAttr(shard.getSharding());
        dpDim = -1;
        for (unsigned d = 0; d < sh.dims.size(); ++d)
          if (llvm::is_contained(sh.dims[d], "dp"))
            dpDim = d;
      });
      ASSERT_NE(dpDim, -2) << "no shard of the table, dp " << dp << " tp "
                           << tp;
      plan::Plan plan;
      plan.dp = dp;
      plan.tp = tp;
      plan.zero = 3;
      EXPECT_EQ(plan::isDividedAlongVocab(table, plan),
                dpDim == table.vocabDim)
          << "dp " << dp << " tp " << tp << ": braid-shard divides dimension "
          << dpDim;
      checked += dpDim == table.vocabDim;
    }
  // Both outcomes occur: along the vocabulary without tp, not with.
  EXPECT_EQ(checked, 1);
}

//===- ModelCostTest.cpp - Costs read from braid IR -----------------------===//
//
// A 4-layer GPT (hidden 64, 4 heads, sequence 16, vocabulary 128, batch 2,
// as `python3 -m braid.models gpt` writes it): FLOPs, parameters and the
// tensor-parallel structure, against closed forms worked out by hand.
//
//===----------------------------------------------------------------------===//

#include "braid/Planner/ModelCost.h"

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include "GptModel.h"

using namespace mlir;
using namespace mlir::braid::plan;

namespace {

class ModelCostTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<mlir::braid::BraidDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kGpt4, &context);
    ASSERT_TRUE(module);
    llvm::Expected<ModelCost> m = extractModelCost(*module);
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    model = *m;
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  ModelCost model;
};

constexpr double b = 2, s = 16, h = 64, V = 128, ffn = 256;

TEST_F(ModelCostTest, Segments) {
  EXPECT_EQ(model.batch, 2);
  EXPECT_EQ(model.dtype, "f32");
  ASSERT_EQ(model.layers.size(), 1u);
  EXPECT_EQ(model.layers[0].count, 4);
  EXPECT_EQ(model.getNumLayers(), 4);
  EXPECT_EQ(model.layers[0].outputBytes, b * s * h * 4);
}

TEST_F(ModelCostTest, LayerMatmulFlops) {
  // Four h x h projections and two h x 4h: 2 b s (4 h^2 + 2 h ffn).
  double matmul = 2 * b * s * (4 * h * h + 2 * h * ffn);
  const SegmentCost &l = model.layers[0];
  const PassWork *none = l.passes[(int)Recompute::None];
  EXPECT_DOUBLE_EQ(none[0].getFlops(OpClass::Matmul), matmul);
  // B (input gradients) and W (weight gradients) are one product per
  // forward product each.
  EXPECT_DOUBLE_EQ(none[1].getFlops(OpClass::Matmul), matmul);
  EXPECT_DOUBLE_EQ(none[2].getFlops(OpClass::Matmul), matmul);
  // Full recomputation re-runs in B the forward products the backward
  // needs: all but the MLP's last, whose result only feeds the residual add
  // that ends the layer (2 b s (4 h^2 + h ffn)).
  const PassWork *full = l.passes[(int)Recompute::Full];
  EXPECT_DOUBLE_EQ(full[1].getFlops(OpClass::Matmul),
                   matmul + 2 * b * s * (4 * h * h + h * ffn));
  EXPECT_DOUBLE_EQ(full[2].getFlops(OpClass::Matmul), matmul);
  // The attention core: q k^T and p v, dense: 2 * 2 b s^2 h.
  EXPECT_NEAR(none[0].getFlops(OpClass::Attention), 4 * b * s * s * h,
              b * s * h + 1);
  // Its gradients, in their own class: four products. Full recomputation
  // re-runs the forward core in B too.
  EXPECT_EQ(none[1].getFlops(OpClass::Attention), 0);
  EXPECT_NEAR(none[1].getFlops(OpClass::AttentionBackward), 8 * b * s * s * h,
              3 * b * s * h + 1);
  EXPECT_EQ(none[0].getFlops(OpClass::AttentionBackward), 0);
  EXPECT_DOUBLE_EQ(full[1].getFlops(OpClass::Attention),
                   none[0].getFlops(OpClass::Attention));
}

TEST_F(ModelCostTest, Parameters) {
  const SegmentCost &l = model.layers[0];
  EXPECT_EQ(l.getParams(), 12 * h * h + 13 * h);
  // Divided: q, k, v (weights and biases), both MLP matrices and the fc
  // bias, the attention output matrix. Replicated: two norms (scale and
  // bias) and the biases of the two row-parallel products.
  EXPECT_EQ(l.replicatedParams, 6 * h);
  EXPECT_EQ(model.pre.splitParams, V * h);      // wte, vocabulary parallel
  EXPECT_EQ(model.pre.replicatedParams, s * h); // wpe
  EXPECT_EQ(model.post.getParams(), 2 * h);     // ln_f
  EXPECT_EQ(model.getParams(),
            V * h + s * h + 4 * (12 * h * h + 13 * h) + 2 * h);
  // ZeRO-3 gathers each tensor on its own: a layer's 16 (q, k, v, the
  // attention output, both MLP products, each a weight and a bias, and two
  // norms' scale and bias), wte and wpe, ln_f's two.
  EXPECT_EQ(l.paramTensors, 16);
  EXPECT_EQ(model.pre.paramTensors, 2);
  EXPECT_EQ(model.post.paramTensors, 2);
}

TEST_F(ModelCostTest, TensorParallelCollectives) {
  const SegmentCost &l = model.layers[0];
  // Megatron: one all_reduce after attention and one after the MLP in F,
  // one per column-parallel input in B.
  EXPECT_EQ(l.tpAllReduces[0][0], 2);
  EXPECT_EQ(l.tpAllReduces[0][1], 2);
  // Full recomputation re-runs in B the attention's output product and
  // its all_reduce, not the MLP's last product (its result only feeds the
  // residual add): 3, not 2 + 2.
  EXPECT_EQ(l.tpAllReduces[(int)Recompute::Full][1], 3);
  EXPECT_EQ(l.tpCollectiveBytes, b * s * h * 4);
  EXPECT_EQ(model.pre.tpAllReduces[0][0], 1);  // vocabulary-parallel lookup
  EXPECT_EQ(model.post.tpAllReduces[0][1], 1); // input gradient of the head
  // Column-parallel products (sequence parallelism reduce-scatters each
  // one's input gradient and gathers its input again in W): q, k, v and
  // the MLP's first; the head's logits.
  EXPECT_EQ(l.tpColumnProducts, 4);
  EXPECT_EQ(model.pre.tpColumnProducts, 0);
  EXPECT_EQ(model.post.tpColumnProducts, 1);
}

// With sequence parallelism the replicated tensors' gradients: a norm's
// scale and bias and a row-parallel product's bias are applied along the
// sequence without a sequence dimension (each rank's gradient covers its
// block of the sequence: summed over tp in W); wpe has the sequence
// dimension (its gradient is divided along it). Read from the shapes, not
// the names.
TEST_F(ModelCostTest, SequenceParallelGradients) {
  const SegmentCost &l = model.layers[0];
  // ln_1 and ln_2 (scale and bias), attn.proj's and mlp.proj's biases.
  EXPECT_EQ(l.sequencePartialParamTensors, 6);
  EXPECT_EQ(l.sequencePartialParams, 6 * h);
  EXPECT_EQ(l.sequenceSplitParamTensors, 0);
  EXPECT_EQ(model.pre.sequencePartialParamTensors, 0);
  EXPECT_EQ(model.pre.sequenceSplitParamTensors, 1);    // wpe
  EXPECT_EQ(model.post.sequencePartialParamTensors, 2); // ln_f
  EXPECT_EQ(model.post.sequencePartialParams, 2 * h);
  EXPECT_EQ(model.post.sequenceSplitParamTensors, 0);
}

// A GPT whose hidden size equals its sequence length (16): a parameter's
// dimension of the sequence's size is not the sequence. wpe, added to the
// activation with broadcasting along its rows, is divided; the norms'
// scales and biases and the row-parallel biases are partial, as at hidden
// 64. python3 -m braid.models gpt --layers 1 --hidden 16 --heads 2 --seq 16
// --vocab 32 --batch 2 (@forward).
constexpr const char *kGptSeqEqualsHidden = R"mlir(
braid.layer @block(%x: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  %ln_1.weight = braid.param "ln_1.weight" {init = #braid.init<ones>} : tensor<16xf32>
  %ln_1.bias = braid.param "ln_1.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %ln_1 = braid.layer_norm %x, %ln_1.weight, %ln_1.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %attn.q.weight = braid.param "attn.q.weight" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
  %attn.q.xw = braid.matmul %ln_1, %attn.q.weight : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %attn.q.bias = braid.param "attn.q.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %attn.q = braid.add %attn.q.xw, %attn.q.bias : (tensor<2x16x16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %q = braid.reshape %attn.q : (tensor<2x16x16xf32>) -> tensor<2x16x2x8xf32>
  %attn.k.weight = braid.param "attn.k.weight" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
  %attn.k.xw = braid.matmul %ln_1, %attn.k.weight : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %attn.k.bias = braid.param "attn.k.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %attn.k = braid.add %attn.k.xw, %attn.k.bias : (tensor<2x16x16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %k = braid.reshape %attn.k : (tensor<2x16x16xf32>) -> tensor<2x16x2x8xf32>
  %attn.v.weight = braid.param "attn.v.weight" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
  %attn.v.xw = braid.matmul %ln_1, %attn.v.weight : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %attn.v.bias = braid.param "attn.v.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %attn.v = braid.add %attn.v.xw, %attn.v.bias : (tensor<2x16x16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %v = braid.reshape %attn.v : (tensor<2x16x16xf32>) -> tensor<2x16x2x8xf32>
  %attn = braid.attention %q, %k, %v {causal} : (tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>) -> tensor<2x16x2x8xf32>
  %attn.out = braid.reshape %attn : (tensor<2x16x2x8xf32>) -> tensor<2x16x16xf32>
  %attn.proj.weight = braid.param "attn.proj.weight" {init = #braid.init<normal(0.014142135623730949)>} : tensor<16x16xf32>
  %attn.proj.xw = braid.matmul %attn.out, %attn.proj.weight : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %attn.proj.bias = braid.param "attn.proj.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %attn.proj = braid.add %attn.proj.xw, %attn.proj.bias : (tensor<2x16x16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %x_1 = braid.add %x, %attn.proj : (tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %ln_2.weight = braid.param "ln_2.weight" {init = #braid.init<ones>} : tensor<16xf32>
  %ln_2.bias = braid.param "ln_2.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %ln_2 = braid.layer_norm %x_1, %ln_2.weight, %ln_2.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %mlp.fc.weight = braid.param "mlp.fc.weight" {init = #braid.init<normal(0.02)>} : tensor<16x64xf32>
  %mlp.fc.xw = braid.matmul %ln_2, %mlp.fc.weight : (tensor<2x16x16xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  %mlp.fc.bias = braid.param "mlp.fc.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %mlp.fc = braid.add %mlp.fc.xw, %mlp.fc.bias : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %gelu = braid.gelu tanh %mlp.fc : tensor<2x16x64xf32>
  %mlp.proj.weight = braid.param "mlp.proj.weight" {init = #braid.init<normal(0.014142135623730949)>} : tensor<64x16xf32>
  %mlp.proj.xw = braid.matmul %gelu, %mlp.proj.weight : (tensor<2x16x64xf32>, tensor<64x16xf32>) -> tensor<2x16x16xf32>
  %mlp.proj.bias = braid.param "mlp.proj.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %mlp.proj = braid.add %mlp.proj.xw, %mlp.proj.bias : (tensor<2x16x16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %x_2 = braid.add %x_1, %mlp.proj : (tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  braid.yield %x_2 : tensor<2x16x16xf32>
}

func.func @forward(%tokens: tensor<2x16xi32> {braid.name = "tokens", braid.range = 32 : i64}, %labels: tensor<2x16xi32> {braid.name = "labels", braid.range = 32 : i64}) -> tensor<f32> {
  %wte.weight = braid.param "wte.weight" {init = #braid.init<normal(0.02)>} : tensor<32x16xf32>
  %wpe.weight = braid.param "wpe.weight" {init = #braid.init<normal(0.01)>} : tensor<16x16xf32>
  %emb = braid.embedding %wte.weight, %tokens : (tensor<32x16xf32>, tensor<2x16xi32>) -> tensor<2x16x16xf32>
  %x = braid.add %emb, %wpe.weight : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %h = braid.repeat @block(%x) {prefix = "h", count = 1 : i64} : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %ln_f.weight = braid.param "ln_f.weight" {init = #braid.init<ones>} : tensor<16xf32>
  %ln_f.bias = braid.param "ln_f.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %ln_f = braid.layer_norm %h, %ln_f.weight, %ln_f.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32>
  %logits = braid.matmul %ln_f, %wte.weight {transpose_b} : (tensor<2x16x16xf32>, tensor<32x16xf32>) -> tensor<2x16x32xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x16x32xf32>, tensor<2x16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
)mlir";

TEST(ModelCostSequenceTest, HiddenEqualToTheSequence) {
  MLIRContext context;
  context.loadDialect<mlir::braid::BraidDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(kGptSeqEqualsHidden, &context);
  ASSERT_TRUE(module);
  llvm::Expected<ModelCost> m = extractModelCost(*module);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ(m->pre.sequenceSplitParamTensors, 1); // wpe
  EXPECT_EQ(m->pre.sequencePartialParamTensors, 0);
  EXPECT_EQ(m->post.sequenceSplitParamTensors, 0);
  EXPECT_EQ(m->post.sequencePartialParamTensors, 2); // ln_f
  ASSERT_EQ(m->layers.size(), 1u);
  EXPECT_EQ(m->layers[0].sequenceSplitParamTensors, 0);
  EXPECT_EQ(m->layers[0].sequencePartialParamTensors, 6);

  // A 16 x 16 parameter against a [2, 16, 16] activation: contracted by a
  // product, partial (each rank's gradient sums its block of the
  // sequence); added with broadcasting, its rows are the sequence's. (The
  // planner's SplitAnalysis has tp divide every product's weight, so
  // extractModelCost never asks about the first.)
  OwningOpRef<ModuleOp> uses = parseSourceString<ModuleOp>(R"mlir(
func.func @f(%x: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  %w = braid.param "w" {init = #braid.init<zeros>} : tensor<16x16xf32>
  %y = braid.matmul %x, %w : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %p = braid.param "p" {init = #braid.init<zeros>} : tensor<16x16xf32>
  %z = braid.add %y, %p : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  return %z : tensor<2x16x16xf32>
}
)mlir",
                                                           &context);
  ASSERT_TRUE(uses);
  Type act = RankedTensorType::get({2, 16, 16}, Float32Type::get(&context));
  llvm::StringMap<SequenceGrad> grads;
  uses->walk([&](mlir::braid::ParamOp p) {
    grads[p.getName()] = getSequenceGrad(p, act);
  });
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads["w"], SequenceGrad::Partial);
  EXPECT_EQ(grads["p"], SequenceGrad::Divided);
  // Not against an activation of another shape.
  Type other = RankedTensorType::get({2, 8, 16}, Float32Type::get(&context));
  uses->walk([&](mlir::braid::ParamOp p) {
    EXPECT_EQ(getSequenceGrad(p, other), SequenceGrad::None);
  });
}

// The tables read only along their vocabulary (ZeRO-3's lookups read them
// as stored): the tied wte, looked up (its rows) and the head's product
// (transposed: its rows are the logits' vocabulary).
TEST_F(ModelCostTest, VocabularyTables) {
  ASSERT_EQ(model.vocabTables.size(), 1u);
  const VocabTable &t = model.vocabTables[0];
  EXPECT_EQ(t.shape, (llvm::SmallVector<int64_t, 2>{128, 64}));
  EXPECT_EQ(t.vocabDim, 0);
  EXPECT_EQ(t.getElements(), V * h);
  EXPECT_EQ(t.lookups, 1);
  EXPECT_EQ(t.lookupIdBytes, b * s * 4); // i32 token ids
  EXPECT_EQ(t.heads, 1);
}

// An untied head of hidden x vocabulary (Llama's lm_head): a table of its
// own whose vocabulary is its second dimension; the embedding's table is
// one too (lookups only). A table read any other way is none.
TEST(ModelCostVocabTest, UntiedHeadAndOtherUses) {
  MLIRContext context;
  context.loadDialect<mlir::braid::BraidDialect, func::FuncDialect>();
  std::string text = kGpt4;
  auto replace = [&](llvm::StringRef from, llvm::StringRef to) {
    size_t at = text.find(from.str());
    ASSERT_NE(at, std::string::npos) << from.str();
    text.replace(at, from.size(), to.str());
  };
  replace("%logits = braid.matmul %ln_f, %wte.weight {transpose_b} : "
          "(tensor<2x16x64xf32>, tensor<128x64xf32>)",
          "%head = braid.param \"head\" {init = #braid.init<zeros>} : "
          "tensor<64x128xf32>\n  %logits = braid.matmul %ln_f, %head : "
          "(tensor<2x16x64xf32>, tensor<64x128xf32>)");
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  llvm::Expected<ModelCost> m = extractModelCost(*module);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_EQ(m->vocabTables.size(), 2u);
  const VocabTable &wte = m->vocabTables[0], &head = m->vocabTables[1];
  EXPECT_EQ(wte.lookups, 1);
  EXPECT_EQ(wte.heads, 0);
  EXPECT_EQ(head.shape, (llvm::SmallVector<int64_t, 2>{64, 128}));
  EXPECT_EQ(head.vocabDim, 1);
  EXPECT_EQ(head.heads, 1);
  EXPECT_EQ(head.lookups, 0);
  EXPECT_EQ(m->tiedParams, 0);
  // The head's table also scaled elementwise: no longer read along its
  // vocabulary alone.
  replace("%logits = braid.matmul %ln_f, %head :",
          "%head2 = braid.mul %head, %head : (tensor<64x128xf32>, "
          "tensor<64x128xf32>) -> tensor<64x128xf32>\n  %logits = "
          "braid.matmul %ln_f, %head2 :");
  module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  m = extractModelCost(*module);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_EQ(m->vocabTables.size(), 1u);
  EXPECT_EQ(m->vocabTables[0].lookups, 1);
}

TEST_F(ModelCostTest, SavedActivations) {
  const SegmentCost &l = model.layers[0];
  double none = l.getSavedBytes(Recompute::None, 1, false);
  double selective = l.getSavedBytes(Recompute::Selective, 1, false);
  double full = l.getSavedBytes(Recompute::Full, 1, false);
  // Full keeps only the layer's input.
  EXPECT_EQ(full, b * s * h * 4);
  EXPECT_LT(full, selective);
  EXPECT_LT(selective, none);
  // Divided parts shrink with tp, replicated ones only with sp.
  EXPECT_LT(l.getSavedBytes(Recompute::None, 2, false), none);
  EXPECT_GT(l.getSavedBytes(Recompute::None, 2, false), none / 2);
  EXPECT_DOUBLE_EQ(l.getSavedBytes(Recompute::None, 2, true), none / 2);
}

// The buffers a layer function holds at its peak, read from braid-autodiff's
// F, B and W layers as braidc's lowering places them
// (test/Planner/pipeline-arenas.test checks them against braidc's memory
// plan).
TEST_F(ModelCostTest, LayerArenas) {
  const SegmentCost &l = model.layers[0];
  auto arena = [&](Recompute r, PassKind p, double scale = 1, int tp = 1,
                   bool sp = false) {
    return l.getArenaBytes(r, p, scale, tp, sp);
  };
  double weights = l.getParams() * 4;
  for (int r = 0; r < kNumRecomputeModes; ++r)
    for (int p = 0; p < kNumPassKinds; ++p) {
      // Each function holds its results at its end.
      EXPECT_GE(arena(Recompute(r), PassKind(p)),
                l.getYieldedBytes(Recompute(r), PassKind(p), 1, 1, false) -
                    l.outputBytes)
          << r << " " << p;
    }
  // F yields its saved values and the carried output.
  EXPECT_DOUBLE_EQ(
      l.getYieldedBytes(Recompute::None, PassKind::Forward, 1, 1, false),
      l.getSavedBytes(Recompute::None, 1, false) + l.outputBytes);
  // W yields the layer's weight gradients, which do not grow with the
  // micro-batch; F's values do.
  EXPECT_DOUBLE_EQ(
      l.getYieldedBytes(Recompute::None, PassKind::Weight, 1, 1, false),
      weights);
  EXPECT_DOUBLE_EQ(
      l.getYieldedBytes(Recompute::None, PassKind::Weight, 4, 1, false),
      weights);
  EXPECT_GT(arena(Recompute::None, PassKind::Forward, 2),
            1.9 * arena(Recompute::None, PassKind::Forward));
  // Full recomputation keeps less in F and re-runs F in B.
  EXPECT_LT(arena(Recompute::Full, PassKind::Forward),
            arena(Recompute::None, PassKind::Forward));
  EXPECT_GT(arena(Recompute::Full, PassKind::Backward),
            arena(Recompute::None, PassKind::Backward));
  // tp divides the products' values; sp the rest of the activations.
  double f = arena(Recompute::None, PassKind::Forward);
  EXPECT_LT(arena(Recompute::None, PassKind::Forward, 1, 2), f);
  EXPECT_GT(arena(Recompute::None, PassKind::Forward, 1, 2), f / 2);
  EXPECT_DOUBLE_EQ(arena(Recompute::None, PassKind::Forward, 1, 2, true),
                   f / 2);
}

// The kernels each pass runs (each pays the hardware's fixed cost per
// kernel), the row-wise ops (RowReductionOpInterface: the norms) and the
// loss (row-wise with integer labels), each class at its own efficiency.
TEST_F(ModelCostTest, KernelsAndRowWiseWork) {
  const PassWork &f = model.layers[0].passes[(int)Recompute::None][0];
  // 2 layer norms, 6 products, 6 bias adds, 2 residual adds, the attention
  // and the GELU; the reshapes and parameter reads are free. The bias adds
  // of the attention's and the MLP's output products are read only by the
  // residual adds: braid-fuse-elementwise runs each pair as one loop, so 16
  // kernels, and neither sum is written or read.
  EXPECT_EQ(f.kernels, 16);
  // The elementwise bytes: q, k, v's and the output's bias adds (each
  // reads b s h and h, writes b s h), the MLP's (b s ffn and ffn, writes
  // b s ffn), the residual adds (two b s h in, one out), less the two fused
  // sums' write and read; the GELU (reads and writes b s ffn) is a
  // transcendental op, in its own class.
  double bsh = b * s * h, bsf = b * s * ffn;
  double elementwise =
      5 * (2 * bsh + h) + (2 * bsf + ffn) + 2 * 3 * bsh - 2 * 2 * bsh;
  EXPECT_DOUBLE_EQ(f.split[(int)OpClass::Memory].bytes +
                       f.replicated[(int)OpClass::Memory].bytes,
                   elementwise * 4);
  EXPECT_DOUBLE_EQ(f.split[(int)OpClass::Transcendental].bytes +
                       f.replicated[(int)OpClass::Transcendental].bytes,
                   2 * bsf * 4);
  // The layer norms: each reads x, scale and bias and writes y.
  double norm = (2 * b * s * h + 2 * h) * 4;
  auto rowBytes = [](const PassWork &w) {
    return w.split[(int)OpClass::RowWise].bytes +
           w.replicated[(int)OpClass::RowWise].bytes;
  };
  EXPECT_DOUBLE_EQ(rowBytes(f), 2 * norm);
  // After the layers: ln_f, the head's product and the loss, which reads
  // the logits and the labels (i32: a row-wise op with integer labels is
  // the loss class) and writes a scalar.
  const PassWork &post = model.post.passes[(int)Recompute::None][0];
  EXPECT_EQ(post.kernels, 3);
  EXPECT_DOUBLE_EQ(rowBytes(post), norm);
  EXPECT_DOUBLE_EQ(post.split[(int)OpClass::Loss].bytes +
                       post.replicated[(int)OpClass::Loss].bytes,
                   (b * s * V + b * s + 1) * 4);
  // Its gradient in B: logits, labels and the scalar gradient in, the
  // logits' gradient out.
  const PassWork &postB = model.post.passes[(int)Recompute::None][1];
  EXPECT_DOUBLE_EQ(postB.split[(int)OpClass::Loss].bytes +
                       postB.replicated[(int)OpClass::Loss].bytes,
                   (2 * b * s * V + b * s + 1) * 4);
  // Before the layers: the lookup and the position add, none row-wise.
  const PassWork &pre = model.pre.passes[(int)Recompute::None][0];
  EXPECT_EQ(pre.kernels, 2);
  EXPECT_EQ(rowBytes(pre), 0);
}

TEST_F(ModelCostTest, MissingEntry) {
  llvm::Expected<ModelCost> m = extractModelCost(*module, "nope");
  ASSERT_FALSE(bool(m));
  EXPECT_EQ(llvm::toString(m.takeError()), "no function @nope in the module");
}

} // namespace

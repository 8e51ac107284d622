//===- ComputeOps.cpp - Compute ops as kernel calls -------------------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

template <typename OpT>
static void addBinary(LoweringTable &t, StringRef kernel) {
  t.add<OpT>([kernel](OpT op, FunctionLowering &l) -> LogicalResult {
    l.kernel(kernel, {l.get(op.getLhs()), l.get(op.getRhs()),
                      l.i64(l.rankOf(op.getLhs())), l.shapeOf(op.getLhs()),
                      l.i64(l.rankOf(op.getRhs())), l.shapeOf(op.getRhs()),
                      l.result(op.getResult())});
    return success();
  });
}

template <typename OpT>
static void addUnary(LoweringTable &t, StringRef kernel) {
  t.add<OpT>([kernel](OpT op, FunctionLowering &l) -> LogicalResult {
    l.kernel(kernel, {l.get(op.getInput()), l.i64(l.countOf(op.getInput())),
                      l.result(op.getResult())});
    return success();
  });
}

/// The kernel name for integer operand `ids`: `base` for i32, `base_i64`.
static std::string idKernel(StringRef base, Value ids) {
  return FunctionLowering::typeOf(ids).getElementType().isInteger(64)
             ? (base + "_i64").str()
             : base.str();
}

/// The group of a vocabulary-parallel op (with `mesh` and `vocab_axes`),
/// or -1 for a single-device op.
template <typename OpT>
static FailureOr<int64_t> vocabGroup(OpT op, FunctionLowering &l) {
  if (!op.getMeshAttr())
    return int64_t(-1);
  if (!op.getVocabAxesAttr())
    return op.emitOpError() << "has a mesh but no vocab_axes";
  return l.module.getGroup(op, op.getMeshAttr(), op.getVocabAxesAttr());
}

/// Whether ids of `v` are i64 (an `int` flag for the SPMD helpers).
static Value isI64(FunctionLowering &l, Value ids) {
  return l.flag(FunctionLowering::typeOf(ids).getElementType().isInteger(64));
}

/// Checks ids (labels, token ids) against [0, range) before a kernel, whose
/// INVALID_ARGUMENT would name neither the id nor its position.
static void checkIds(FunctionLowering &l, StringRef what, Value ids,
                     int64_t range) {
  l.call("braid_rt_program_check_ids",
         {l.text(what), l.get(ids), isI64(l, ids), l.i64(l.countOf(ids)),
          l.i64(range), l.whereText()});
}


/// The effective scale of attention and its gradient: the attribute, else
/// 1 / sqrt(dim).
template <typename OpT> static double attentionScale(OpT op, int64_t dim) {
  if (std::optional<APFloat> scale = op.getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(dim));
}

/// `op` and the attention_grad ops right after it of the same operands and
/// attributes, one per gradient operand: the gradients of one attention,
/// which braid_rt_attention_grad_all_f32 computes in one call. Only
/// adjacent ops join, so that writing the later ops' results at the first
/// changes no buffer's lifetime.
static SmallVector<AttentionGradOp, 3> attentionGradGroup(AttentionGradOp op) {
  SmallVector<AttentionGradOp, 3> group = {op};
  unsigned seen = 1u << op.getOperand();
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    auto other = dyn_cast<AttentionGradOp>(next);
    if (!other || other->getOperands() != op->getOperands() ||
        other.getCausal() != op.getCausal() ||
        other.getScaleAttr() != op.getScaleAttr() ||
        (seen & (1u << other.getOperand()))) // operand: 0-2 (verifier)
      break;
    seen |= 1u << other.getOperand();
    group.push_back(other);
  }
  return group;
}

/// A local `float *inputs[n]` holding the buffers of `values`, and the
/// static array of their element counts, for the kernels over lists.
static std::pair<Value, Value> bufferList(FunctionLowering &l,
                                          ValueRange values) {
  OpBuilder &b = l.b;
  auto type = emitc::ArrayType::get(
      {std::max<int64_t>(1, values.size())},
      emitc::PointerType::get(l.typeOf(values.front()).getElementType()));
  Value list = emitc::VariableOp::create(
      b, l.loc, type, emitc::OpaqueAttr::get(b.getContext(), ""));
  SmallVector<int64_t> counts;
  for (auto [i, v] : llvm::enumerate(values)) {
    Value element = emitc::SubscriptOp::create(
        b, l.loc, cast<TypedValue<emitc::ArrayType>>(list),
        ValueRange{l.index(i)});
    emitc::AssignOp::create(b, l.loc, element, l.get(v));
    counts.push_back(l.countOf(v));
  }
  return {list, l.shape(counts)};
}

template <typename OpT>
static void addActivationGrad(LoweringTable &t, StringRef kernel) {
  t.add<OpT>([kernel](OpT op, FunctionLowering &l) -> LogicalResult {
    l.kernel(kernel,
             {l.get(op.getInput()), l.get(op.getGrad()),
              l.i64(l.countOf(op.getInput())), l.result(op.getResult())});
    return success();
  });
}

/// The kernel for a data-movement op on `v`'s element type (f32 or i32).
static FailureOr<std::string> movementKernel(Operation *op, StringRef base,
                                             Value v) {
  Type element = FunctionLowering::typeOf(v).getElementType();
  if (element.isInteger(64))
    return op->emitOpError() << "moves i64 elements; the kernels take f32 and "
                                "i32";
  return (base + "_" + getElementSuffix(element)).str();
}

/// The `stride` attribute as an array, or a null pointer when absent.
static Value strideArray(FunctionLowering &l,
                         std::optional<ArrayRef<int64_t>> stride) {
  if (stride)
    return l.shape(*stride);
  return emitc::LiteralOp::create(l.b, l.loc,
                                  emitc::PointerType::get(l.b.getI64Type()),
                                  l.b.getStringAttr("nullptr"));
}

/// The element offset of `op`'s result in its input when the result is
/// one contiguous run of it: unit strides, every dimension after the first
/// partial one whole, every one before it of size 1.
static std::optional<int64_t> getContiguousOffset(SliceOp op) {
  if (std::optional<ArrayRef<int64_t>> stride = op.getStride())
    if (llvm::any_of(*stride, [](int64_t s) { return s != 1; }))
      return std::nullopt;
  ArrayRef<int64_t> in =
      cast<RankedTensorType>(op.getInput().getType()).getShape();
  ArrayRef<int64_t> out =
      cast<RankedTensorType>(op.getResult().getType()).getShape();
  ArrayRef<int64_t> start = op.getStart();
  int64_t rank = in.size(), offset = 0, stride = 1;
  bool partial = false; // a dimension after this one is not whole
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (partial && out[d] != 1)
      return std::nullopt;
    partial |= out[d] != in[d];
    offset += start[d] * stride;
    stride *= in[d];
  }
  return offset;
}

static void populateShapeLowerings(LoweringTable &t) {
  t.add<SliceOp>([](SliceOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<std::string> kernel =
        movementKernel(op, "braid_rt_slice", op.getInput());
    if (failed(kernel))
      return failure();
    // A contiguous slice (a dp gradient bucket's pieces) is a view of its
    // input, not a copy.
    if (std::optional<int64_t> offset = getContiguousOffset(op))
      if (l.aliasView(op.getResult(), l.get(op.getInput()), *offset))
        return success();
    l.kernel(*kernel, {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
                       l.shapeOf(op.getInput()), l.shape(op.getStart()),
                       strideArray(l, op.getStride()),
                       l.shapeOf(op.getResult()), l.result(op.getResult())});
    return success();
  });
  t.add<SliceGradOp>([](SliceGradOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_slice_grad_f32",
             {l.get(op.getGrad()), l.i64(l.rankOf(op.getGrad())),
              l.shapeOf(op.getGrad()), l.shape(op.getStart()),
              strideArray(l, op.getStride()), l.shapeOf(op.getResult()),
              l.result(op.getResult())});
    return success();
  });
  t.add<ConcatOp>([](ConcatOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<std::string> kernel =
        movementKernel(op, "braid_rt_concat", op.getResult());
    if (failed(kernel))
      return failure();
    int64_t axis = op.getAxis();
    int64_t rank = l.rankOf(op.getResult());
    if (axis < 0)
      axis += rank;
    // Pieces computed in place (a dp gradient bucket's): copy the others.
    if (Value buffer = l.getConcatBuffer(op)) {
      Type element = l.typeOf(op.getResult()).getElementType();
      int64_t offset = 0;
      for (Value input : op.getInputs()) {
        Value from = l.get(input), to = l.getConcatView(op, offset);
        if (from != to)
          l.copy(element, from, to, l.countOf(input));
        offset += l.countOf(input);
      }
      l.alias(op.getResult(), buffer);
      return success();
    }
    SmallVector<int64_t> sizes;
    for (Value input : op.getInputs())
      sizes.push_back(l.typeOf(input).getDimSize(axis));
    Value list = bufferList(l, op.getInputs()).first;
    l.kernel(*kernel, {list, l.i64(op.getInputs().size()), l.i64(rank),
                       l.shapeOf(op.getResult()), l.i64(axis), l.shape(sizes),
                       l.result(op.getResult())});
    return success();
  });
  t.add<ReduceMaxGradOp>(
      [](ReduceMaxGradOp op, FunctionLowering &l) -> LogicalResult {
        ArrayRef<int64_t> axes = op.getAxes();
        l.kernelChecked("braid_rt_reduce_max_grad_f32",
                        {l.get(op.getInput()), l.get(op.getGrad()),
                         l.i64(l.rankOf(op.getInput())),
                         l.shapeOf(op.getInput()), l.i64(axes.size()),
                         l.shape(axes), l.result(op.getResult())});
        return success();
      });
}

static void populateTrainingLowerings(LoweringTable &t) {
  t.add<ConstantOp>([](ConstantOp op, FunctionLowering &l) -> LogicalResult {
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    Type element = l.typeOf(op.getResult()).getElementType();
    if (!dense)
      return op.emitOpError() << "has a value that is not dense elements; "
                                 "generated code takes dense constants only";
    if (!dense.isSplat() || element.isInteger(64)) {
      Value data = l.module.getConstantData(l.b, l.loc, dense);
      if (l.module.target.deviceMemory)
        l.upload(data, l.result(op.getResult()),
                 l.countOf(op.getResult()) * (element.isInteger(64) ? 8 : 4));
      else
        l.copy(element, data, l.result(op.getResult()),
               l.countOf(op.getResult()));
      return success();
    }
    Value value =
        element.isF32()
            ? l.f32(dense.getSplatValue<APFloat>().convertToDouble())
            : emitc::ConstantOp::create(
                  l.b, l.loc, l.b.getI32Type(),
                  l.b.getI32IntegerAttr(
                      dense.getSplatValue<APInt>().getSExtValue()))
                  .getResult();
    l.kernel(
        ("braid_rt_fill_" + getElementSuffix(element)).str(),
        {value, l.i64(l.countOf(op.getResult())), l.result(op.getResult())});
    return success();
  });
  t.add<ReduceOp>([](ReduceOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> axes = op.getAxes();
    l.kernel("braid_rt_reduce_f32",
             {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
              l.shapeOf(op.getInput()), l.i64(axes.size()), l.shape(axes),
              l.enumValue("braid_rt_reduce_kind_t",
                          static_cast<int64_t>(op.getKind())),
              l.result(op.getResult())});
    return success();
  });
  t.add<BroadcastOp>([](BroadcastOp op, FunctionLowering &l) -> LogicalResult {
    Type element = l.typeOf(op.getInput()).getElementType();
    if (element.isInteger(64))
      return op.emitOpError() << "broadcasts i64; the kernels take f32 and i32";
    l.kernel(("braid_rt_broadcast_to_" + getElementSuffix(element)).str(),
             {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
              l.shapeOf(op.getInput()), l.i64(l.rankOf(op.getResult())),
              l.shapeOf(op.getResult()), l.result(op.getResult())});
    return success();
  });
  addActivationGrad<ReluGradOp>(t, "braid_rt_relu_grad_f32");
  addActivationGrad<SiluGradOp>(t, "braid_rt_silu_grad_f32");
  t.add<GeluGradOp>([](GeluGradOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_gelu_grad_f32",
             {l.get(op.getInput()), l.get(op.getGrad()),
              l.i64(l.countOf(op.getInput())),
              l.enumValue("braid_rt_gelu_approximation_t",
                          static_cast<int64_t>(op.getApproximate())),
              l.result(op.getResult())});
    return success();
  });
  t.add<LayerNormGradOp>(
      [](LayerNormGradOp op, FunctionLowering &l) -> LogicalResult {
        Value x = op.getInput();
        l.kernel("braid_rt_layer_norm_grad_f32",
                 {l.get(x), l.get(op.getScale()), l.get(op.getGrad()),
                  l.i64(l.rowsOf(x)), l.i64(l.colsOf(x)),
                  l.f64(op.getEpsilon().convertToDouble()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<RmsNormGradOp>(
      [](RmsNormGradOp op, FunctionLowering &l) -> LogicalResult {
        Value x = op.getInput();
        l.kernel("braid_rt_rms_norm_grad_f32",
                 {l.get(x), l.get(op.getScale()), l.get(op.getGrad()),
                  l.i64(l.rowsOf(x)), l.i64(l.colsOf(x)),
                  l.f64(op.getEpsilon().convertToDouble()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<EmbeddingGradOp>(
      [](EmbeddingGradOp op, FunctionLowering &l) -> LogicalResult {
        FailureOr<int64_t> group = vocabGroup(op, l);
        if (failed(group))
          return failure();
        ArrayRef<int64_t> table = l.typeOf(op.getResult()).getShape();
        if (*group >= 0) {
          l.call("braid_rt_program_embedding_grad_vp_f32",
                 {l.get(op.getIds()), isI64(l, op.getIds()),
                  l.get(op.getGrad()), l.i64(l.countOf(op.getIds())),
                  l.i64(table[0]), l.i64(table[1]), l.i64(*group),
                  l.result(op.getResult()), l.whereText()});
          return success();
        }
        checkIds(l, "id", op.getIds(), table[0]);
        l.kernelChecked(idKernel("braid_rt_embedding_grad_f32", op.getIds()),
                        {l.get(op.getIds()), l.get(op.getGrad()),
                         l.i64(l.countOf(op.getIds())), l.i64(table[0]),
                         l.i64(table[1]), l.result(op.getResult())});
        return success();
      });
  t.add<AttentionGradOp>(
      [](AttentionGradOp op, FunctionLowering &l) -> LogicalResult {
        // Computed by the combined call of the first op of its group.
        if (l.get(op.getResult()))
          return success();
        ArrayRef<int64_t> q = l.typeOf(op.getQuery()).getShape();
        ArrayRef<int64_t> k = l.typeOf(op.getKey()).getShape();
        SmallVector<AttentionGradOp, 3> group = attentionGradGroup(op);
        if (group.size() > 1) {
          std::array<Value, 3> outs;
          for (AttentionGradOp g : group)
            outs[g.getOperand()] = l.result(g.getResult());
          for (Value &out : outs)
            if (!out)
              out = emitc::LiteralOp::create(
                  l.b, l.loc, emitc::PointerType::get(l.b.getF32Type()),
                  l.b.getStringAttr("nullptr"));
          l.kernelChecked("braid_rt_attention_grad_all_f32",
                          {l.get(op.getQuery()), l.get(op.getKey()),
                           l.get(op.getValue()), l.get(op.getGrad()),
                           l.i64(q[0]), l.i64(q[1]), l.i64(k[1]), l.i64(q[2]),
                           l.i64(k[2]), l.i64(q[3]), l.flag(op.getCausal()),
                           l.f64(attentionScale(op, q[3])), outs[0], outs[1],
                           outs[2]});
          return success();
        }
        l.kernelChecked("braid_rt_attention_grad_f32",
                        {l.get(op.getQuery()), l.get(op.getKey()),
                         l.get(op.getValue()), l.get(op.getGrad()), l.i64(q[0]),
                         l.i64(q[1]), l.i64(k[1]), l.i64(q[2]), l.i64(k[2]),
                         l.i64(q[3]), l.flag(op.getCausal()),
                         l.f64(attentionScale(op, q[3])),
                         l.i64(op.getOperand()), l.result(op.getResult())});
        return success();
      });
  t.add<CrossEntropyGradOp>(
      [](CrossEntropyGradOp op, FunctionLowering &l) -> LogicalResult {
        FailureOr<int64_t> group = vocabGroup(op, l);
        if (failed(group))
          return failure();
        Value logits = op.getLogits();
        if (*group >= 0) {
          l.call("braid_rt_program_cross_entropy_grad_vp_f32",
                 {l.get(logits), l.get(op.getLabels()),
                  isI64(l, op.getLabels()), l.get(op.getGrad()),
                  l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)),
                  l.i64(*group), l.result(op.getResult()), l.whereText()});
          return success();
        }
        checkIds(l, "label", op.getLabels(), l.colsOf(logits));
        l.kernelChecked(
            idKernel("braid_rt_cross_entropy_grad_f32", op.getLabels()),
            {l.get(logits), l.get(op.getLabels()), l.get(op.getGrad()),
             l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)),
             l.result(op.getResult())});
        return success();
      });
  t.add<LrScheduleOp>(
      [](LrScheduleOp op, FunctionLowering &l) -> LogicalResult {
        l.kernel(idKernel("braid_rt_lr_schedule_f32", op.getStep()),
                 {l.get(op.getStep()),
                  l.enumValue("braid_rt_lr_decay_t",
                              static_cast<int64_t>(op.getDecay())),
                  l.f64(op.getLr().convertToDouble()),
                  l.f64(op.getMinLr().convertToDouble()),
                  l.i64(op.getWarmupSteps()), l.i64(op.getTotalSteps()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<GlobalNormOp>([](GlobalNormOp op, FunctionLowering &l) -> LogicalResult {
    auto [list, counts] = bufferList(l, op.getInputs());
    l.kernel(
        "braid_rt_global_norm_f32",
        {list, counts, l.i64(op.getInputs().size()), l.result(op.getResult())});
    return success();
  });
  t.add<SumSquaresOp>([](SumSquaresOp op, FunctionLowering &l) -> LogicalResult {
    auto [list, counts] = bufferList(l, op.getInputs());
    l.kernel(
        "braid_rt_sum_squares_f32",
        {list, counts, l.i64(op.getInputs().size()), l.result(op.getResult())});
    return success();
  });
  t.add<ClipCoefficientOp>(
      [](ClipCoefficientOp op, FunctionLowering &l) -> LogicalResult {
        l.kernel("braid_rt_clip_coefficient_f32",
                 {l.get(op.getNorm()), l.f64(op.getMaxNorm().convertToDouble()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<SelectOp>([](SelectOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_select_f32",
             {l.get(op.getCondition()), l.get(op.getOnTrue()),
              l.get(op.getOnFalse()), l.i64(l.countOf(op.getResult())),
              l.result(op.getResult())});
    return success();
  });
  t.add<AdamWUpdateOp>(
      [](AdamWUpdateOp op, FunctionLowering &l) -> LogicalResult {
        l.kernel(idKernel("braid_rt_adamw_update_f32", op.getStep()),
                 {l.get(op.getParam()), l.get(op.getGrad()), l.get(op.getM()),
                  l.get(op.getV()), l.get(op.getLr()), l.get(op.getStep()),
                  l.get(op.getGradScale()), l.i64(l.countOf(op.getParam())),
                  l.f64(op.getBeta1().convertToDouble()),
                  l.f64(op.getBeta2().convertToDouble()),
                  l.f64(op.getEpsilon().convertToDouble()),
                  l.f64(op.getWeightDecay().convertToDouble()),
                  l.result(op.getNewParam()), l.result(op.getNewM()),
                  l.result(op.getNewV())});
        return success();
      });
  t.add<SgdUpdateOp>([](SgdUpdateOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_sgd_update_f32",
             {l.get(op.getParam()), l.get(op.getGrad()),
              l.get(op.getMomentumBuffer()), l.get(op.getLr()),
              l.get(op.getGradScale()), l.i64(l.countOf(op.getParam())),
              l.f64(op.getMomentum().convertToDouble()),
              l.flag(op.getNesterov()),
              l.f64(op.getWeightDecay().convertToDouble()),
              l.result(op.getNewParam()), l.result(op.getNewMomentumBuffer())});
    return success();
  });
}

/// A matmul's call, `<name>_f32(lhs, rhs[, bias], ranks and shapes,
/// transposes[, gelu], result)`; `<name>_bf16in_f32`, checked, where the
/// operands hold bf16 values (`braid.bf16_operands`, braid-legalize-bf16).
/// `bias` null for braid.matmul.
template <typename OpT>
static void lowerMatmul(OpT op, FunctionLowering &l, StringRef name, Value bias,
                        bool gelu) {
  SmallVector<Value> args = {l.get(op.getLhs()), l.get(op.getRhs())};
  if (bias)
    args.push_back(l.get(bias));
  args.append({l.i64(l.rankOf(op.getLhs())), l.shapeOf(op.getLhs()),
               l.i64(l.rankOf(op.getRhs())), l.shapeOf(op.getRhs()),
               l.flag(op.getTransposeA()), l.flag(op.getTransposeB())});
  if (bias)
    args.push_back(l.flag(gelu));
  args.push_back(l.result(op.getResult()));
  if (op->hasAttr("braid.bf16_operands"))
    l.kernelChecked((name + "_bf16in_f32").str(), args);
  else
    l.kernel((name + "_f32").str(), args);
}

void mlir::braid::lowering::populateComputeLowerings(LoweringTable &t) {
  populateShapeLowerings(t);
  populateTrainingLowerings(t);
  t.add<ReshapeOp>([](ReshapeOp op, FunctionLowering &l) -> LogicalResult {
    l.alias(op.getResult(), l.get(op.getInput()));
    return success();
  });
  // A sharding annotation is the identity on one device.
  t.add<ShardOp>([](ShardOp op, FunctionLowering &l) -> LogicalResult {
    l.alias(op.getResult(), l.get(op.getInput()));
    return success();
  });
  t.add<RotaryOp>([](RotaryOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> x = l.typeOf(op.getInput()).getShape();
    l.kernel("braid_rt_rotary_f32",
             {l.get(op.getInput()), l.i64(x[0]), l.i64(x[1]), l.i64(x[2]),
              l.i64(x[3]), l.f64(op.getBase().convertToDouble()),
              l.flag(op.getInverse()), l.result(op.getResult())});
    return success();
  });
  t.add<TransposeOp>([](TransposeOp op, FunctionLowering &l) -> LogicalResult {
    Type element = l.typeOf(op.getInput()).getElementType();
    if (element.isInteger(64))
      return op.emitOpError() << "transposes i64; the kernels take f32 and i32";
    l.kernel(("braid_rt_transpose_" + getElementSuffix(element)).str(),
             {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
              l.shapeOf(op.getInput()), l.shape(op.getPermutation()),
              l.result(op.getResult())});
    return success();
  });
  t.add<MatmulOp>([](MatmulOp op, FunctionLowering &l) -> LogicalResult {
    lowerMatmul(op, l, "braid_rt_matmul", Value(), false);
    return success();
  });
  // One GEMM with its epilogue (braid-fuse-matmul-epilogue): the same
  // entry point on every target (CPU: the bias and GELU applied to each
  // block of the product; CUDA: cublasLtMatmul's BIAS / GELU_BIAS).
  t.add<MatmulBiasOp>(
      [](MatmulBiasOp op, FunctionLowering &l) -> LogicalResult {
        lowerMatmul(op, l, "braid_rt_matmul_bias", op.getBias(),
                    op.getGelu().has_value());
        return success();
      });
  addBinary<AddOp>(t, "braid_rt_add_f32");
  addBinary<SubOp>(t, "braid_rt_sub_f32");
  addBinary<MulOp>(t, "braid_rt_mul_f32");
  addBinary<DivOp>(t, "braid_rt_div_f32");
  addUnary<NegOp>(t, "braid_rt_neg_f32");
  addUnary<ExpOp>(t, "braid_rt_exp_f32");
  addUnary<SqrtOp>(t, "braid_rt_sqrt_f32");
  addUnary<RsqrtOp>(t, "braid_rt_rsqrt_f32");
  addUnary<ReluOp>(t, "braid_rt_relu_f32");
  addUnary<SiluOp>(t, "braid_rt_silu_f32");
  t.add<RoundOp>([](RoundOp op, FunctionLowering &l) -> LogicalResult {
    if (!op.getElementType().isBF16() ||
        !l.typeOf(op.getInput()).getElementType().isF32())
      return op.emitOpError() << "rounds " << op.getInput().getType()
                              << " to " << op.getElementType()
                              << "; the kernels round f32 to bf16 only";
    l.kernel("braid_rt_round_bf16_f32",
             {l.get(op.getInput()), l.i64(l.countOf(op.getInput())),
              l.result(op.getResult())});
    return success();
  });
  // bf16 storage (braid-legalize-bf16): pack f32 holding bf16 values into
  // their 16 bits, unpack them back; both exact.
  t.add<ConvertOp>([](ConvertOp op, FunctionLowering &l) -> LogicalResult {
    Type from = l.typeOf(op.getInput()).getElementType();
    Type to = l.typeOf(op.getResult()).getElementType();
    StringRef kernel = from.isF32() && to.isBF16() ? "braid_rt_pack_bf16_f32"
                       : from.isBF16() && to.isF32()
                           ? "braid_rt_unpack_bf16_f32"
                           : "";
    if (kernel.empty())
      return op.emitOpError() << "converts " << op.getInput().getType()
                              << " to " << op.getResult().getType()
                              << "; generated code converts between f32 and "
                                 "bf16 storage only";
    l.kernel(kernel, {l.get(op.getInput()), l.i64(l.countOf(op.getInput())),
                      l.result(op.getResult())});
    return success();
  });
  t.add<GeluOp>([](GeluOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_gelu_f32",
             {l.get(op.getInput()), l.i64(l.countOf(op.getInput())),
              l.enumValue("braid_rt_gelu_approximation_t",
                          static_cast<int64_t>(op.getApproximate())),
              l.result(op.getResult())});
    return success();
  });
  t.add<SoftmaxOp>([](SoftmaxOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> shape = l.typeOf(op.getInput()).getShape();
    int64_t axis = op.getAxis();
    if (axis < 0)
      axis += shape.size();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= shape[d];
    for (int64_t d = axis + 1, e = shape.size(); d < e; ++d)
      inner *= shape[d];
    l.kernel("braid_rt_softmax_f32",
             {l.get(op.getInput()), l.i64(outer), l.i64(shape[axis]),
              l.i64(inner), l.result(op.getResult())});
    return success();
  });
  t.add<LayerNormOp>([](LayerNormOp op, FunctionLowering &l) -> LogicalResult {
    Value x = op.getInput();
    l.kernel("braid_rt_layer_norm_f32",
             {l.get(x), l.get(op.getScale()), l.get(op.getBias()),
              l.i64(l.rowsOf(x)), l.i64(l.colsOf(x)),
              l.f64(op.getEpsilon().convertToDouble()),
              l.result(op.getResult())});
    return success();
  });
  t.add<RmsNormOp>([](RmsNormOp op, FunctionLowering &l) -> LogicalResult {
    Value x = op.getInput();
    l.kernel("braid_rt_rms_norm_f32",
             {l.get(x), l.get(op.getScale()), l.i64(l.rowsOf(x)),
              l.i64(l.colsOf(x)), l.f64(op.getEpsilon().convertToDouble()),
              l.result(op.getResult())});
    return success();
  });
  t.add<EmbeddingOp>([](EmbeddingOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<int64_t> group = vocabGroup(op, l);
    if (failed(group))
      return failure();
    ArrayRef<int64_t> table = l.typeOf(op.getTable()).getShape();
    if (*group >= 0) {
      l.call("braid_rt_program_embedding_vp_f32",
             {l.get(op.getTable()), l.get(op.getIds()), isI64(l, op.getIds()),
              l.i64(table[0]), l.i64(table[1]), l.i64(l.countOf(op.getIds())),
              l.i64(*group), l.result(op.getResult()), l.whereText()});
      return success();
    }
    checkIds(l, "id", op.getIds(), table[0]);
    l.kernelChecked(idKernel("braid_rt_embedding_f32", op.getIds()),
                    {l.get(op.getTable()), l.get(op.getIds()), l.i64(table[0]),
                     l.i64(table[1]), l.i64(l.countOf(op.getIds())),
                     l.result(op.getResult())});
    return success();
  });
  t.add<AttentionOp>([](AttentionOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> q = l.typeOf(op.getQuery()).getShape();
    ArrayRef<int64_t> k = l.typeOf(op.getKey()).getShape();
    double scale = attentionScale(op, q[3]);
    l.kernelChecked("braid_rt_attention_f32",
                    {l.get(op.getQuery()), l.get(op.getKey()),
                     l.get(op.getValue()), l.i64(q[0]), l.i64(q[1]),
                     l.i64(k[1]), l.i64(q[2]), l.i64(k[2]), l.i64(q[3]),
                     l.flag(op.getCausal()), l.f64(scale),
                     l.result(op.getResult())});
    return success();
  });
  t.add<CrossEntropyOp>([](CrossEntropyOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<int64_t> group = vocabGroup(op, l);
    if (failed(group))
      return failure();
    Value logits = op.getLogits();
    if (*group >= 0) {
      l.call("braid_rt_program_cross_entropy_vp_f32",
             {l.get(logits), l.get(op.getLabels()), isI64(l, op.getLabels()),
              l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)), l.i64(*group),
              l.result(op.getResult()), l.whereText()});
      return success();
    }
    checkIds(l, "label", op.getLabels(), l.colsOf(logits));
    l.kernelChecked(idKernel("braid_rt_cross_entropy_f32", op.getLabels()),
                    {l.get(logits), l.get(op.getLabels()),
                     l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)),
                     l.result(op.getResult())});
    return success();
  });
}

//===- LegalizeBF16.cpp - bf16 values held in f32
//--------------------------===//
//
// The kernels of both targets compute in f32. This pass keeps a bf16
// program's arithmetic on them: every bf16 tensor becomes f32, and every op
// that computed a bf16 value is followed by a braid.round to bf16, so the
// values are the bf16 program's (each op rounds to f32 first, then to bf16).
// A matmul of bf16 operands is marked braid.bf16_operands, for the lowering
// to multiply bf16 copies of them. A bf16 product that its bias add sums
// before rounding (isBF16BiasProduct: a linear layer's) is not rounded: the
// add's f32 sum is rounded to bf16, as braid-eval computes the bf16
// program. A bf16 braid.matmul_bias (a model fused before braidc) is marked
// the same way; one with `gelu` is split into matmul_bias and gelu, each
// rounded, since the unfused program and braid-eval round the sum before
// the GELU and the GEMM's epilogue cannot.
//
// Storage: a layer's stacked bf16 results that only feed stacked operands
// of other repeats (the activations and working copies a forward saves for
// the backward) stay bf16 tensors, two bytes an element: the layer packs
// each (braid.convert to bf16, exact) where it computes it, and the layers
// reading them unpack (braid.convert to f32) just before the first use.
// In a pipeline the same holds for a piece's results that only pieces on
// its stage read (the F piece's saved values for B and W, B's for W, and
// with two chunks a stage what one chunk hands the other): the driver keeps
// them per micro-batch in flight, so they are packed where computed (by the
// layer, or before the piece's return) and unpacked by the reading piece
// or its layers.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BF16BiasProduct.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/IR/BraidTraits.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::braid {
#define GEN_PASS_DEF_LEGALIZEBF16PASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

static bool isBF16Tensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getElementType().isBF16();
}

/// `t` with bf16 elements (also inside a future) replaced by f32.
static Type legalType(Type t) {
  MLIRContext *ctx = t.getContext();
  if (auto future = dyn_cast<FutureType>(t))
    return FutureType::get(
        ctx, cast<RankedTensorType>(legalType(future.getValueType())));
  if (isBF16Tensor(t)) {
    auto tensor = cast<RankedTensorType>(t);
    return RankedTensorType::get(tensor.getShape(), Float32Type::get(ctx));
  }
  return t;
}

static FunctionType legalFunctionType(FunctionType type) {
  SmallVector<Type> inputs, results;
  for (Type t : type.getInputs())
    inputs.push_back(legalType(t));
  for (Type t : type.getResults())
    results.push_back(legalType(t));
  return FunctionType::get(type.getContext(), inputs, results);
}

/// Whether `op`'s bf16 results need rounding after it computes them in f32:
/// not when it only moves bf16 values, or when its results come from a body
/// that rounds (a repeat's layer, a pipeline's pieces, a called function:
/// a pipeline driver holds only calls of its pieces).
static bool needsRounding(Operation *op) {
  return !op->hasTrait<OpTrait::braid::MovesDataOnly>() &&
         !isa<ShardOp, RepeatOp, PipelineOp, RoundOp, CallOpInterface>(op);
}

/// The layer `repeat` runs, or null.
static LayerOp getLayer(RepeatOp repeat) {
  return SymbolTable::lookupNearestSymbolFrom<LayerOp>(repeat,
                                                       repeat.getLayerAttr());
}

/// Whether `v` holds bf16 values: a bf16 tensor, or an f32 one converted
/// from bf16 (exact: the norms' inputs).
static bool holdsBF16(Value v) {
  if (isBF16Tensor(v.getType()))
    return true;
  auto convert = v.getDefiningOp<ConvertOp>();
  return convert && isBF16Tensor(convert.getInput().getType());
}

/// Whether `v`, a value of a pipeline piece, holds bf16 values: as
/// holdsBF16, or a repeat's result whose layer yields such a value.
static bool pieceHoldsBF16(Value v) {
  if (holdsBF16(v))
    return true;
  auto repeat = v.getDefiningOp<RepeatOp>();
  LayerOp layer = repeat ? getLayer(repeat) : LayerOp();
  return layer && holdsBF16(layer.getBody().front().getTerminator()->getOperand(
                      cast<OpResult>(v).getResultNumber()));
}

/// The pipeline pieces' results and arguments kept in bf16 storage: in a
/// scheduled driver (braid.schedule), a piece call's result that holds bf16
/// values and that only calls of other pieces on the same stage read (of
/// its chunk, or of another chunk of the stage: interleaved and V
/// placements), never a send, a mean or the driver's return; each piece
/// called once. The stages are braid.chunk_stages on the forward function
/// (@f of a driver @f_grad, as PipelineDriver reads them); without it, the
/// same chunk only. Called while the types still say bf16.
struct PieceStorage {
  DenseMap<Operation *, llvm::SmallDenseSet<unsigned>> results, args;
  SmallVector<Value> calls; // the driver's call results kept
};

static PieceStorage findPieceStorage(ModuleOp module) {
  PieceStorage storage;
  auto chunkOf = [](Operation *op) -> std::optional<int64_t> {
    if (auto chunk = op->getAttrOfType<IntegerAttr>("braid.chunk"))
      return chunk.getInt();
    return std::nullopt;
  };
  // The piece `call` runs when nothing but it refers to it.
  auto pieceOf = [&](func::CallOp call) -> func::FuncOp {
    auto piece = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (!piece || piece.isExternal() || !chunkOf(piece))
      return {};
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(piece, module);
    if (!uses || std::distance(uses->begin(), uses->end()) != 1)
      return {};
    return piece;
  };
  for (auto driver : module.getOps<func::FuncOp>()) {
    if (!driver->hasAttr("braid.schedule") || driver.isExternal())
      continue;
    StringRef name = driver.getName();
    auto forward = name.ends_with("_grad")
                       ? module.lookupSymbol<func::FuncOp>(
                             name.drop_back(StringRef("_grad").size()))
                       : func::FuncOp();
    auto stages =
        forward
            ? forward->getAttrOfType<DenseI64ArrayAttr>("braid.chunk_stages")
            : nullptr;
    // Whether pieces `a` and `b` run on the same stage.
    auto sameStage = [&](func::FuncOp a, func::FuncOp b) {
      int64_t ca = *chunkOf(a), cb = *chunkOf(b);
      if (ca == cb)
        return true;
      int64_t n = stages ? stages.size() : 0;
      return ca >= 0 && ca < n && cb >= 0 && cb < n && stages[ca] == stages[cb];
    };
    for (auto call : driver.getBody().front().getOps<func::CallOp>()) {
      func::FuncOp piece = pieceOf(call);
      if (!piece)
        continue;
      Operation *ret = piece.getBody().front().getTerminator();
      for (auto [j, r] : llvm::enumerate(call.getResults())) {
        if (r.use_empty() || !isa<RankedTensorType>(r.getType()) ||
            !pieceHoldsBF16(ret->getOperand(j)))
          continue;
        bool kept = llvm::all_of(r.getUses(), [&](OpOperand &use) {
          auto user = dyn_cast<func::CallOp>(use.getOwner());
          func::FuncOp reader = user ? pieceOf(user) : func::FuncOp();
          return reader && reader != piece && sameStage(reader, piece);
        });
        if (!kept)
          continue;
        storage.results[piece].insert(j);
        storage.calls.push_back(r);
        for (OpOperand &use : r.getUses())
          storage.args[pieceOf(cast<func::CallOp>(use.getOwner()))].insert(
              use.getOperandNumber());
      }
    }
  }
  return storage;
}

/// The stacked results and arguments of layers kept in bf16 storage: a
/// result (layer, j) that holds bf16 values when every repeat of the layer
/// stacks it and each of its uses is an argument kept in bf16; an argument
/// (layer, k) when every repeat of the layer stacks it and it is always
/// such a result. A kept piece result (findPieceStorage) counts as an
/// argument kept in bf16, a kept piece argument as such a result, so a
/// piece returns its layers' packed values and hands its arguments to its
/// layers packed. Called while the types still say bf16.
struct BF16Storage {
  DenseMap<Operation *, llvm::SmallDenseSet<unsigned>> results, args;
};

static BF16Storage findBF16Storage(ModuleOp module,
                                   const PieceStorage &pieces) {
  BF16Storage storage;
  DenseMap<Operation *, SmallVector<RepeatOp>> repeatsOf;
  module.walk([&](RepeatOp repeat) {
    if (LayerOp layer = getLayer(repeat))
      repeatsOf[layer].push_back(repeat);
  });
  for (auto &[layerOp, repeats] : repeatsOf) {
    auto layer = cast<LayerOp>(layerOp);
    // Only layers that nothing but these repeats refers to.
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(layer, module);
    if (!uses || llvm::any_of(*uses, [](const SymbolTable::SymbolUse &use) {
          return !isa<RepeatOp>(use.getUser());
        }))
      continue;
    unsigned carried = 0;
    for (RepeatOp repeat : repeats)
      carried = std::max(carried, repeat.getNumCarried());
    Block &body = layer.getBody().front();
    for (auto [j, value] : llvm::enumerate(body.getTerminator()->getOperands()))
      if (j >= carried && holdsBF16(value))
        storage.results[layer].insert(j);
    for (BlockArgument arg : body.getArguments())
      if (arg.getArgNumber() >= carried && isa<RankedTensorType>(arg.getType()))
        storage.args[layer].insert(arg.getArgNumber());
  }
  auto keptArg = [&](OpOperand &use) {
    if (isa<func::ReturnOp>(use.getOwner()))
      return pieces.results
          .lookup(use.getOwner()->getParentOfType<func::FuncOp>())
          .contains(use.getOperandNumber());
    auto repeat = dyn_cast<RepeatOp>(use.getOwner());
    return repeat && storage.args.lookup(getLayer(repeat))
                         .contains(use.getOperandNumber());
  };
  auto keptResult = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return isa<func::FuncOp>(arg.getOwner()->getParentOp()) &&
             pieces.args.lookup(arg.getOwner()->getParentOp())
                 .contains(arg.getArgNumber());
    auto repeat = v.getDefiningOp<RepeatOp>();
    return repeat && storage.results.lookup(getLayer(repeat))
                         .contains(cast<OpResult>(v).getResultNumber());
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[layer, js] : storage.results)
      for (unsigned j : SmallVector<unsigned>(js.begin(), js.end()))
        for (RepeatOp repeat : repeatsOf[layer])
          if (!llvm::all_of(repeat.getResult(j).getUses(), keptArg)) {
            js.erase(j);
            changed = true;
            break;
          }
    for (auto &[layer, ks] : storage.args)
      for (unsigned k : SmallVector<unsigned>(ks.begin(), ks.end()))
        for (RepeatOp repeat : repeatsOf[layer])
          if (!keptResult(repeat.getOperand(k))) {
            ks.erase(k);
            changed = true;
            break;
          }
  }
  return storage;
}

/// `t`, a ranked tensor type, with bf16 elements.
static Type bf16TypeOf(Type t) {
  return RankedTensorType::get(cast<RankedTensorType>(t).getShape(),
                               BFloat16Type::get(t.getContext()));
}

/// `type` with its input or result `i` made bf16.
static FunctionType withBF16(FunctionType type, bool result, unsigned i) {
  SmallVector<Type> inputs(type.getInputs()), results(type.getResults());
  Type &t = result ? results[i] : inputs[i];
  t = bf16TypeOf(t);
  return FunctionType::get(type.getContext(), inputs, results);
}

/// Makes `arg` of `body` bf16 and unpacks it (to its former type) before
/// the first of the uses `unpacked` accepts, which then read the unpacked
/// value.
static void unpackArgument(Block &body, BlockArgument arg,
                           function_ref<bool(OpOperand &)> unpacked) {
  Type f32Type = arg.getType();
  arg.setType(bf16TypeOf(f32Type));
  Operation *first = nullptr;
  for (OpOperand &use : arg.getUses()) {
    if (!unpacked(use))
      continue;
    Operation *op = body.findAncestorOpInBlock(*use.getOwner());
    if (!first || op->isBeforeInBlock(first))
      first = op;
  }
  if (!first)
    return;
  OpBuilder b(first);
  auto unpack = ConvertOp::create(b, first->getLoc(), f32Type, arg);
  arg.replaceUsesWithIf(unpack.getResult(), [&](OpOperand &use) {
    return use.getOwner() != unpack && unpacked(use);
  });
}

/// A pack of `v` (braid.convert to bf16) right after the op computing it
/// (at the body's start for an argument), for a yield or return to hand
/// on. Packed there, the f32 value dies at its last use in the body, not
/// at the terminator: the lowering writes the pack straight into the
/// caller's buffer, so a saved value is held in the body's arena only
/// while the body reads it (a working copy: until its matmul).
static Value packWhereComputed(Value v) {
  OpBuilder b(v.getContext());
  b.setInsertionPointAfterValue(v);
  return ConvertOp::create(b, v.getLoc(), bf16TypeOf(v.getType()), v);
}

/// Keeps the storage found by findBF16Storage in bf16, once the rest of the
/// module holds f32: packs where the yielded values are computed, unpacks
/// before the first use.
static void applyBF16Storage(ModuleOp module, const BF16Storage &storage) {
  auto retype = [&](LayerOp layer, bool result, unsigned i) {
    layer.setFunctionTypeAttr(
        TypeAttr::get(withBF16(layer.getFunctionType(), result, i)));
  };
  for (auto &[layerOp, js] : storage.results) {
    auto layer = cast<LayerOp>(layerOp);
    Operation *yield = layer.getBody().front().getTerminator();
    SmallVector<unsigned> sorted(js.begin(), js.end());
    llvm::sort(sorted); // packs in result order
    for (unsigned j : sorted) {
      Value v = yield->getOperand(j);
      yield->setOperand(j, packWhereComputed(v));
      retype(layer, /*result=*/true, j);
    }
  }
  module.walk([&](RepeatOp repeat) {
    for (unsigned j : storage.results.lookup(getLayer(repeat))) {
      Value r = repeat.getResult(j);
      r.setType(bf16TypeOf(r.getType()));
    }
  });
  for (auto &[layerOp, ks] : storage.args) {
    auto layer = cast<LayerOp>(layerOp);
    Block &body = layer.getBody().front();
    SmallVector<unsigned> sorted(ks.begin(), ks.end());
    llvm::sort(sorted);
    for (unsigned k : sorted) {
      retype(layer, /*result=*/false, k);
      unpackArgument(body, body.getArgument(k),
                     [](OpOperand &) { return true; });
    }
  }
}

/// Keeps the storage found by findPieceStorage in bf16, once the rest of
/// the module holds f32 and applyBF16Storage has run: packs where computed
/// what the pieces' layers did not pack, unpacks before the
/// first use in the reading pieces what their layers do not read packed.
static void applyPieceStorage(const PieceStorage &storage,
                              const BF16Storage &layers) {
  auto retype = [&](func::FuncOp fn, bool result, unsigned i) {
    fn.setType(withBF16(fn.getFunctionType(), result, i));
  };
  // Whether `v` is an argument of `fn` kept in bf16.
  auto isKeptArg = [&](func::FuncOp fn, Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &fn.getBody().front() &&
           storage.args.lookup(fn).contains(arg.getArgNumber());
  };
  for (auto &[fnOp, js] : storage.results) {
    auto fn = cast<func::FuncOp>(fnOp);
    Operation *ret = fn.getBody().front().getTerminator();
    SmallVector<unsigned> sorted(js.begin(), js.end());
    llvm::sort(sorted); // packs in result order
    for (unsigned j : sorted) {
      Value v = ret->getOperand(j);
      retype(fn, /*result=*/true, j);
      if (isBF16Tensor(v.getType()))
        continue; // a layer's result packed by the layer
      if (isKeptArg(fn, v))
        continue; // an argument passed on as it came, packed
      ret->setOperand(j, packWhereComputed(v));
    }
  }
  for (Value r : storage.calls)
    r.setType(bf16TypeOf(r.getType()));
  for (auto &[fnOp, ks] : storage.args) {
    auto fn = cast<func::FuncOp>(fnOp);
    Block &body = fn.getBody().front();
    SmallVector<unsigned> sorted(ks.begin(), ks.end());
    llvm::sort(sorted);
    for (unsigned k : sorted) {
      retype(fn, /*result=*/false, k);
      // Layers keeping it packed, and the return where it is a result kept
      // in bf16, read it as it is; the rest unpacked.
      unpackArgument(body, body.getArgument(k), [&](OpOperand &use) {
        if (isa<func::ReturnOp>(use.getOwner()))
          return !storage.results.lookup(fn).contains(use.getOperandNumber());
        auto repeat = dyn_cast<RepeatOp>(use.getOwner());
        return !repeat || !layers.args.lookup(getLayer(repeat))
                               .contains(use.getOperandNumber());
      });
    }
  }
}

struct LegalizeBF16Pass
    : public braid::impl::LegalizeBF16PassBase<LegalizeBF16Pass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    Type bf16 = BFloat16Type::get(ctx), f32 = Float32Type::get(ctx);
    PieceStorage pieceStorage = findPieceStorage(module);
    BF16Storage storage = findBF16Storage(module, pieceStorage);

    // Matmuls of two bf16 operands keep that fact for the lowering, which
    // then calls a GEMM on bf16 copies (exact: the operands hold bf16
    // values) with f32 sums. Those summed with their bias before rounding
    // are left unrounded, asked while the types still say bf16.
    llvm::DenseSet<Operation *> biasProducts;
    module.walk([&](MatmulOp op) {
      if (isBF16Tensor(op.getLhs().getType()) &&
          isBF16Tensor(op.getRhs().getType()))
        op->setAttr("braid.bf16_operands", UnitAttr::get(ctx));
      if (isBF16BiasProduct(op))
        biasProducts.insert(op);
    });
    // A fused linear layer (a model fused before braidc) likewise: its
    // product is held in f32 until the bias add, whose f32 sum is rounded.
    // A `gelu` one is split (matmul_bias, then gelu, each rounded below):
    // the unfused program and braid-eval round the sum to bf16 before the
    // GELU, which the GEMM's epilogue cannot.
    SmallVector<MatmulBiasOp> fused;
    module.walk([&](MatmulBiasOp op) { fused.push_back(op); });
    for (MatmulBiasOp op : fused) {
      if (isBF16Tensor(op.getLhs().getType()) &&
          isBF16Tensor(op.getRhs().getType()))
        op->setAttr("braid.bf16_operands", UnitAttr::get(ctx));
      if (!op.getGelu() || !isBF16Tensor(op.getType()))
        continue;
      OpBuilder b(ctx);
      b.setInsertionPointAfter(op);
      auto gelu = GeluOp::create(b, op.getLoc(), op.getType(), op.getGeluAttr(),
                                 op.getResult());
      op.getResult().replaceAllUsesExcept(gelu.getResult(), gelu);
      op.removeGeluAttr();
    }

    // Conversions first, while the types still say what they convert.
    SmallVector<ConvertOp> converts;
    module.walk([&](ConvertOp op) { converts.push_back(op); });
    for (ConvertOp op : converts) {
      Type from = getElementTypeOrSelf(op.getInput().getType());
      Type to = getElementTypeOrSelf(op.getType());
      if (from == to || (from.isBF16() && to.isF32())) {
        // bf16 to f32 is exact: the f32 tensor already holds the value.
        op.getResult().replaceAllUsesWith(op.getInput());
        op.erase();
      } else if (from.isF32() && to.isBF16()) {
        OpBuilder b(op);
        Value r =
            RoundOp::create(b, op.getLoc(), op.getInput(), TypeAttr::get(bf16));
        op.getResult().replaceAllUsesWith(r);
        op.erase();
      }
      // Other pairs (f64, f16) stay, for the lowering to refuse.
    }

    // Signatures and block arguments: the values come in rounded.
    module.walk([&](Operation *op) {
      if (auto fn = dyn_cast<func::FuncOp>(op))
        fn.setType(legalFunctionType(fn.getFunctionType()));
      else if (auto layer = dyn_cast<LayerOp>(op))
        layer.setFunctionTypeAttr(
            TypeAttr::get(legalFunctionType(layer.getFunctionType())));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(legalType(arg.getType()));
    });

    // Results: f32 type, then rounded where computed.
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense || !isBF16Tensor(dense.getType()))
          continue;
        auto type = cast<RankedTensorType>(legalType(dense.getType()));
        constant.setValueAttr(dense.mapValues(f32, [](const APFloat &v) {
          APFloat w = v;
          bool lost;
          w.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
          return w.bitcastToAPInt();
        }));
        constant.getResult().setType(type);
        continue;
      }
      for (Value r : op->getResults()) {
        Type type = r.getType();
        Type legal = legalType(type);
        if (legal == type)
          continue;
        r.setType(legal);
        if (!isBF16Tensor(type) || !needsRounding(op) ||
            biasProducts.contains(op))
          continue;
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        auto round = RoundOp::create(b, op->getLoc(), r, TypeAttr::get(bf16));
        r.replaceAllUsesExcept(round.getResult(), round);
      }
    }
    applyBF16Storage(module, storage);
    applyPieceStorage(pieceStorage, storage);
  }
};

} // namespace

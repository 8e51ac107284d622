//===- ModelCost.h - What one layer of a model costs ------------*- C++ -*-===//
//
// The planner's view of a model, extracted once from braid IR so that
// evaluating a plan never walks IR: for each segment (the ops before the
// first repeated layer, one instance of each repeated layer, the ops after
// the last), the FLOPs and bytes of its forward (F), input-gradient (B) and
// weight-gradient (W) passes by op class, its parameters, the activation
// bytes F keeps for the backward, and the tensor-parallel collectives it
// needs, for each recomputation mode.
//
// The numbers come from the IR braid-autodiff derives (the same F/B/W split
// and recomputation the compiled program runs; CostOpInterface counts each
// op), on the batch the model was written for: costs are linear in the
// batch, so a plan's micro-batch of b samples scales them by b / batch.
//
// How tensor parallelism divides a segment is read from its structure, not
// from names (Megatron's pattern, Shoeybi et al. 2019): a value with the
// shape of the segment's carried activation (batch x seq x hidden) is
// replicated over the tp group (divided with sequence parallelism); every
// other value (attention heads, MLP intermediates, vocabulary logits) and
// every matrix product is divided. Parameters used by a matrix product or
// as an embedding table (vocabulary parallel), and those added to divided
// values (biases of column-parallel products), are divided; the rest (norm
// scales, biases of row-parallel products) are replicated. A matmul
// from a replicated input to a divided result (column parallel) needs one
// all_reduce of its input gradient in B per distinct input; one from a
// divided input to a replicated result (row parallel) needs one all_reduce
// of its result in F.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PLANNER_MODELCOST_H
#define BRAID_PLANNER_MODELCOST_H

#include "braid/Planner/Hardware.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::braid::plan {

/// Activation recomputation (braid-autodiff's `recompute` option).
enum class Recompute { None, Selective, Full };
constexpr int kNumRecomputeModes = 3;
llvm::StringRef getRecomputeName(Recompute r);
std::optional<Recompute> parseRecompute(llvm::StringRef name);

/// The three passes of a layer's training step.
enum class PassKind { Forward, Backward, Weight };
constexpr int kNumPassKinds = 3;
llvm::StringRef getPassKindName(PassKind p);

/// FLOPs and bytes moved.
struct Work {
  double flops = 0;
  double bytes = 0;
  Work &operator+=(const Work &o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

/// One pass of one segment instance, by op class and by how tensor
/// parallelism divides it.
struct PassWork {
  /// Divided over the tp group.
  Work split[kNumOpClasses];
  /// Repeated on every rank of the tp group; divided with sequence
  /// parallelism.
  Work replicated[kNumOpClasses];
  /// Kernels the pass runs (ops the cost interface counts; parameter reads,
  /// constants and reshapes are free), on every rank of a tp group, each
  /// paying Hardware::kernelOverhead whatever its size.
  double kernels = 0;

  double getFlops() const;
  double getFlops(OpClass c) const {
    return split[(int)c].flops + replicated[(int)c].flops;
  }
  /// The work one rank of a tp group of `tp` does (sequence parallel or
  /// not), for the segment's batch.
  Work getRankWork(OpClass c, int tp, bool sequenceParallel) const;
};

/// The bytes a layer function holds at one op of its body, as braidc's
/// lowering plans its buffers (at the model's batch): divided over tp or
/// replicated, and growing with the micro-batch (activations) or not
/// (weight gradients).
struct ArenaPoint {
  double splitScaled = 0, splitFixed = 0;
  double replicatedScaled = 0, replicatedFixed = 0;
};

struct SegmentCost {
  /// "h (@block)" for a repeated layer, "(before layers)", "(after layers)".
  std::string name;
  /// Instances (a repeat's count; 1 outside layers).
  int64_t count = 1;
  /// passes[recompute][pass], per instance. With recomputation, B includes
  /// the re-run forward ops.
  PassWork passes[kNumRecomputeModes][kNumPassKinds];
  /// Bytes F keeps for the backward, per instance: divided over tp, and
  /// replicated (divided with sequence parallelism).
  double savedSplitBytes[kNumRecomputeModes] = {0, 0, 0};
  double savedReplicatedBytes[kNumRecomputeModes] = {0, 0, 0};
  /// Values a repeated layer's F keeps for the backward, per instance: a
  /// compiled repeat stacks each over the instances (a copy in F, another
  /// in B; Hardware::savedActivationCopies). 0 outside layers.
  double savedTensors[kNumRecomputeModes] = {0, 0, 0};
  /// Bytes an instance holds from its B until its W, where B and W are
  /// separate (braid-autodiff's B and W layers): F's saved values W reads
  /// and B's results W reads (the output gradients of the weight products,
  /// the inputs B re-materialised), divided over tp and replicated as
  /// the saved bytes. 0 where no W layer reads them.
  double heldSplitBytes[kNumRecomputeModes] = {0, 0, 0};
  double heldReplicatedBytes[kNumRecomputeModes] = {0, 0, 0};
  /// Parameters per instance (elements): divided over tp, replicated.
  double splitParams = 0;
  double replicatedParams = 0;
  /// Parameter tensors per instance: ZeRO-3 gathers each before its use,
  /// one collective each.
  double paramTensors = 0;
  /// Of those, the ones divided over tp: the gradient norm sums each one's
  /// squares over the tp group (a one-element all_reduce per tensor, once
  /// per step; a repeat's instances are one stacked tensor).
  double splitParamTensors = 0;
  /// Parameter tensors B reads per instance (a product's weight for its
  /// input gradient, a norm's scale; not a bias), and their elements: ZeRO-3
  /// gathers these again before B, one collective each.
  double backwardParamTensors[kNumRecomputeModes] = {0, 0, 0};
  double backwardParams[kNumRecomputeModes] = {0, 0, 0};
  /// Of a layer's parameter tensors F reads per instance, those the first
  /// op reading any reads (a norm's scale and bias), and their elements;
  /// likewise of those B reads. braidc's ZeRO-3 gathers these alone, for
  /// braid-zero3-prefetch to start them in the instance before, and the
  /// rest of the instance's in buckets (braid-bucket-gathers leave-first).
  /// 0 outside layers.
  double forwardLeadParamTensors = 0;
  double forwardLeadParams = 0;
  double backwardLeadParamTensors[kNumRecomputeModes] = {0, 0, 0};
  double backwardLeadParams[kNumRecomputeModes] = {0, 0, 0};
  /// Of a layer's parameter tensors F reads per instance, those an op
  /// computing in bf16 under bf16-mixed reads (a product's weight and
  /// bias: braid-mixed-precision gathers their bf16 working copies), and
  /// their elements; likewise of those B reads. braid-bucket-gathers fills
  /// a bucket per element type. 0 outside layers.
  /// Of the first op's (forwardLeadParamTensors), the working copies:
  /// braid-bucket-gathers leaves only the others alone.
  double forwardLeadWorkingCopyTensors = 0;
  double forwardLeadWorkingCopyParams = 0;
  double backwardLeadWorkingCopyTensors[kNumRecomputeModes] = {0, 0, 0};
  double backwardLeadWorkingCopyParams[kNumRecomputeModes] = {0, 0, 0};
  double forwardWorkingCopyTensors = 0;
  double forwardWorkingCopyParams = 0;
  double backwardWorkingCopyTensors[kNumRecomputeModes] = {0, 0, 0};
  double backwardWorkingCopyParams[kNumRecomputeModes] = {0, 0, 0};
  /// Vocabulary-parallel cross-entropies per instance: braidc's program
  /// all_gathers 5 per-row statistics of each over tp per micro-batch, one
  /// element a row; tpRowGatherBytes: one device's rows' bytes of one
  /// (at the model's batch).
  double tpRowGathers = 0;
  double tpRowGatherBytes = 0;
  /// Embedding lookups in a parameter table per instance, and their
  /// results' bytes: with ZeRO-3 each device looks up the dp group's ids in
  /// its block of the table and a reduce_scatter sums them.
  double paramLookups = 0;
  double paramLookupBytes = 0;
  /// Bytes per parameter element.
  double paramElementBytes = 4;
  /// Tensor-parallel collectives per instance and pass: tpAllReduces[r][p]
  /// all_reduces of `tpCollectiveBytes` each (with sequence parallelism,
  /// each becomes a reduce_scatter plus an all_gather of the same size).
  int tpAllReduces[kNumRecomputeModes][kNumPassKinds] = {};
  double tpCollectiveBytes = 0;
  /// Column-parallel products per instance. With sequence parallelism W
  /// gathers each one's sequence-divided input again for its weight
  /// gradient: one all_gather each (B reduce-scatters once per B
  /// all_reduce, the input gradients of products sharing an input summed
  /// first).
  int tpColumnProducts = 0;
  /// Replicated parameter tensors per instance (and their elements) that a
  /// forward op applies along the carried activation's sequence without a
  /// sequence dimension of their own (a norm's scale and bias, a
  /// row-parallel product's bias): with sequence parallelism each rank's
  /// gradient sums only its block of the sequence, and W sums them over tp
  /// (braidc: one all_reduce per layer instance, one per tensor of the ops
  /// around the layers).
  double sequencePartialParamTensors = 0;
  double sequencePartialParams = 0;
  /// Replicated parameter tensors per instance that have the sequence
  /// dimension (a position embedding added to the activation): with
  /// sequence parallelism each rank's gradient is its block of the
  /// sequence, so the gradient norm sums its squares over tp, like a
  /// divided tensor's (splitParamTensors).
  double sequenceSplitParamTensors = 0;
  /// Bytes of the activation the segment hands to the next one (what a
  /// pipeline stage boundary after it sends forward, and its gradient back).
  double outputBytes = 0;

  double getParams() const { return splitParams + replicatedParams; }
  /// Whether its forward runs anything (a kernel, FLOPs or bytes): a
  /// pipeline stage may then hold it with no layer (the embedding, the
  /// head).
  bool hasWork() const;
  /// Parameters one rank of a tp group holds.
  double getRankParams(int tp) const {
    return splitParams / tp + replicatedParams;
  }
  double getSavedBytes(Recompute r, int tp, bool sequenceParallel) const;
  double getHeldBytes(Recompute r, int tp, bool sequenceParallel) const;
  /// What one instance's function of pass `p` holds at its peak for a
  /// micro-batch of `scale` times the model's batch: the largest of its
  /// arena points (getArenaBytes below), 0 outside layers.
  double getArenaBytes(Recompute r, PassKind p, double scale, int tp,
                       bool sequenceParallel) const;
  /// A layer function's buffers at each op of its body (braid-autodiff's
  /// F, B and W layers; docs/planner.md, "Memory per rank"): each result
  /// a buffer from its op to its last use (the yielded ones to the end),
  /// except what braidc's lowering gives no buffer of its own (parameter
  /// slots, reshapes and sharding annotations, elementwise values read
  /// only by elementwise ops, which braid-fuse-elementwise keeps in
  /// registers) or places over an operand dying there
  /// (InPlaceOpInterface).
  std::vector<ArenaPoint> arena[kNumRecomputeModes][kNumPassKinds];
  /// What that function yields (its results, which a pipeline piece
  /// calling the repeat holds in its own arena), in the same classes.
  ArenaPoint yielded[kNumRecomputeModes][kNumPassKinds];
  double getYieldedBytes(Recompute r, PassKind p, double scale, int tp,
                         bool sequenceParallel) const;
};

/// A parameter table of the ops around the layers that every forward use
/// reads along its vocabulary dimension: embedding lookups (its rows) and
/// vocabulary-parallel heads (a product of an activation with the table
/// whose result, logits over the vocabulary, a cross-entropy reads): a
/// GPT's wte, tied or not, Llama's embedding table and lm_head (hidden x
/// vocabulary). Where ZeRO-3 divides it along that dimension (the first
/// one dp divides that tp does not, as braid-shard picks it: not Llama's
/// lm_head), braidc's program looks up rows in the table as stored: each
/// lookup gathers the dp group's ids and reduce-scatters the group's rows;
/// a head gathers the table as any parameter (PlanCostModel).
struct VocabTable {
  llvm::SmallVector<int64_t, 2> shape;
  /// The dimension that indexes the vocabulary.
  int vocabDim = 0;
  double getElements() const;
  /// Embedding lookups in it, and their ids' bytes in all.
  double lookups = 0;
  double lookupIdBytes = 0;
  /// Heads over it.
  double heads = 0;
};

struct ModelCost {
  /// The function the costs are for, and the samples of one call of it
  /// (dimension 0 of its first argument): costs are for this batch.
  std::string entry;
  int64_t batch = 1;
  /// Element type of the activations ("f32", "bf16", ...), for peak FLOP/s.
  std::string dtype;
  double elementBytes = 4;
  SegmentCost pre;
  /// One entry per braid.repeat of the entry function, in program order.
  std::vector<SegmentCost> layers;
  SegmentCost post;
  /// Elements of the parameters read both before and after the layers (a
  /// GPT's wte, tied with the head). Their gradient sums the first and the
  /// last stage's partial gradients, and the compiled pipeline runs the
  /// first stage's weight-gradient piece, all of it, after the schedule,
  /// once the last stage's partials have arrived (docs/codegen.md,
  /// "Tied parameters"); PlanCostModel::evaluate costs it there.
  double tiedParams = 0;
  /// The tensors of those.
  double tiedParamTensors = 0;
  /// The tables of the ops around the layers read only along their
  /// vocabulary (VocabTable), each counted in pre's or post's parameters.
  std::vector<VocabTable> vocabTables;

  /// Layer instances over all repeats.
  int64_t getNumLayers() const;
  /// The repeat entry of layer instance `i` (0 .. getNumLayers() - 1).
  const SegmentCost &getLayer(int64_t i) const;
  /// All parameters (elements).
  double getParams() const;
  /// F + B + W FLOPs of one training step of one batch, without
  /// recomputation (the model FLOPs of MFU).
  double getModelFlops() const;
};

/// How sequence parallelism (the carried activation `carried` divided along
/// its dimension 1, as braid-shard's splitSequence divides it) leaves the
/// gradient of a parameter that tensor parallelism keeps whole, from its
/// forward users: None if none reads a value of the carried activation's
/// shape; Divided if the parameter is broadcast elementwise against it
/// (add, sub, mul, div: NumPy rules, from the right) with a dimension that
/// meets the sequence (a position embedding added to the activation: each
/// rank's gradient is its block of the rows); Partial if it is applied
/// along the sequence otherwise (a norm's scale and bias, a row-parallel
/// product's bias, a product's weight: each rank's gradient sums only its
/// block). Structural: a dimension of the sequence's size alone (hidden ==
/// sequence) is not the sequence.
enum class SequenceGrad { None, Partial, Divided };
SequenceGrad getSequenceGrad(Operation *param, Type carried);

/// Extracts the costs of `entry` in `module` (which is not modified: the
/// gradients are derived on a copy, once per recomputation mode). Fails,
/// with the pass's diagnostics in the message, if the function cannot be
/// differentiated.
llvm::Expected<ModelCost> extractModelCost(ModuleOp module,
                                           llvm::StringRef entry = "forward");

/// One row per segment: instances, parameters, F/B/W FLOPs (matmul and all)
/// and saved activation bytes for `recompute`.
void printModelCost(llvm::raw_ostream &os, const ModelCost &model,
                    Recompute recompute = Recompute::None);

} // namespace mlir::braid::plan

#endif // BRAID_PLANNER_MODELCOST_H

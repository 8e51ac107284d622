//===- Evaluator.h - Reference evaluation of braid IR -----------*- C++ -*-===//
//
// Runs a function of a braid module on concrete tensors using each op's
// EvalOpInterface. Parameters come from a weights file or from their
// initializers under a seed; inputs from a file or from the seed. This is
// the numerical oracle every parallelising pass is checked against.
//
// The module's context must have the ops' evaluation models: add
// registerEvalInterfaceExternalModels (EvalOpInterface.h) to its registry.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EVAL_EVALUATOR_H
#define BRAID_EVAL_EVALUATOR_H

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Eval/EvalOpInterface.h"
#include "braid/Support/SafeTensors.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"

#include <condition_variable>
#include <mutex>

namespace mlir::braid {

/// Where the simulated devices of a multi-device run meet for collectives:
/// a reusable barrier with one slot per device.
class ExchangeHub {
public:
  explicit ExchangeHub(int64_t numDevices)
      : numDevices(numDevices), slots(numDevices, nullptr) {}

  /// Publishes `mine` as device `rank`'s, waits for every device, calls
  /// `read` with all devices' tensors (indexed by rank), and waits again, so
  /// that no slot is reused before everyone has read. Returns false if the
  /// run was aborted.
  bool exchange(int64_t rank, const Tensor &mine,
                llvm::function_ref<void(ArrayRef<const Tensor *>)> read);
  /// Makes every current and future exchange fail (a device has failed, so
  /// the others must not wait for it).
  void abort();

private:
  bool barrier();

  int64_t numDevices;
  std::vector<const Tensor *> slots;
  std::mutex mutex;
  std::condition_variable wake;
  int64_t arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
};

/// This evaluator's device in a multi-device run.
struct DevicePlacement {
  MeshOp mesh;
  int64_t rank = 0;
  /// The device's coordinate along each mesh axis.
  SmallVector<int64_t> coords;
  ExchangeHub *hub = nullptr;
};

/// The coordinates of device `rank` of `mesh` (row-major over the axes).
SmallVector<int64_t> getDeviceCoords(MeshOp mesh, int64_t rank);

/// The shape of the whole tensor whose device-local block has `local`
/// shape under `sharding`.
SmallVector<int64_t> getGlobalShape(ArrayRef<int64_t> local,
                                    ShardingAttr sharding, MeshOp mesh);

/// The block of `global` the device at `coords` holds under `sharding`.
Tensor extractShard(const Tensor &global, ShardingAttr sharding, MeshOp mesh,
                    ArrayRef<int64_t> coords);

/// The whole tensor from every device's block (`blocks[rank]`): blocks are
/// placed by their devices' coordinates and partial sums added. Fails,
/// with a message in `error`, if devices that must hold the same block
/// (replicas) disagree.
FailureOr<Tensor> assembleShards(ArrayRef<Tensor> blocks,
                                 ShardingAttr sharding, MeshOp mesh,
                                 std::string &error);

/// Adds `values`, micro-batch `index` of `count`, to the running `sums`;
/// after the last, turns the sums into means. Rounds to each tensor's dtype
/// after every step, as the accumulation loop of braid-train-step does, so
/// that a pipeline's means equal accumulation's bit for bit.
void accumulateMean(SmallVectorImpl<Tensor> &sums, ArrayRef<Tensor> values,
                    int64_t index, int64_t count);

struct EvalOptions {
  /// Seed of parameter initialisation and of generated inputs.
  uint64_t seed = 0;
  /// Evaluate every floating-point value in f64 (no rounding to the
  /// declared element types).
  bool f64 = false;
  /// Run braid.pipeline ops on simulated pipeline ranks in the order of
  /// their callee's braid.schedule rather than micro-batch by micro-batch.
  bool pipelineSchedule = false;
};

class Evaluator : public EvalContext {
public:
  Evaluator(ModuleOp module, EvalOptions options)
      : module(module), options(options) {}

  /// Uses `weights` instead of initializers. Every parameter the evaluation
  /// touches must be present with its declared shape.
  void setWeights(TensorMap weights) { this->weights = std::move(weights); }
  /// Likewise for optimizer state (braid.param with `state`).
  void setOptimizerState(TensorMap state) {
    optimizerState = std::move(state);
  }

  /// The name of argument `index` of `fn`: its `braid.name`, or "argN".
  static std::string getArgumentName(FunctionOpInterface fn, unsigned index);

  /// Values for the arguments of `fn`: taken from `given` by name when
  /// present (shape and kind are checked), otherwise generated from the
  /// seed. Fails on names in `given` that `fn` does not take.
  FailureOr<SmallVector<Tensor>> makeInputs(FunctionOpInterface fn,
                                            const TensorMap &given);

  /// Evaluates `fn` on `inputs`.
  FailureOr<SmallVector<Tensor>> run(FunctionOpInterface fn,
                                     ArrayRef<Tensor> inputs);
  /// Evaluates `fn` on `inputs` from inside another evaluation (the layer
  /// instance being evaluated stays current).
  FailureOr<SmallVector<Tensor>> call(FunctionOpInterface fn,
                                      ArrayRef<Tensor> inputs);

  /// Fails, naming them, if the weights (or optimizer state) given contain
  /// tensors no braid.param used; call after run.
  LogicalResult checkAllWeightsUsed(FunctionOpInterface fn);

  /// Makes this evaluator one device of a multi-device run.
  void setPlacement(DevicePlacement placement) {
    this->placement = std::move(placement);
  }

  /// Every trainable parameter materialised so far, by full name, in
  /// first-use order.
  TensorMap getParameters() const;
  /// Every optimizer-state tensor (braid.param with `state`) so far.
  TensorMap getOptimizerState() const;
  /// How the tensor `name` is distributed (`block_of` of its declaration);
  /// null for a whole tensor.
  ShardingAttr getBlockOf(StringRef name) const {
    ParamOp decl = declarations.lookup(name);
    return decl ? decl.getBlockOfAttr() : ShardingAttr();
  }

  // EvalContext.
  FailureOr<Tensor> getParameter(ParamOp op) override;
  LogicalResult storeParameter(StoreParamOp op, const Tensor &value) override;
  LogicalResult exchange(Operation *op, MeshOp mesh, ArrayRef<StringRef> axes,
                         const Tensor &mine, SmallVectorImpl<Tensor> &group,
                         unsigned &position) override;
  LogicalResult callLayer(LayerOp layer, StringRef prefix, StringRef nextPrefix,
                          ArrayRef<const Tensor *> args,
                          SmallVectorImpl<Tensor> &results) override;
  LogicalResult runPipeline(PipelineOp op, ArrayRef<const Tensor *> args,
                            SmallVectorImpl<Tensor> &results) override;

private:
  /// The dtype a value of `type` is held in under the options.
  DType dtypeFor(RankedTensorType type) const;
  LogicalResult evaluateBlock(Block &block, ArrayRef<const Tensor *> args,
                              SmallVectorImpl<Tensor> &results);
  /// One op: its EvalOpInterface, or for func.call the callee's body.
  LogicalResult evaluateOp(Operation &op, ArrayRef<const Tensor *> operands,
                           SmallVectorImpl<Tensor> &results);

  ModuleOp module;
  EvalOptions options;
  std::optional<TensorMap> weights, optimizerState;
  std::optional<DevicePlacement> placement;
  TensorMap parameters;
  /// Declaration that first materialised each parameter (to check ties).
  llvm::StringMap<ParamOp> declarations;
  /// Prefix of the layer instance being evaluated ("" at top level).
  std::string prefix;
  /// Prefix of the instance its repeat runs next (its own for the last).
  std::string nextPrefix;
};

} // namespace mlir::braid

#endif // BRAID_EVAL_EVALUATOR_H

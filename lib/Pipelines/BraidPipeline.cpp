//===- BraidPipeline.cpp - The pass pipeline of braidc --------------------===//

#include "braid/Pipelines/BraidPipeline.h"
#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Schedule/Generators.h"

#include "mlir/Pass/PassRegistry.h"

#include <cmath>

using namespace mlir;
using namespace mlir::braid;

static llvm::Error optionError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error mlir::braid::verifyTrainingOptions(const TrainingOptions &o) {
  if (o.dp < 1 || o.tp < 1 || o.pp < 1)
    return optionError("mesh degrees must be positive (dp=" + Twine(o.dp) +
                       ", tp=" + Twine(o.tp) + ", pp=" + Twine(o.pp) + ")");
  if (o.zero < 0 || o.zero > 3)
    return optionError("zero must be 0, 1, 2 or 3, got " + Twine(o.zero));
  if (o.zero > 0 && o.dp == 1)
    return optionError("zero " + Twine(o.zero) +
                       " shards over data parallelism, but dp=1: give the "
                       "mesh a dp axis or drop zero");
  if (o.zero3Prefetch < 0)
    return optionError("zero3-prefetch must be non-negative (0: gather just "
                       "in time), got " + Twine(o.zero3Prefetch));
  if (o.sp && o.tp == 1)
    return optionError("sp splits the sequence over tensor parallelism, but "
                       "tp=1: give the mesh a tp axis or drop sp");
  if (o.microbatches < 0)
    return optionError("microbatches must be positive (0 picks the "
                       "default), got " + Twine(o.microbatches));
  if (o.precision != "f32" && o.precision != "bf16-mixed")
    return optionError("unknown precision '" + o.precision +
                       "'; expected f32 or bf16-mixed");
  if (o.gradCompression != "none" && o.gradCompression != "bf16" &&
      o.gradCompression != "fp16" && o.gradCompression != "powersgd")
    return optionError("unknown grad-compression '" + o.gradCompression +
                       "'; expected none, bf16, fp16 or powersgd");
  if (o.powersgdRank < 1)
    return optionError("powersgd-rank must be positive, got " +
                       Twine(o.powersgdRank));
  if (o.gradCompression != "none" && o.dp == 1)
    return optionError("grad-compression " + o.gradCompression +
                       " compresses data-parallel gradient reductions, but "
                       "dp=1: give the mesh a dp axis or drop it");
  if (o.deferValidation && o.postValidate)
    return optionError("defer-validation and post-validate exclude each "
                       "other: the first validates a step during the next, "
                       "the second within the step; pick one");
  if (!(o.bucketMb >= 0) || !std::isfinite(o.bucketMb))
    return optionError("bucket-mb must be non-negative and finite (0: no "
                       "buckets), got " +
                       Twine(std::to_string(o.bucketMb)));
  if (o.chunks < 0)
    return optionError("chunks must be positive (0 picks the schedule's), "
                       "got " + Twine(o.chunks));
  // The schedule is checked with pp = 1 too, where it has no effect: a
  // misspelt name is refused rather than ignored.
  std::optional<sched::ScheduleKind> kind =
      sched::parseScheduleKind(o.schedule);
  if (!kind)
    return optionError("unknown schedule '" + o.schedule + "'");
  llvm::Expected<llvm::SmallVector<int64_t>> stageLayers =
      parseStageLayers(o.stageLayers);
  if (!stageLayers)
    return stageLayers.takeError();
  if (o.pp == 1) {
    if (!stageLayers->empty())
      return optionError("stage-layers places layers on pipeline stages, but "
                         "pp=1: give the mesh a pp axis or drop stage-layers");
    return llvm::Error::success();
  }
  llvm::Expected<int> chunks = sched::resolveNumChunks(*kind, o.chunks);
  if (!chunks)
    return chunks.takeError();
  if (!stageLayers->empty() && (int64_t)stageLayers->size() != o.pp * *chunks)
    return optionError("stage-layers gives " + Twine(stageLayers->size()) +
                       " numbers, but pp x chunks = " + Twine(o.pp * *chunks) +
                       " chunks need one each");
  return llvm::Error::success();
}

llvm::Expected<llvm::SmallVector<int64_t>>
mlir::braid::parseStageLayers(llvm::StringRef text) {
  llvm::SmallVector<int64_t> layers;
  if (text.trim().empty())
    return layers;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/true);
  for (llvm::StringRef part : parts) {
    int64_t n = 0;
    // 0 is legal where the chunk still holds ops outside layers (the
    // first: the embedding; the last: the head); braid-pipeline-split
    // refuses a chunk left with nothing.
    if (part.trim().getAsInteger(10, n) || n < 0)
      return optionError("stage-layers: expected layer counts (0 or more) "
                         "separated by commas, got '" +
                         part + "' in '" + text + "'");
    layers.push_back(n);
  }
  return layers;
}

int64_t mlir::braid::getPipelineChunks(const TrainingOptions &options) {
  std::optional<sched::ScheduleKind> kind =
      sched::parseScheduleKind(options.schedule);
  if (!kind)
    return options.chunks ? options.chunks : 1;
  llvm::Expected<int> chunks = sched::resolveNumChunks(*kind, options.chunks);
  if (!chunks) {
    llvm::consumeError(chunks.takeError());
    return options.chunks;
  }
  return *chunks;
}

void mlir::braid::buildTrainingPipeline(OpPassManager &pm,
                                        const TrainingOptions &options) {
  int64_t microbatches = options.microbatches;
  if (microbatches == 0)
    microbatches = options.pp > 1 ? options.pp : 1;
  // First: the forward program's precision, which the backward follows.
  if (options.precision != "f32") {
    MixedPrecisionPassOptions precision;
    precision.precision = options.precision;
    pm.addPass(createMixedPrecisionPass(precision));
  }
  if (options.pp > 1) {
    PipelineSplitPassOptions split;
    split.stages = options.pp;
    split.chunks = getPipelineChunks(options);
    if (options.schedule == "zb-v")
      split.placement = "v";
    // Checked by verifyTrainingOptions.
    if (llvm::Expected<llvm::SmallVector<int64_t>> layers =
            parseStageLayers(options.stageLayers))
      split.layers = *layers;
    else
      llvm::consumeError(layers.takeError());
    pm.addPass(createPipelineSplitPass(split));
  }
  AutodiffPassOptions autodiff;
  autodiff.recompute = options.recompute;
  pm.addPass(createAutodiffPass(autodiff));
  TrainStepPassOptions step;
  step.optimizer = options.optimizer;
  step.lr = options.lr;
  step.minLr = options.minLr;
  step.warmupSteps = options.warmupSteps;
  step.totalSteps = options.totalSteps;
  step.decay = options.decay;
  step.clipNorm = options.clipNorm;
  step.postValidate = options.postValidate;
  step.deferValidation = options.deferValidation;
  step.accumulation = microbatches;
  step.pipeline = options.pp > 1;
  pm.addPass(createTrainStepPass(step));
  // ZeRO or sp on a mesh without their axis reaches braid-shard, which
  // refuses it rather than doing nothing.
  if (options.dp * options.tp > 1 || options.zero > 0 || options.sp) {
    ShardPassOptions shard;
    shard.dp = options.dp;
    shard.tp = options.tp;
    shard.zero = options.zero;
    shard.sp = options.sp;
    pm.addPass(createShardPass(shard));
    pm.addPass(createPropagateShardingPass());
    pm.addPass(createPartitionPass());
  }
  if (options.pp > 1) {
    pm.addPass(createPipelineOutlinePass());
    PipelineSchedulePassOptions schedule;
    schedule.schedule = options.schedule;
    schedule.microbatches = microbatches;
    pm.addPass(createPipelineSchedulePass(schedule));
  }
  // Before bucketing, which keeps compressed and exact reductions apart.
  if (options.dp > 1 && options.gradCompression != "none") {
    CompressGradientsPassOptions compress;
    compress.format = options.gradCompression;
    compress.rank = options.powersgdRank;
    compress.axes = {"dp"};
    pm.addPass(createCompressGradientsPass(compress));
  }
  // Last: within the pieces of a pipeline, so a bucket never joins the
  // gradients of two pieces (which would make them depend on each other).
  if (options.dp * options.tp > 1 && options.bucketMb > 0) {
    BucketCollectivesPassOptions bucket;
    bucket.bucketMb = options.bucketMb;
    pm.addPass(createBucketCollectivesPass(bucket));
  }
  // ZeRO-3's parameter gathers, a block's at once up to the same cap; the
  // first groups of a repeated layer stay single for braid-zero3-prefetch
  // to start in the instance before. Before async: it fuses blocking
  // gathers.
  if (options.zero >= 3 && options.dp > 1 && options.bucketMb > 0) {
    BucketGathersPassOptions bucket;
    bucket.bucketMb = options.bucketMb;
    bucket.leaveFirst = options.zero3Prefetch;
    pm.addPass(createBucketGathersPass(bucket));
  }
  if (options.dp * options.tp > 1 && options.asyncCollectives) {
    pm.addPass(createAsyncCollectivesPass());
    if (options.scheduleCollectives) {
      ScheduleCollectivesPassOptions schedule;
      schedule.acrossRepeats = options.scheduleAcrossRepeats;
      schedule.intoPipelines = options.scheduleIntoPipelines;
      pm.addPass(createScheduleCollectivesPass(schedule));
    }
  }
  // After any scheduling: it bounds how far ahead parameter gathers start.
  if (options.zero >= 3 && options.dp > 1 && options.zero3Prefetch > 0) {
    Zero3PrefetchPassOptions prefetch;
    prefetch.depth = options.zero3Prefetch;
    prefetch.acrossRepeats = true; // layer instances start the next's
    pm.addPass(createZero3PrefetchPass(prefetch));
  }
}

void mlir::braid::buildCodegenPipeline(OpPassManager &pm,
                                       const CodegenOptions &options) {
  if (options.train)
    buildTrainingPipeline(pm, options.training);
  // bf16 values held in f32 and rounded, for the f32 kernels (a module
  // without bf16 is unchanged); before fusion, which takes f32 ops.
  pm.addPass(createLegalizeBF16Pass());
  // Before elementwise fusion, which would take the bias add into a region.
  if (options.fuseMatmulEpilogue)
    pm.addPass(createFuseMatmulEpiloguePass());
  // Last: sharding, pipelining and the reports never see braid.fused, and
  // regions never span collectives or pipeline pieces.
  if (options.fuse)
    pm.addPass(createFuseElementwisePass());
  ConvertBraidToEmitCPassOptions lowerOptions;
  lowerOptions.entry = options.train ? "train_step" : options.entry;
  lowerOptions.spmd = options.train || options.spmd;
  lowerOptions.target = options.target;
  lowerOptions.reuseBuffers = options.bufferReuse;
  pm.addPass(createConvertBraidToEmitCPass(lowerOptions));
}

namespace {
struct CodegenPipelineOptions
    : public PassPipelineOptions<CodegenPipelineOptions> {
  Option<std::string> entry{*this, "entry",
                            llvm::cl::desc("The function the program runs."),
                            llvm::cl::init("forward")};
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Derive the training step from @forward "
                                    "(the entry becomes train_step)."),
                     llvm::cl::init(false)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("cpu or cuda (what braid-lower-to-emitc emits for)."),
      llvm::cl::init("cpu")};
  Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fuse elementwise chains into braid.fused regions "
                     "before lowering (braid-fuse-elementwise; braidc "
                     "--no-fuse turns it off)."),
      llvm::cl::init(true)};
  Option<bool> fuseMatmulEpilogue{
      *this, "fuse-matmul-epilogue",
      llvm::cl::desc("Fold bias adds and tanh GELUs into their matmuls "
                     "before lowering (braid-fuse-matmul-epilogue; braidc "
                     "--no-matmul-epilogue turns it off)."),
      llvm::cl::init(true)};
  Option<bool> bufferReuse{
      *this, "buffer-reuse",
      llvm::cl::desc("Share memory between buffers whose lifetimes do not "
                     "overlap, and update in place (braid-lower-to-emitc's "
                     "reuse-buffers; braidc --no-buffer-reuse turns it off)."),
      llvm::cl::init(true)};
  Option<bool> spmd{*this, "spmd",
                    llvm::cl::desc("Run on the runtime's context even without "
                                   "a mesh (implied by train; braidc sets it "
                                   "for an entry with a 'step' argument)."),
                    llvm::cl::init(false)};
#define BRAID_MESH_OPTION(NAME, FLAG, DESC)                                    \
  Option<int64_t> NAME{*this, FLAG, llvm::cl::desc(DESC), llvm::cl::init(1)};
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  Option<TYPE> NAME{*this, FLAG, llvm::cl::desc(DESC),                         \
                    llvm::cl::init(DEFAULT)};
#include "braid/Pipelines/TrainingOptions.def"
};
} // namespace

void mlir::braid::registerCodegenPipeline() {
  PassPipelineRegistration<CodegenPipelineOptions>(
      "braid-codegen-pipeline",
      "The pipeline of braidc: a braid model (with train, its parallel "
      "training step) to EmitC calls of the runtime.",
      [](OpPassManager &pm, const CodegenPipelineOptions &opts) {
        CodegenOptions options;
        options.entry = opts.entry;
        options.train = opts.train;
        options.spmd = opts.spmd;
        options.target = opts.target;
        options.fuse = opts.fuse;
        options.fuseMatmulEpilogue = opts.fuseMatmulEpilogue;
        options.bufferReuse = opts.bufferReuse;
        TrainingOptions &t = options.training;
#define BRAID_MESH_OPTION(NAME, FLAG, DESC) t.NAME = opts.NAME;
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  t.NAME = opts.NAME;
#include "braid/Pipelines/TrainingOptions.def"
        buildCodegenPipeline(pm, options);
      });
}

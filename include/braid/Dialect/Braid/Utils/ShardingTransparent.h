//===- ShardingTransparent.h - What a value is read from --------*- C++ -*-===//
//
// Ops that pass a value's elements through one by one (sharding-
// transparent), and the value a chain of them starts from: the passes that
// shard or gather parameters and the EmitC lowering ask the same questions
// of a value (which parameter share it is read from, and whether it is the
// next layer instance's), and answer them here.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_UTILS_SHARDINGTRANSPARENT_H
#define BRAID_DIALECT_BRAID_UTILS_SHARDINGTRANSPARENT_H

#include "braid/Dialect/Braid/IR/BraidOps.h"

namespace mlir::braid {

/// Whether `op` is transparent to sharding: it has one operand and one
/// result of the same shape, and its sharding rule maps each dimension of
/// the operand to the same dimension of the result, as a parallel factor
/// of its own. Every element of the result is computed from the same
/// element of the operand alone, so the result is split exactly as the
/// operand is: a sharding constraint (braid.shard), a dtype conversion
/// (bf16-mixed's working copy of a parameter), a rounding, a unary
/// elementwise op. A property of the rule, not a list of ops.
bool isShardingTransparent(Operation *op);

/// The value `v` is computed from through sharding-transparent ops only
/// (`v` itself if its producer is not one).
Value skipShardingTransparent(Value v);

/// The read of the parameter whose share `v` is, in `block`: `v` is the
/// read's value or computed from it through sharding-transparent ops in
/// `block` (each element from the same element of the share alone:
/// bf16-mixed's working copy, a braid.convert of the read), which `chain`
/// receives in order. Null if `v` is not a share.
ParamOp getShareRead(Value v, Block *block,
                     SmallVectorImpl<Operation *> &chain);

/// The reads of the parameter shares a bucketed gather's input `v` is made
/// of (braid-bucket-gathers): a braid.concat in `block` of shares
/// (getShareRead), each reshaped to rank 1 unless already of rank 1. `reads` receives the reads,
/// `chain` the ops from them to `v` (the shares' own chains, the reshapes,
/// the concat), in block order. False, and nothing received, otherwise.
bool getBucketShareReads(Value v, Block *block,
                         SmallVectorImpl<ParamOp> &reads,
                         SmallVectorImpl<Operation *> &chain);

/// Marks a braid.param that reads the share of the instance its repeat runs
/// next (braid-zero3-prefetch across-repeats).
constexpr StringLiteral kNextInstanceAttrName = "braid.next_instance";

/// The read of the share the next instance needs that `v` is made of: a
/// braid.param marked braid.next_instance whose value `v` is, or is
/// computed from through sharding-transparent ops in `v`'s block
/// (bf16-mixed's working copy: a braid.convert, later a braid.round, of the
/// read). Null otherwise. Only the next instance needs such a value: the
/// last instance, which has none, does not start a collective on it.
ParamOp getNextInstanceShareRead(Value v);

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_UTILS_SHARDINGTRANSPARENT_H

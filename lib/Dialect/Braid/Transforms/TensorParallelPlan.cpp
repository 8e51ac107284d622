//===- TensorParallelPlan.cpp - Megatron splits from structure ------------===//
//
// A weight W1 whose matmul output flows, along the output-feature
// dimension, only through ops whose sharding rules keep that dimension
// parallel (elementwise ops, reshapes into heads, attention over heads,
// SwiGLU's product) into a second matmul that sums over it with a weight
// W2 is Megatron's pair: W1 column-parallel, W2 row-parallel, one partial
// sum per pair. A matmul output that reaches a loss splitting the
// vocabulary cooperatively is the LM head; a table whose rows ids look up
// is the embedding. Nothing here reads a parameter's name except to tell
// which `braid.param` ops read the same tensor.
//
// A fused projection (PyTorch's `nn.Linear(h, 3h)` then `.split(h)`, or
// MultiheadAttention's `in_proj_weight`) reaches the second matmul through
// slices that each take one of b equal blocks of the split dimension (the
// slice's sharding rule views it as [b, n / b]). Splitting it contiguously
// would give a device all of q and half of k; the split is instead strided
// over the b blocks (#braid.sharding's `blocks`), so each device holds its
// heads of q, of k and of v, as Megatron-LM does, and the slices, the
// attention and the row-parallel matmul stay local. The parameter keeps
// its layout: only how devices hold it changes, so checkpoints and
// --weights stay mesh-independent.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/Transforms/TensorParallelPlan.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include <numeric>

using namespace mlir;
using namespace mlir::braid;

using Role = TensorParallelDecision::Role;
using Kind = ShardingRule::Kind;

StringRef mlir::braid::stringifyRole(Role role) {
  switch (role) {
  case Role::None:
    return "whole";
  case Role::Column:
    return "column-parallel";
  case Role::ColumnBias:
    return "column-parallel bias";
  case Role::Row:
    return "row-parallel";
  case Role::Vocabulary:
    return "vocabulary-parallel table";
  case Role::Head:
    return "vocabulary-parallel head";
  }
  llvm_unreachable("unknown role");
}

/// The trainable parameter `v` reads, looking through ops that split their
/// result as their operand (sharding constraints, and under bf16-mixed the
/// braid.convert making the parameter's bf16 working copy): a matmul on
/// the working copy uses the parameter as its weight, and splitting the
/// parameter splits the copy alike.
static ParamOp paramOf(Value v) {
  auto param = skipShardingTransparent(v).getDefiningOp<ParamOp>();
  return param && !param.getState() ? param : ParamOp();
}

/// The backward and weight-gradient phases reuse the forward's parameters
/// in transposed roles; the forward alone says what they are.
static bool isForward(Operation *op) {
  std::optional<Phase> phase = getPhase(op);
  return !phase || *phase == Phase::F;
}

static std::string quote(ParamOp param) {
  return ("'" + param.getName() + "'").str();
}

/// The (operand, dimension) pairs other than operand `except` that `rule`
/// maps to factor `f`.
static SmallVector<std::pair<unsigned, int64_t>>
carriers(const ShardingRule &rule, int64_t f, unsigned except) {
  SmallVector<std::pair<unsigned, int64_t>> found;
  for (auto [i, map] : llvm::enumerate(rule.operands))
    for (auto [d, g] : llvm::enumerate(map))
      if (g == f && i != except)
        found.push_back({(unsigned)i, (int64_t)d});
  return found;
}

static bool inResults(const ShardingRule &rule, int64_t f) {
  return llvm::any_of(rule.results, [&](const SmallVector<int64_t> &map) {
    return llvm::is_contained(map, f);
  });
}

namespace {

/// A parameter used as the weight of a contraction with an activation.
struct Weight {
  /// Its dimension of output features and the result-0 dimension they
  /// become.
  int64_t outDim, resultDim;
};

/// Where a split of a matmul's output features goes.
struct Trace {
  /// A parameter's dimension reached by the split, and the divisor of the
  /// blocks it is split in: a dimension reached after slices taking one of
  /// b blocks holds b times fewer blocks than the first matmul's output.
  struct Reached {
    ParamOp param;
    int64_t dim, divisor;
  };
  /// Weights of matmuls that sum over the split dimension (row partners),
  /// with the dimension summed over.
  SmallVector<Reached> rows;
  /// Parameters applied along the split dimension on the way (biases).
  SmallVector<Reached> biases;
  /// The blocks the first matmul's output dimension must be split in so
  /// that every value reached holds a whole number of them: the least
  /// common multiple of the divisors.
  int64_t blocks = 1;
  /// A loss that splits the dimension cooperatively (the vocabulary).
  Operation *vocabulary = nullptr;
  /// The first op that needs the dimension whole or reduces it otherwise.
  Operation *mixedAt = nullptr;
  StringRef mixedWhy;
  /// The first op the value leaves through unexamined (a yield, a return).
  Operation *leavesAt = nullptr;
};

} // namespace

/// Whether operand `operand` of `op` (a parameter) is the weight of a
/// contraction: one of its dimensions is summed against exactly one other
/// operand, an activation, and one other dimension indexes result 0.
static std::optional<Weight> asWeight(Operation *op, unsigned operand,
                                      const ShardingRule &rule) {
  if (rule.results.empty() || op->getNumResults() == 0)
    return std::nullopt;
  std::optional<int64_t> sumDim, outDim, resultDim;
  for (auto [d, f] : llvm::enumerate(rule.operands[operand])) {
    if (f < 0)
      continue;
    Kind kind = rule.factors[f].kind;
    if (kind == Kind::Sum && !sumDim) {
      auto others = carriers(rule, f, operand);
      if (others.size() != 1 || paramOf(op->getOperand(others[0].first)))
        return std::nullopt;
      sumDim = d;
      continue;
    }
    auto it = llvm::find(rule.results[0], f);
    if (kind != Kind::Parallel || it == rule.results[0].end() || outDim)
      return std::nullopt;
    outDim = d;
    resultDim = it - rule.results[0].begin();
  }
  if (!sumDim || !outDim)
    return std::nullopt;
  return Weight{*outDim, *resultDim};
}

/// Whether operand `operand` of `op` (a parameter) is a table whose rows
/// integer ids look up: the dimension returned is summed over but carried
/// by no other operand or result (each device's block of rows answers the
/// ids it holds; the op's localize resolves the rest).
static std::optional<int64_t> asTable(Operation *op, unsigned operand,
                                      const ShardingRule &rule) {
  bool hasIds = llvm::any_of(op->getOperands(), [](Value v) {
    return isa<IntegerType>(getElementTypeOrSelf(v.getType()));
  });
  if (!hasIds)
    return std::nullopt;
  std::optional<int64_t> rows;
  for (auto [d, f] : llvm::enumerate(rule.operands[operand])) {
    if (f < 0)
      return std::nullopt;
    Kind kind = rule.factors[f].kind;
    if (kind == Kind::Sum && carriers(rule, f, operand).empty() &&
        !inResults(rule, f) && !rows)
      rows = d;
    else if (kind != Kind::Parallel || !inResults(rule, f))
      return std::nullopt;
  }
  return rows;
}

/// Follows dimension `dim` of `start` through the forward ops of its block.
static Trace traceSplit(Value start, int64_t dim, ParamOp self) {
  Trace t;
  struct Item {
    Value value;
    int64_t dim, divisor;
  };
  SmallVector<Item> work{{start, dim, 1}};
  llvm::DenseMap<std::pair<Value, int64_t>, int64_t> seen;
  while (!work.empty()) {
    auto [value, d, divisor] = work.pop_back_val();
    auto [it, inserted] = seen.try_emplace({value, d}, divisor);
    if (!inserted) {
      if (it->second != divisor && !t.mixedAt) {
        t.mixedAt = value.getDefiningOp() ? value.getDefiningOp()
                                          : start.getDefiningOp();
        t.mixedWhy = "is reached in blocks of two different sizes";
      }
      continue;
    }
    t.blocks = std::lcm(t.blocks, divisor);
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (!isForward(user))
        continue;
      auto mixed = [&](StringRef why) {
        if (!t.mixedAt) {
          t.mixedAt = user;
          t.mixedWhy = why;
        }
      };
      auto iface = dyn_cast<ShardingRuleOpInterface>(user);
      if (!iface) {
        if (!t.leavesAt)
          t.leavesAt = user;
        continue;
      }
      ShardingRule rule = iface.getShardingRule();
      unsigned n = use.getOperandNumber();
      int64_t f =
          n < rule.operands.size() && d < (int64_t)rule.operands[n].size()
              ? rule.operands[n][d]
              : -1;
      if (f < 0) {
        mixed("does not carry it as a factor");
        continue;
      }
      // The factor's blocks divide this dimension's by the rule's view of
      // it (a slice of one block of b).
      // A reshape's blocks are other dimensions merged around the factor
      // (heads merged with the batch), not blocks of the weight's dimension.
      bool reshape = isa<ReshapeOp>(user);
      int64_t inBlocks = reshape ? 1 : rule.getOperandBlocks(n, d);
      int64_t factorDivisor = divisor * inBlocks;
      switch (rule.factors[f].kind) {
      case Kind::Cooperative:
        if (!t.vocabulary)
          t.vocabulary = user;
        continue;
      case Kind::Sum: {
        // The second matmul of a pair sums over the split dimension against
        // a weight.
        auto others = carriers(rule, f, n);
        ParamOp weight = others.size() == 1
                             ? paramOf(user->getOperand(others[0].first))
                             : ParamOp();
        if (weight && weight != self)
          t.rows.push_back(
              {weight, others[0].second,
               factorDivisor /
                   rule.getOperandBlocks(others[0].first, others[0].second)});
        else
          mixed("sums over it against an activation");
        continue;
      }
      case Kind::Blocked:
        mixed("needs it whole");
        continue;
      case Kind::Mean:
        mixed("averages over it");
        continue;
      case Kind::Parallel:
      case Kind::ParallelMean:
        break;
      }
      // A rule viewing a dimension as more blocks than the factor has
      // (a slice's gradient) would need fractions of a block.
      auto divisorOf = [&](int64_t b) -> std::optional<int64_t> {
        if (factorDivisor % b != 0) {
          mixed("would hold a fraction of a block of it");
          return std::nullopt;
        }
        return factorDivisor / b;
      };
      for (auto [o, od] : carriers(rule, f, n))
        if (ParamOp p = paramOf(user->getOperand(o)))
          if (auto q = divisorOf(rule.getOperandBlocks(o, od)))
            t.biases.push_back({p, od, *q});
      for (auto [r, map] : llvm::enumerate(rule.results))
        for (auto [rd, g] : llvm::enumerate(map))
          if (g == f && r < user->getNumResults())
            if (auto q = divisorOf(reshape ? 1 : rule.getResultBlocks(r, rd)))
              work.push_back({user->getResult(r), (int64_t)rd, *q});
    }
  }
  return t;
}

TensorParallelPlan::TensorParallelPlan(ModuleOp module) {
  none.reason = "not the weight of a matmul pair, an embedding table or an "
                "LM head, nor applied along their split";
  module.walk([&](RepeatOp repeat) {
    if (auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
            repeat, repeat.getLayerAttr()))
      repeatsOf[layer].push_back(repeat);
  });
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto layer = dyn_cast<LayerOp>(op))
      analyse(layer.getBody().front());
    else if (auto fn = dyn_cast<func::FuncOp>(op))
      for (Block &block : fn.getBody())
        analyse(block);
  }
  // Optimizer state is combined with its parameter factor by factor in one
  // update op (braid.adamw_update's m and v, braid.sgd_update's momentum).
  module.walk([&](ShardingRuleOpInterface op) {
    std::optional<ShardingRule> rule;
    for (OpOperand &use : op->getOpOperands()) {
      auto state = use.get().getDefiningOp<ParamOp>();
      if (!state || !state.getState())
        continue;
      if (!rule)
        rule = op.getShardingRule();
      unsigned i = use.getOperandNumber();
      for (OpOperand &other : op->getOpOperands()) {
        ParamOp param = paramOf(other.get());
        unsigned j = other.getOperandNumber();
        if (param && param.getType() == state.getType() &&
            i < rule->operands.size() && j < rule->operands.size() &&
            rule->operands[i] == rule->operands[j]) {
          owners[state] = param;
          break;
        }
      }
    }
  });
}

SmallVector<std::string> TensorParallelPlan::scopesOf(LayerOp layer) {
  auto it = scopes.find(layer);
  if (it != scopes.end())
    return it->second;
  // A layer no repeat applies (or a cycle of them) names its parameters
  // apart from every other.
  SmallVector<std::string> own{("@" + layer.getSymName() + "/").str()};
  scopes[layer] = own;
  SmallVector<std::string> found;
  for (RepeatOp repeat : repeatsOf.lookup(layer)) {
    SmallVector<std::string> outer{""};
    if (auto enclosing = repeat->getParentOfType<LayerOp>())
      outer = scopesOf(enclosing);
    // Instance i of prefix P names its parameters P.i.<local>: one
    // decision covers every instance.
    std::string prefix =
        repeat.getPrefix().empty() ? "" : (repeat.getPrefix() + ".*.").str();
    for (const std::string &s : outer)
      if (!llvm::is_contained(found, s + prefix))
        found.push_back(s + prefix);
  }
  if (found.empty())
    found = own;
  scopes[layer] = found;
  return found;
}

SmallVector<std::string> TensorParallelPlan::fullNames(ParamOp param) {
  SmallVector<std::string> names;
  if (auto layer = param->getParentOfType<LayerOp>())
    for (const std::string &scope : scopesOf(layer))
      names.push_back(scope + param.getName().str());
  else
    names.push_back(param.getName().str());
  return names;
}

void TensorParallelPlan::record(ParamOp param, TensorParallelDecision d) {
  for (const std::string &name : fullNames(param)) {
    auto [it, inserted] = decisions.try_emplace(name, d);
    TensorParallelDecision &old = it->second;
    if (inserted || d.role == Role::None || conflicts.contains(name))
      continue;
    if (old.role == Role::None) {
      old = d;
    } else if (old.dim != d.dim || old.blocks != d.blocks) {
      // Tied uses that disagree: keep it whole rather than guess.
      auto how = [](const TensorParallelDecision &x) {
        std::string s = ("dimension " + Twine(x.dim)).str();
        if (x.blocks > 1)
          s += (" in " + Twine(x.blocks) + " blocks").str();
        return s + " as " + stringifyRole(x.role).str();
      };
      std::string reason = "split along " + how(old) + " and along " + how(d);
      old = TensorParallelDecision();
      old.reason = reason;
      conflicts.insert(name);
    } else if (old.reason.find(d.reason) == std::string::npos) {
      // The same split for two reasons (a tied embedding and head).
      old.optional = old.optional && d.optional;
      old.reason += "; also " + d.reason;
    }
  }
}

void TensorParallelPlan::analyse(Block &block) {
  struct Candidate {
    ParamOp weight;
    Operation *op;
    Weight w;
    Trace trace;
  };
  SmallVector<Candidate> candidates;
  for (Operation &op : block) {
    auto iface = dyn_cast<ShardingRuleOpInterface>(op);
    if (!iface || !isForward(&op))
      continue;
    std::optional<ShardingRule> rule;
    for (OpOperand &use : op.getOpOperands()) {
      ParamOp param = paramOf(use.get());
      if (!param)
        continue;
      if (!rule)
        rule = iface.getShardingRule();
      unsigned i = use.getOperandNumber();
      if (i >= rule->operands.size())
        continue;
      if (std::optional<Weight> w = asWeight(&op, i, *rule)) {
        candidates.push_back(
            {param, &op, *w, traceSplit(op.getResult(0), w->resultDim, param)});
      } else if (std::optional<int64_t> rows = asTable(&op, i, *rule)) {
        TensorParallelDecision d{Role::Vocabulary, *rows, /*optional=*/true,
                                 ("its rows are looked up by id in " +
                                  op.getName().getStringRef() +
                                  " (the vocabulary)")
                                     .str()};
        record(param, d);
      }
    }
  }

  // Pairs in program order; a weight is one or the other, not both.
  llvm::DenseSet<ParamOp> columns;
  llvm::MapVector<ParamOp, SmallVector<std::string>> rows;
  llvm::DenseMap<ParamOp, int64_t> rowDims, rowBlocks;
  for (Candidate &c : candidates) {
    Trace &t = c.trace;
    StringRef op = c.op->getName().getStringRef();
    TensorParallelDecision d{Role::None, -1, false, ""};
    if (t.mixedAt) {
      d.reason = ("the output of its " + op + " along dimension " +
                  Twine(c.w.outDim) + " reaches " +
                  t.mixedAt->getName().getStringRef() + ", which " + t.mixedWhy)
                     .str();
      record(c.weight, d);
      continue;
    }
    if (rows.contains(c.weight))
      continue;
    SmallVector<Trace::Reached> partners;
    for (auto &row : t.rows)
      if (!columns.contains(row.param))
        partners.push_back(row);
    if (!partners.empty()) {
      columns.insert(c.weight);
      std::string names;
      for (const Trace::Reached &p : partners) {
        if (!names.empty())
          names += ", ";
        names += quote(p.param);
        rows[p.param].push_back(quote(c.weight));
        rowDims[p.param] = p.dim;
        rowBlocks[p.param] = t.blocks / p.divisor;
      }
      d = {Role::Column, c.w.outDim, false,
           ("the output of its " + op + " reaches the matmul with " + names +
            " only through ops that keep dimension " + Twine(c.w.outDim) +
            " parallel")
               .str(),
           t.blocks};
      if (t.blocks > 1)
        d.reason += (", cut by slices into " + Twine(t.blocks) +
                     " blocks, each split (a fused projection)")
                        .str();
      record(c.weight, d);
      for (const Trace::Reached &bias : t.biases)
        record(bias.param, {Role::ColumnBias, bias.dim, false,
                            "applied along the dimension that " +
                                quote(c.weight) + " splits",
                            t.blocks / bias.divisor});
    } else if (t.vocabulary && t.blocks == 1) {
      d = {Role::Head, c.w.outDim, /*optional=*/true,
           ("the output of its " + op + " is the vocabulary of " +
            t.vocabulary->getName().getStringRef() + ", which splits it")
               .str()};
      record(c.weight, d);
      for (const Trace::Reached &bias : t.biases)
        record(bias.param, {Role::Head, bias.dim, /*optional=*/true,
                            "applied along the vocabulary that " +
                                quote(c.weight) + " splits"});
    } else {
      d.reason = ("no second matmul sums over the output of its " + op +
                  " along dimension " + Twine(c.w.outDim))
                     .str();
      if (t.leavesAt)
        d.reason += (" (it leaves through " +
                     t.leavesAt->getName().getStringRef() + ")")
                        .str();
      record(c.weight, d);
    }
  }
  for (auto &[param, names] : rows)
    record(param, {Role::Row, rowDims[param], false,
                   "its matmul sums over the dimension that " +
                       llvm::join(names, ", ") + " split",
                   rowBlocks[param]});
}

const TensorParallelDecision &TensorParallelPlan::lookup(ParamOp param) {
  if (param.getState()) {
    param = owners.lookup(param);
    if (!param)
      return none;
  }
  const TensorParallelDecision *found = &none;
  for (const std::string &name : fullNames(param)) {
    auto it = decisions.find(name);
    if (it != decisions.end() && (found == &none || found->role == Role::None))
      found = &it->second;
  }
  return *found;
}

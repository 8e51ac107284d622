//===- ShardingUtils.cpp - Shardings as values for the passes --------------===//

#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::braid;

Sharding Sharding::fromAttr(ShardingAttr attr) {
  Sharding s;
  for (unsigned d = 0; d < attr.getDims().size(); ++d)
    s.dims.push_back(attr.getDimAxes(d));
  s.partial = attr.getPartialAxes();
  s.blocks.assign(attr.getBlocks().begin(), attr.getBlocks().end());
  return s;
}

void Sharding::setDim(unsigned d, ArrayRef<StringRef> axes, int64_t count) {
  dims[d].assign(axes.begin(), axes.end());
  if (axes.empty())
    count = 1;
  if (count == 1 && blocks.empty())
    return;
  blocks.resize(dims.size(), 1);
  blocks[d] = count;
}

void Sharding::insertDim(unsigned d) {
  dims.insert(dims.begin() + d, SmallVector<StringRef>());
  if (!blocks.empty())
    blocks.insert(blocks.begin() + d, 1);
}

void Sharding::eraseDim(unsigned d) {
  dims.erase(dims.begin() + d);
  if (!blocks.empty())
    blocks.erase(blocks.begin() + d);
}

ShardingAttr Sharding::toAttr(MeshOp mesh) const {
  MLIRContext *ctx = mesh.getContext();
  auto strings = [&](ArrayRef<StringRef> axes) {
    SmallVector<Attribute> names;
    for (StringRef a : axes)
      names.push_back(StringAttr::get(ctx, a));
    return ArrayAttr::get(ctx, names);
  };
  SmallVector<Attribute> dimAttrs;
  for (const auto &axes : dims)
    dimAttrs.push_back(strings(axes));
  // Counts of 1 everywhere are written as none.
  SmallVector<int64_t> counts;
  for (unsigned d = 0; d < dims.size(); ++d)
    counts.push_back(dims[d].empty() ? 1 : getBlocks(d));
  if (llvm::all_of(counts, [](int64_t b) { return b == 1; }))
    counts.clear();
  return ShardingAttr::get(ctx, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                           ArrayAttr::get(ctx, dimAttrs),
                           partial.empty() ? ArrayAttr() : strings(partial),
                           counts);
}

bool Sharding::isReplicated() const {
  return partial.empty() &&
         llvm::all_of(dims, [](const auto &axes) { return axes.empty(); });
}

int64_t mlir::braid::axesSize(MeshOp mesh, ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef a : axes)
    n *= mesh.getShape()[*mesh.getAxisIndex(a)];
  return n;
}

int64_t Sharding::splitCount(MeshOp mesh, unsigned d) const {
  return axesSize(mesh, dims[d]);
}

RankedTensorType Sharding::localType(MeshOp mesh,
                                     RankedTensorType type) const {
  SmallVector<int64_t> shape(type.getShape());
  for (unsigned d = 0; d < shape.size(); ++d)
    shape[d] /= splitCount(mesh, d);
  return RankedTensorType::get(shape, type.getElementType());
}

std::optional<SmallVector<Sharding>>
mlir::braid::getResultShardings(Operation *op) {
  auto attr = op->getAttrOfType<ArrayAttr>(kShardingsAttrName);
  if (!attr)
    return std::nullopt;
  SmallVector<Sharding> out;
  for (Attribute a : attr)
    out.push_back(Sharding::fromAttr(cast<ShardingAttr>(a)));
  return out;
}

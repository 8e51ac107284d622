//===- ShardingUtils.cpp - Shardings as values for the passes --------------===//

#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

using namespace mlir;
using namespace mlir::braid;

Sharding Sharding::fromAttr(ShardingAttr attr) {
  Sharding s;
  for (unsigned d = 0; d < attr.getDims().size(); ++d)
    s.dims.push_back(attr.getDimAxes(d));
  s.partial = attr.getPartialAxes();
  return s;
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
  return ShardingAttr::get(ctx, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                           ArrayAttr::get(ctx, dimAttrs),
                           partial.empty() ? ArrayAttr() : strings(partial));
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

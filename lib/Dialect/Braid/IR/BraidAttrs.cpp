//===- BraidAttrs.cpp - braid attributes and types -------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::braid;

#include "braid/Dialect/Braid/IR/BraidEnums.cpp.inc"

// The optional parts of #braid.sharding after its dimensions:
// `, partial = ["tp"]` and `, blocks = [3, 1]`, in that order.
static ParseResult parseShardingTail(AsmParser &parser, ArrayAttr &partial,
                                     SmallVector<int64_t> &blocks) {
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("partial"))) {
      if (partial || !blocks.empty())
        return parser.emitError(parser.getCurrentLocation(),
                                "'partial' comes once, before 'blocks'");
      if (parser.parseEqual() || parser.parseAttribute(partial))
        return failure();
      continue;
    }
    if (!blocks.empty() ||
        parser.parseKeyword("blocks", "or 'partial' after a comma") ||
        parser.parseEqual() ||
        parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
          return parser.parseInteger(blocks.emplace_back());
        }))
      return failure();
  }
  return success();
}

static void printShardingTail(AsmPrinter &printer, ArrayAttr partial,
                              ArrayRef<int64_t> blocks) {
  if (partial)
    printer << ", partial = " << partial;
  if (!blocks.empty()) {
    printer << ", blocks = [";
    llvm::interleaveComma(blocks, printer);
    printer << "]";
  }
}

#define GET_ATTRDEF_CLASSES
#include "braid/Dialect/Braid/IR/BraidAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "braid/Dialect/Braid/IR/BraidTypes.cpp.inc"

void BraidDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "braid/Dialect/Braid/IR/BraidTypes.cpp.inc"
      >();
}

void BraidDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "braid/Dialect/Braid/IR/BraidAttrs.cpp.inc"
      >();
}

unsigned InitAttr::getNumArgs(InitKind kind) {
  switch (kind) {
  case InitKind::zeros:
  case InitKind::ones:
    return 0;
  case InitKind::constant:
  case InitKind::normal:
    return 1;
  case InitKind::uniform:
    return 2;
  }
  llvm_unreachable("unknown InitKind");
}

// #braid.init<normal(0.02)>, #braid.init<uniform(-1.0, 1.0)>, #braid.init<zeros>
Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initializer '" << keyword
                          << "'; expected zeros, ones, constant(c), "
                             "normal(std) or uniform(lo, hi)";
    return {};
  }
  unsigned numArgs = getNumArgs(*kind);
  double args[2] = {0.0, 0.0};
  if (numArgs > 0) {
    if (parser.parseLParen())
      return {};
    for (unsigned i = 0; i < numArgs; ++i) {
      if (i > 0 && parser.parseComma())
        return {};
      if (parser.parseFloat(args[i]))
        return {};
    }
    if (parser.parseRParen())
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<InitAttr>(loc, parser.getContext(), *kind,
                                     APFloat(args[0]), APFloat(args[1]));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyInitKind(getKind());
  unsigned numArgs = getNumArgs(getKind());
  if (numArgs > 0) {
    printer << "(";
    printer.printFloat(getA());
    if (numArgs > 1) {
      printer << ", ";
      printer.printFloat(getB());
    }
    printer << ")";
  }
  printer << ">";
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat a, APFloat b) {
  double x = a.convertToDouble(), y = b.convertToDouble();
  if (!std::isfinite(x) || !std::isfinite(y))
    return emitError() << "initializer arguments must be finite";
  if (kind == InitKind::normal && !(x > 0.0))
    return emitError() << "normal initializer needs a positive standard "
                          "deviation, got "
                       << x;
  if (kind == InitKind::uniform && !(x < y))
    return emitError() << "uniform initializer needs lo < hi, got [" << x
                       << ", " << y << ")";
  return success();
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   ArrayAttr partial,
                                   ArrayRef<int64_t> blocks) {
  llvm::SmallSet<StringRef, 4> seen;
  auto checkAxis = [&](Attribute a) -> LogicalResult {
    auto name = dyn_cast<StringAttr>(a);
    if (!name || name.getValue().empty())
      return emitError() << "mesh axes must be non-empty strings";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' is used twice in one sharding";
    return success();
  };
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "each dimension's entry must be a list of mesh "
                            "axes, like [\"dp\"] or []";
    for (Attribute a : axes)
      if (failed(checkAxis(a)))
        return failure();
  }
  if (partial)
    for (Attribute a : partial)
      if (failed(checkAxis(a)))
        return failure();
  if (blocks.empty())
    return success();
  if (blocks.size() != dims.size())
    return emitError() << "blocks lists " << blocks.size() << " counts for "
                       << dims.size() << " dimensions";
  for (auto [d, b] : llvm::enumerate(blocks)) {
    if (b < 1)
      return emitError() << "dimension " << d << " has " << b
                         << " blocks; a count is at least 1";
    if (b > 1 && cast<ArrayAttr>(dims[d]).empty())
      return emitError() << "dimension " << d << " has " << b
                         << " blocks but is not split over any axis";
  }
  if (llvm::all_of(blocks, [](int64_t b) { return b == 1; }))
    return emitError() << "blocks of 1 everywhere: omit them";
  return success();
}

int64_t ShardingAttr::getDimBlocks(unsigned dim) const {
  return getBlocks().empty() ? 1 : getBlocks()[dim];
}

void ShardingAttr::getView(
    ArrayRef<int64_t> shape, SmallVectorImpl<int64_t> &viewShape,
    SmallVectorImpl<SmallVector<StringRef>> &axes) const {
  for (unsigned d = 0; d < shape.size(); ++d) {
    int64_t b = getDimBlocks(d);
    if (b > 1) {
      viewShape.push_back(b);
      axes.emplace_back();
    }
    viewShape.push_back(shape[d] / b);
    axes.push_back(getDimAxes(d));
  }
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  SmallVector<StringRef> axes;
  for (Attribute a : cast<ArrayAttr>(getDims()[dim]))
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

SmallVector<StringRef> ShardingAttr::getPartialAxes() const {
  SmallVector<StringRef> axes;
  if (getPartial())
    for (Attribute a : getPartial())
      axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

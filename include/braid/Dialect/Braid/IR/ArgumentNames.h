//===- ArgumentNames.h - Entry arguments by braid.name ----------*- C++ -*-===//
//
// The tools make, read, feed and save an entry function's inputs by name:
// an argument's `braid.name` (verified a string by the dialect), else
// "argN". Two arguments of one name would get one value, so braid-eval and
// braidc's programs refuse them with one message.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_IR_ARGUMENTNAMES_H
#define BRAID_DIALECT_BRAID_IR_ARGUMENTNAMES_H

#include "mlir/Interfaces/FunctionInterfaces.h"

#include <string>

namespace mlir::braid {

/// The name of argument `index` of `fn`: its `braid.name`, or "argN".
std::string getArgumentName(FunctionOpInterface fn, unsigned index);

/// Fails, with an error on `fn` naming the first argument whose name an
/// earlier argument has, unless the arguments' names are distinct.
LogicalResult verifyDistinctArgumentNames(FunctionOpInterface fn);

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_IR_ARGUMENTNAMES_H

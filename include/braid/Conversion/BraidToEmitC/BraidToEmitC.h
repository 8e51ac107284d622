//===- BraidToEmitC.h - names shared by the lowering and braidc -*- C++ -*-===//

#ifndef BRAID_CONVERSION_BRAIDTOEMITC_BRAIDTOEMITC_H
#define BRAID_CONVERSION_BRAIDTOEMITC_BRAIDTOEMITC_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::braid {

/// The C identifier of the emitted function for the braid function or layer
/// `symbol`: "braid_" followed by the symbol with every character that is not
/// a letter, digit or '_' replaced by '_' (`@L.F` -> `braid_L_F`).
std::string getEmittedFunctionName(llvm::StringRef symbol);

/// The emitted function that allocates and initialises every parameter:
/// `void braid_program_init(int64_t seed)`.
inline constexpr llvm::StringLiteral kProgramInitFunction =
    "braid_program_init";

} // namespace mlir::braid

#endif // BRAID_CONVERSION_BRAIDTOEMITC_BRAIDTOEMITC_H

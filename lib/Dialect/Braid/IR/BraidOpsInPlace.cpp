//===- BraidOpsInPlace.cpp - Which operands braid results may overwrite ---===//
//
// InPlaceOpInterface overrides; the elementwise ops use the interface's
// default (any operand).
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

using namespace mlir;
using namespace mlir::braid;

SmallVector<unsigned> AdamWUpdateOp::getInPlaceOperands(unsigned result) {
  // new_param, new_m, new_v over param, m, v.
  unsigned operands[] = {getParamMutable().getOperandNumber(),
                         getMMutable().getOperandNumber(),
                         getVMutable().getOperandNumber()};
  return {operands[result]};
}

bool AdamWUpdateOp::mayUpdateParameterSlot() { return true; }

SmallVector<unsigned> SgdUpdateOp::getInPlaceOperands(unsigned result) {
  // new_param, new_momentum_buffer over param, momentum_buffer.
  unsigned operands[] = {getParamMutable().getOperandNumber(),
                         getMomentumBufferMutable().getOperandNumber()};
  return {operands[result]};
}

bool SgdUpdateOp::mayUpdateParameterSlot() { return true; }

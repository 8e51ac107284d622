//===- EvalRegistrationTest.cpp - The ops' evaluation models ---------------===//
//
// EvalOpInterface lives with the evaluator and reaches the braid ops as
// external models. Checks that registering them gives every op that
// computes its semantics, and that forgetting to is a clear error rather
// than a per-op "no reference semantics".
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Eval/EvalOpInterface.h"
#include "braid/Eval/Evaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <string>

using namespace mlir;
using namespace mlir::braid;

namespace {

constexpr const char *kProgram = R"mlir(
func.func @forward(%a: tensor<2xf64>, %b: tensor<2xf64>) -> tensor<2xf64> {
  %c = braid.add %a, %b : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  return %c : tensor<2xf64>
}
)mlir";

DialectRegistry makeRegistry(bool withModels) {
  DialectRegistry registry;
  registry.insert<BraidDialect, func::FuncDialect>();
  if (withModels)
    registerEvalInterfaceExternalModels(registry);
  return registry;
}

/// Evaluates kProgram on [1, 2] + [3, 4]; diagnostics go to `errors`.
FailureOr<SmallVector<Tensor>> evaluate(MLIRContext &ctx, std::string &errors) {
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    errors += d.str() + "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kProgram, &ctx);
  if (!module)
    return failure();
  Tensor a({2}, DType::F64), b({2}, DType::F64);
  a[0] = 1, a[1] = 2, b[0] = 3, b[1] = 4;
  Evaluator evaluator(*module, EvalOptions());
  auto fn = module->lookupSymbol<func::FuncOp>("forward");
  return evaluator.run(fn, {a, b});
}

TEST(EvalRegistration, RegisteredModelsEvaluate) {
  MLIRContext ctx(makeRegistry(true));
  std::string errors;
  FailureOr<SmallVector<Tensor>> results = evaluate(ctx, errors);
  ASSERT_TRUE(succeeded(results)) << errors;
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ((*results)[0][0], 4.0);
  EXPECT_EQ((*results)[0][1], 6.0);
  EXPECT_TRUE(hasEvalInterfaceExternalModels(&ctx));
}

// The dialect no longer declares the interface on its ops, so a new op
// without a model would only show up when evaluated; this finds it first.
TEST(EvalRegistration, EveryComputingOpHasAModel) {
  MLIRContext ctx(makeRegistry(true));
  ctx.loadDialect<BraidDialect>();
  int withModel = 0;
  for (RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != BraidDialect::getDialectNamespace())
      continue;
    StringRef op = name.getStringRef();
    bool structural =
        op == "braid.layer" || op == "braid.mesh" || op == "braid.yield";
    EXPECT_EQ(name.hasInterface<EvalOpInterface>(), !structural) << op.str();
    withModel += !structural;
  }
  EXPECT_GE(withModel, 59);
}

TEST(EvalRegistration, MissingRegistrationIsAClearError) {
  MLIRContext ctx(makeRegistry(false));
  std::string errors;
  EXPECT_TRUE(failed(evaluate(ctx, errors)));
  EXPECT_FALSE(hasEvalInterfaceExternalModels(&ctx));
  EXPECT_NE(errors.find("'braid.add' op cannot be evaluated: the braid ops' "
                        "evaluation models are not registered"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("registerEvalInterfaceExternalModels"),
            std::string::npos)
      << errors;
}

} // namespace

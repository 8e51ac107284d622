//===- Passes.td - braid transformation passes -------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_TD
#define BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AutodiffPass : Pass<"braid-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derives the gradient function of a scalar loss, with each "
                "layer's backward split into B and W.";
  let description = [{
    For the function `entry` (a forward pass returning a rank-0 loss as its
    first result), adds a function `<entry>_grad` with the same arguments
    that returns the loss followed by the gradient of every parameter.

    Every op of the new function and of the layers it creates carries
    `braid.phase`: `F` (the forward pass), `B` (gradients of activations,
    on the critical path between pipeline stages) or `W` (gradients of
    parameters, which only need values saved by F and produced by B, so a
    schedule may defer them). Each differentiated layer `@L` becomes three
    layers: `@L.F` (forward; also yields, stacked per instance, the
    activations the backward needs), `@L.B` (run in reverse; yields the input
    gradient and the result gradients W needs) and `@L.W` (yields the
    parameter gradients). The training step therefore stays independent of
    depth.

    Gradient results carry `braid.gradient_of`: the parameter's full name,
    or for a layer parameter a pattern such as `h.{}.fc.weight` whose `{}`
    is the instance; such results are stacked over the instances listed in
    `braid.instances = array<i64: first, count>`.

    Before:
    ```mlir
    func.func @forward(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
      %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x10xf32>
      %l = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
      %loss = braid.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
      return %loss : tensor<f32>
    }
    ```
    After (abridged):
    ```mlir
    func.func @forward_grad(%x: ..., %y: ...)
        -> (tensor<f32>, tensor<8x10xf32> {braid.gradient_of = "w"}) {
      %w = braid.param "w" ... {braid.phase = "F"}
      %l = braid.matmul %x, %w {braid.phase = "F"}
      %loss = braid.cross_entropy %l, %y {braid.phase = "F"}
      %one = braid.constant dense<1.0> : tensor<f32> {braid.phase = "B"}
      %dl = braid.cross_entropy_grad %l, %y, %one {braid.phase = "B"}
      %dw = braid.matmul %x, %dl {braid.phase = "W", transpose_a}
      return %loss, %dw
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The function to differentiate (its first result is the loss).">,
    Option<"wrtArguments", "wrt-arguments", "bool", /*default=*/"false",
           "Also return gradients of the floating-point arguments "
           "(braid.gradient_of = \"arg:<name>\").">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_TD

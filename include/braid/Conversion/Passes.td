//===- Passes.td - braid conversion passes -----------------*- tablegen -*-===//

#ifndef BRAID_CONVERSION_PASSES
#define BRAID_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertBraidToEmitCPass : Pass<"braid-lower-to-emitc", "::mlir::ModuleOp"> {
  let summary = "Lowers a braid program (single-device or per-device) to "
                "EmitC calls of the runtime's kernels and collectives.";
  let description = [{
    Code generation's first step: every `func.func` (or only `entry` and the
    layers it repeats) becomes an `emitc.func` that the C++ emitter
    (`mlir-translate --mlir-to-cpp`) prints as plain C++ against
    `braid/rt/kernels.h` and `braid/rt/program.h`.

    - A tensor becomes a pointer to a row-major buffer (`!emitc.ptr<f32>`,
      `<i32>`, `<i64>`); function results become trailing out-pointer
      arguments. Each op result gets a place in its function's arena
      (`braid_arena_N + offset`, offsets planned from the values' live
      ranges, largest first in the best-fitting gap; the arena is
      allocated on the function's first call and kept), or the buffer of
      an operand that dies at an elementwise op or optimizer update that
      may write in place (`adamw_update` into the parameter slot its
      result is stored to). With `reuse-buffers=false`, each allocation
      site has a `static T *braid_buffer_N`, allocated by
      `braid_rt_program_buffer_<type>` on first use and kept, since
      functions are not reentrant and results leave them by copy.
      `braid.reshape` aliases its operand.
    - Each compute op becomes an `emitc.call_opaque` of its kernel with the
      program's stream (`braid_rt_program_stream()`), the operands, then its
      static shapes and attributes as scalars or
      `static const` shape arrays, then the result buffers (the calling
      convention of `kernels.h`). Kernels that can fail are followed by
      `braid_rt_program_check`, which names the op's location.
    - Parameters live in the global table `braid_params`, one slot per full
      name. `braid_program_init(seed)` allocates and initialises every slot
      from its `#braid.init` under the seed, as braid-eval does.
      `braid.param` reads a slot (no copy); `braid.store_param` copies into
      it.
    - A `braid.layer` becomes a function taking, after its tensors, a
      pointer to the slot numbers of one instance's parameters.
      `braid.repeat` becomes an `emitc.for` over the instances that passes
      the carried values, the instance's slices of the stacked operands and
      results (pointer offsets), and the instance's slot numbers (from a
      static table: instance `i` of prefix `P` uses `P.i.<local name>`).
    - In a per-device program (a module with a `braid.mesh`), collectives
      and their `*_start`/`braid.wait` forms call
      `braid/rt/program_spmd.h` on the communicator of their group of axes
      (a bit mask; `braid_program_init` creates each group's communicator),
      `braid.all_slice` takes this device's block locally, a parameter with
      `block_of` holds and initialises this device's block, and
      vocabulary-parallel ops (`mesh`, `vocab_axes`) combine their
      statistics over the vocabulary group.
    - A `braid.pipeline` whose function carries a `braid.schedule` runs on
      an extra innermost mesh axis `pp` (braidc adds it): its pieces are
      lowered with the entry, and each stage runs its actions of the
      schedule (piece calls, non-blocking sends and receives of what the
      peer's chunks use, tagged by piece) under `if (stage == r)`, keeping
      the means over micro-batches it computed. The ops after it run on the
      stage holding most of their operands (under `if (stage == s)`: a
      stage updates only its own parameters) or on every stage, with the
      operands they need from other stages broadcast first
      (docs/codegen.md, "Pipelines").
    - With `spmd`, a module without a mesh is lowered as a per-rank program
      of one rank (braidc does so for training steps).

    An op without a lowering is an error located at the op.

    ```mlir
    %y = braid.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
    ```
    becomes
    ```mlir
    %site = emitc.get_global @braid_buffer_3 : !emitc.lvalue<!emitc.ptr<f32>>
    %p = emitc.address_of %site : !emitc.lvalue<!emitc.ptr<f32>>
    %y = emitc.call_opaque "braid_rt_program_buffer_f32"(%p, %c512) : (!emitc.ptr<!emitc.ptr<f32>>, i64) -> !emitc.ptr<f32>
    %stream = emitc.literal "braid_rt_program_stream()" : !emitc.ptr<!emitc.opaque<"braid_rt_stream_t">>
    emitc.call_opaque "braid_rt_matmul_f32"(%stream, %x, %w, %c3, %shape0, %c2, %shape1, %false, %false, %y) : (...) -> ()
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "Lower only this function and the layers it repeats (all "
           "functions when empty).">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu or cuda. The generated code calls the same runtime API on "
           "both; on cuda, tensors are device memory, so constants are "
           "uploaded with braid_rt_memory_copy_to_device.">,
    Option<"spmd", "spmd", "bool", /*default=*/"false",
           "Make a per-rank program even without a braid.mesh: include "
           "braid/rt/program_spmd.h and emit the checkpoint slot table, so "
           "that main() runs it on a one-rank runtime context (checkpoints, "
           "data files, traces).">,
    Option<"reuseBuffers", "reuse-buffers", "bool", /*default=*/"true",
           "Plan the buffers of each function: values whose lifetimes do "
           "not overlap share one arena (offsets fixed at compile time), "
           "and elementwise ops and optimizer updates write in place where "
           "an operand dies (braidc --no-buffer-reuse turns it off: every "
           "allocation site its own buffer).">,
  ];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

#endif // BRAID_CONVERSION_PASSES

"""Imports a PyTorch nn.Module into braid IR (docs/importing-pytorch.md).

    from braid.torch import import_module
    imported = import_module(model, {"idx": idx, "targets": targets})
    open("model.mlir", "w").write(imported.mlir)
    imported.save_weights("weights.safetensors")   # keyed by state-dict names

    start_checkpoint(imported.weights, "start")    # braidc program: --resume start
    # ... braid-run -n 4 ./prog --resume start --steps 100 --save trained
    model.load_state_dict(export_state_dict("trained", model))

CLI: python3 -m braid.torch MODULE:FACTORY --batch ... -o model.mlir --weights w.safetensors --checkpoint start
     python3 -m braid.torch export trained MODULE:FACTORY -o state.pt
"""

from braid.torch.export import CheckpointError, export_state_dict, read_checkpoint, start_checkpoint
from braid.torch.importer import SUPPORTED_OPS, Imported, UnsupportedError, import_module

__all__ = ["import_module", "Imported", "UnsupportedError", "SUPPORTED_OPS", "export_state_dict",
           "start_checkpoint", "read_checkpoint", "CheckpointError"]

"""Imports a PyTorch nn.Module into braid IR (docs/importing-pytorch.md).

    from braid.torch import import_module
    imported = import_module(model, {"idx": idx, "targets": targets})
    open("model.mlir", "w").write(imported.mlir)
    imported.save_weights("weights.safetensors")   # keyed by state-dict names

CLI: python3 -m braid.torch MODULE:FACTORY --batch ... -o model.mlir --weights w.safetensors
"""

from braid.torch.importer import SUPPORTED_OPS, Imported, UnsupportedError, import_module

__all__ = ["import_module", "Imported", "UnsupportedError", "SUPPORTED_OPS"]

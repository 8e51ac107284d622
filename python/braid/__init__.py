"""Python side of Braid: model generators and file formats.

Modules:
  braid.ir           builds braid-dialect MLIR text with shape checking.
  braid.models       generates GPT, Llama and MLP models (``python3 -m braid.models``).
  braid.torch        imports a PyTorch nn.Module (``python3 -m braid.torch``).
  braid.safetensors  reads and writes safetensors files (weights, inputs, outputs).
"""

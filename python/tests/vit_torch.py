"""torchvision's VisionTransformer (Debian's python3-torchvision 0.14) in a
small configuration, with cross-entropy over classes: the third model the
braid.torch tests import (test_torch_import_vit.py), and a factory other
tests reuse (make, loss, CONFIG, batch).

torchvision initialises the class token and the classification head to
zeros, which would make the first loss ln(10) whatever the encoder computes
and leave the encoder without a gradient in the first step. make() redraws
them (and the attention's in_proj with std 0.2, so that the attention scale
matters), so that every part of the model shows in the loss and in the first
AdamW step. Not std 0.3 as nanogpt.py: then softmax saturates, many q/k
gradients are rounding noise, and AdamW's first step (about lr * sign(g))
turns that noise into 1e-4 differences between any two correct
implementations.

batch() holds 16 images by default: on 2 images, 5 AdamW steps at lr 1e-2
drive the loss to 0.002, where the relative error of a loss is no longer a
measure of the model.
"""

import torch
import torch.nn.functional as F

# Image 32, patch 8 (16 patches + the class token = 17 positions), 2 encoder blocks, 2 heads of 16.
CONFIG = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
              num_classes=10)


def make(seed=0, **config):
    """A VisionTransformer in training mode (its dropouts are 0.0) with weights drawn from `seed`."""
    import torchvision  # imported here so that importing this file needs only torch
    torch.manual_seed(seed)
    model = torchvision.models.VisionTransformer(**dict(CONFIG, **config))
    with torch.no_grad():
        model.class_token.normal_(0.0, 1.0)
        for name, p in model.named_parameters():
            if name.startswith("heads."):
                p.normal_(0.0, 0.3)
            elif name.endswith("self_attention.in_proj_weight"):
                p.normal_(0.0, 0.2)
    return model.train()


def loss(output, inputs):
    """Cross-entropy of the class logits against inputs["labels"] (the --loss of the CLI)."""
    return F.cross_entropy(output, inputs["labels"])


def batch(seed=1, size=16, **config):
    """{"x": images [size, 3, H, W] float32 (VisionTransformer.forward's parameter name), "labels": [size]}."""
    c = dict(CONFIG, **config)
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(size, 3, c["image_size"], c["image_size"], generator=g),
            "labels": torch.randint(0, c["num_classes"], (size,), generator=g)}

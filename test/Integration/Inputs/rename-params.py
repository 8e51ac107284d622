"""Renames every parameter of a braid model to names that match nothing.

usage: rename-params.py MODEL.mlir -o RENAMED.mlir
       rename-params.py --checkpoint IN_DIR OUT_DIR --model MODEL.mlir

The first form gives the i-th distinct `braid.param` name (in sorted order)
the name `t<i>` and every repeat prefix `p<i>`, so that no parameter or
instance name the model generator writes (attn.q.weight, h.0...) is left;
the program is otherwise unchanged. The second writes a copy of a
checkpoint (a braidc program's --save directory) under the same renaming,
so the renamed program can resume from the same weights and optimizer
state: the names differ, so initial values drawn from them would too.
"""
import argparse
import os
import re
import sys

PARAM = re.compile(r'braid\.param "([^"]+)"')
PREFIX = re.compile(r'prefix = "([^"]+)"')


def mapping(text):
    params = sorted(set(PARAM.findall(text)))
    prefixes = sorted(set(PREFIX.findall(text)))
    return ({name: f"t{i}" for i, name in enumerate(params)},
            {name: f"p{i}" for i, name in enumerate(prefixes)})


def rename_model(text):
    params, prefixes = mapping(text)
    text = PARAM.sub(lambda m: f'braid.param "{params[m.group(1)]}"', text)
    return PREFIX.sub(lambda m: f'prefix = "{prefixes[m.group(1)]}"', text)


def rename_key(key, params, prefixes):
    """KEY is [PREFIX.I.]NAME[SLOT]: the local name the longest that fits."""
    head, rest = "", key
    m = re.match(r"([^.]+)\.(\d+)\.(.*)$", key)
    if m and m.group(1) in prefixes:
        head, rest = f"{prefixes[m.group(1)]}.{m.group(2)}.", m.group(3)
    for name in sorted(params, key=len, reverse=True):
        if rest == name or rest.startswith(name + "."):
            return head + params[name] + rest[len(name):]
    sys.exit(f"rename-params.py: checkpoint tensor {key!r} is no parameter of the model")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("-o", dest="output")
    parser.add_argument("--checkpoint", nargs=2, metavar=("IN", "OUT"))
    args = parser.parse_args()
    with open(args.model) as f:
        text = f.read()
    if not args.checkpoint:
        with open(args.output, "w") as f:
            f.write(rename_model(text))
        return
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
    from braid import safetensors as st
    params, prefixes = mapping(text)
    src, dst = args.checkpoint
    tensors, metadata = st.load_with_metadata(os.path.join(src, "checkpoint.safetensors"))
    renamed = {rename_key(k, params, prefixes): v for k, v in tensors.items()}
    # Checksums are per name: keep only the step.
    meta = {k: v for k, v in (metadata or {}).items() if not k.startswith("braid.fnv1a64.")}
    meta.pop("braid.format", None)
    os.makedirs(dst, exist_ok=True)
    st.save(os.path.join(dst, "checkpoint.safetensors"), renamed, meta)


if __name__ == "__main__":
    main()

"""Renames every parameter of a braid module to p0, p1, ... (in order of
first appearance; optimizer state too, and the gradients' braid.gradient_of),
every layer to L0, L1, ... and every repeat prefix to r0, r1, ...: a model
whose names match nothing the generator or the optimizer uses.

Usage: rename-params.py IN > OUT
"""
import re
import sys

text = open(sys.argv[1]).read()

PARAM = r'(braid\.(?:store_)?param ")([^"]+)(")'
LAYER = r'((?:braid\.layer|braid\.repeat) @)([A-Za-z0-9_.$-]+)()'
PREFIX = r'(prefix = ")([^"]+)(")'
GRADIENT = r'(braid\.gradient_of = ")([^"]+)(")'


def table(pattern, kind):
    names = {}
    for m in re.finditer(pattern, text):
        names.setdefault(m.group(2), f"{kind}{len(names)}")
    return names


params, layers, prefixes = table(PARAM, "p"), table(LAYER, "L"), table(PREFIX, "r")


def gradient(name):
    # "h.{}.attn.q.weight": a layer's parameter under its repeat's prefix.
    if ".{}." in name:
        prefix, local = name.split(".{}.", 1)
        return prefixes.get(prefix, prefix) + ".{}." + params.get(local, local)
    return params.get(name, name)


for pattern, rename in [(PARAM, params.get), (LAYER, layers.get), (PREFIX, prefixes.get), (GRADIENT, gradient)]:
    text = re.sub(pattern, lambda m: m.group(1) + (rename(m.group(2)) or m.group(2)) + m.group(3), text)
sys.stdout.write(text)

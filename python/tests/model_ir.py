"""Reads the parameters out of generated model text, independently of braid.ir."""

import re
from typing import Dict, Tuple

Shape = Tuple[int, ...]


def _shape(type_text: str) -> Shape:
    dims = type_text[len("tensor<"):-1].split("x")[:-1]
    return tuple(int(d) for d in dims)


def param_shapes(text: str) -> Dict[str, Dict[str, Shape]]:
    """For each func.func, the full name -> shape of every parameter it uses.

    Layer-local names are expanded through braid.repeat: instance i of a
    repeat with prefix P names the layer's parameter N as P.i.N.
    """
    local: Dict[str, Dict[str, Shape]] = {}
    funcs: Dict[str, Dict[str, Shape]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"(braid\.layer|func\.func) @(\w+)", line):
            current = (local if m[1] == "braid.layer" else funcs).setdefault(m[2], {})
        elif m := re.search(r'braid\.param "([^"]+)" .* : (tensor<[^>]*>)$', line):
            current[m[1]] = _shape(m[2])
        elif m := re.search(r'braid\.repeat @(\w+)\(.*prefix = "(\w+)", count = (\d+) : i64', line):
            for i in range(int(m[3])):
                current.update({f"{m[2]}.{i}.{n}": s for n, s in local[m[1]].items()})
    return funcs

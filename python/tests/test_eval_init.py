"""Checks braid-eval's parameter and input initialisation against the spec.

docs/model-representation.md defines initial values as a pure function of
(seed, full parameter name, element index); this is that definition in
Python, compared with what braid-eval saves, including the prefix.i.name
naming of braid.repeat instances (with `first`) and generated float inputs.
"""

import math

import numpy as np

from braid import safetensors as st
from braid.ir import ONES, ZEROS, Arg, Module, TensorType, constant, normal, uniform

MASK = (1 << 64) - 1
SEED = 7


def splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def spec_values(seed: int, name: str, kind: str, args: tuple, count: int) -> np.ndarray:
    """The f64 initial values of parameter `name` under the spec's RNG."""
    key = splitmix64(seed ^ fnv1a64(name))

    def unit(i):
        return ((splitmix64((key + i) & MASK) >> 11) + 0.5) * 2.0**-53

    if kind == "normal":
        (std,) = args
        return np.array([std * math.sqrt(-2 * math.log(unit(2 * e))) * math.cos(2 * math.pi * unit(2 * e + 1))
                         for e in range(count)])
    if kind == "uniform":
        lo, hi = args
        return np.array([lo + (hi - lo) * unit(2 * e) for e in range(count)])
    if kind == "constant":
        return np.full(count, args[0])
    return np.full(count, {"zeros": 0.0, "ones": 1.0}[kind])


INIT_SPECS = {"normal": normal, "uniform": uniform, "constant": constant,
              "zeros": lambda: ZEROS, "ones": lambda: ONES}

# Global parameters: name -> (shape, element type, init kind, init arguments).
PARAMS = {
    "n": ((4, 5), "f64", "normal", (0.02,)),
    "u": ((7,), "f64", "uniform", (-0.1, 0.3)),
    "c": ((2,), "f64", "constant", (2.5,)),
    "z": ((2,), "f64", "zeros", ()),
    "o": ((2,), "f64", "ones", ()),
    "emb.f32": ((3, 4), "f32", "normal", (1.0,)),
}


def test_initialisation_follows_spec(tmp_path, braid_eval):
    module = Module()
    vec = TensorType((3,), "f64")
    layer = module.layer("blk", [("x", vec)])
    layer.yield_(layer.add(layer.args[0], layer.param("w", vec, normal(0.5))))
    main = module.func("main", [Arg("x", vec)])
    h = main.repeat(layer, main.args, prefix="blk", count=2, first=2)
    main.return_(h, *(main.param(name, TensorType(shape, element), INIT_SPECS[kind](*args))
                      for name, (shape, element, kind, args) in PARAMS.items()))
    model = tmp_path / "init.mlir"
    model.write_text(str(module))
    braid_eval.run(model, "--entry", "main", "--seed", SEED, "--save-weights", tmp_path / "w.safetensors",
                   "--save-inputs", tmp_path / "in.safetensors", "--save-outputs", tmp_path / "out.safetensors")

    weights = {n: st.to_numpy(t) for n, t in st.load(tmp_path / "w.safetensors").items()}
    assert set(weights) == {"blk.2.w", "blk.3.w", *PARAMS}
    for name, (shape, element, kind, args) in PARAMS.items():
        expected = spec_values(SEED, name, kind, args, math.prod(shape)).reshape(shape)
        if element == "f32":
            assert weights[name].dtype == np.float32
            expected = expected.astype(np.float32)
        np.testing.assert_allclose(weights[name], expected, rtol=1e-14, atol=0, err_msg=name)
    for name in ("blk.2.w", "blk.3.w"):
        np.testing.assert_allclose(weights[name], spec_values(SEED, name, "normal", (0.5,), 3), rtol=1e-14)

    x = st.to_numpy(st.load(tmp_path / "in.safetensors")["x"])
    np.testing.assert_allclose(x, spec_values(SEED, "x", "normal", (1.0,), 3), rtol=1e-14)
    outputs = st.load(tmp_path / "out.safetensors")
    assert set(outputs) == {f"result{i}" for i in range(1 + len(PARAMS))}
    np.testing.assert_allclose(st.to_numpy(outputs["result0"]), x + weights["blk.2.w"] + weights["blk.3.w"],
                               rtol=1e-15)
    for i, name in enumerate(PARAMS, start=1):
        np.testing.assert_array_equal(st.to_numpy(outputs[f"result{i}"]), weights[name])

"""Builds braid-dialect MLIR text, checking shapes as it goes.

The printed syntax follows docs/model-representation.md: every op carries its
full types, ops whose result type equals their operand type print one type
(``braid.relu %x : tensor<...>``), the others a function type
(``braid.add %a, %b : (tensor<...>, tensor<...>) -> tensor<...>``).

    m = Module()
    blk = m.layer("block", [("x", TensorType((2, 16), "f32"))])
    w = blk.param("fc.weight", TensorType((16, 16), "f32"), normal(0.02))
    blk.yield_(blk.relu(blk.matmul(blk.args[0], w)))
    f = m.func("main", [Arg("x", TensorType((2, 16), "f32"))])
    f.return_(f.repeat(blk, [f.args[0]], prefix="layers", count=4))
    print(m)

Shapes are inferred in Python with the dialect's rules (NumPy broadcasting,
matmul batch broadcasting, ...), so a generator bug fails here with a Python
error instead of a verifier error later.
"""

import math
import re
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

FLOAT_TYPES = ("f32", "f64", "bf16", "f16")
INT_TYPES = ("i32", "i64")


class TensorType(NamedTuple):
    """A builtin ranked tensor type, e.g. ``tensor<2x8xf32>``."""

    shape: Tuple[int, ...]
    element: str

    def __str__(self) -> str:
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.element + ">"


class Value(NamedTuple):
    """An SSA value: its name (with the %) and its type."""

    name: str
    type: TensorType

    def __str__(self) -> str:
        return self.name


class Arg(NamedTuple):
    """A func.func argument; `range` sets braid.range for integer inputs,
    `data` braid.data ("tokens" or "labels": what a program's --data fills)."""

    name: str
    type: TensorType
    range: Optional[int] = None
    data: Optional[str] = None


def mlir_float(x: float) -> str:
    """Formats x as an MLIR float literal that round-trips exactly (1.0e-05)."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{x} has no MLIR decimal float literal")
    text = repr(x)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


# Initializer specs for Body.param (the inside of #braid.init<...>).
ZEROS = "zeros"
ONES = "ones"


def normal(std: float) -> str:
    return f"normal({mlir_float(std)})"


def uniform(lo: float, hi: float) -> str:
    return f"uniform({mlir_float(lo)}, {mlir_float(hi)})"


def constant(c: float) -> str:
    return f"constant({mlir_float(c)})"


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> Tuple[int, ...]:
    """NumPy broadcasting of two shapes; ValueError if they do not broadcast."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _i64_array(values: Sequence[int]) -> str:
    return "array<i64: " + ", ".join(str(v) for v in values) + ">"


def _dense(values: Sequence[Union[int, float]], type: TensorType) -> str:
    """A dense elements literal of `type` from flat row-major values."""
    if len(values) != math.prod(type.shape):
        raise ValueError(f"{len(values)} values do not fill {type}")
    fmt = mlir_float if type.element in FLOAT_TYPES else (lambda v: str(int(v)))

    def nest(flat, shape):
        if not shape:
            return fmt(flat[0])
        step = len(flat) // shape[0] if shape[0] else 0
        return "[" + ", ".join(nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"

    return f"dense<{nest(list(values), tuple(type.shape))}>"


def _ftype(operands: Sequence[Value], results: Sequence[TensorType]) -> str:
    ins = ", ".join(str(v.type) for v in operands)
    outs = ", ".join(str(t) for t in results)
    return f"({ins}) -> {outs if len(results) == 1 else '(' + outs + ')'}"


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


class Body:
    """The body of a braid.layer or func.func; one method per op."""

    KEYWORD = ""  # the op that holds the body, set by subclasses

    def __init__(self, name: str, args: Sequence[Arg]):
        self.name = name
        self._names = set()
        self._lines: List[str] = []
        self._arg_specs = list(args)
        self.args = [Value(self._fresh(a.name), a.type) for a in args]
        self.result_types: Optional[List[TensorType]] = None

    # --- plumbing -------------------------------------------------------

    def _fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.$-]", "_", hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, n = base, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return "%" + name

    def _op(self, hint: str, text: str, type: TensorType) -> Value:
        value = Value(self._fresh(hint), type)
        self._lines.append(f"{value.name} = {text}")
        return value

    def _terminate(self, keyword: str, values: Sequence[Value]) -> None:
        if self.result_types is not None:
            raise ValueError(f"@{self.name} already has a terminator")
        self.result_types = [v.type for v in values]
        names = ", ".join(v.name for v in values)
        types = ", ".join(str(v.type) for v in values)
        self._lines.append(f"{keyword} {names} : {types}")

    def _signature(self) -> str:
        if self.result_types is None:
            raise ValueError(f"@{self.name} has no terminator")
        args = ", ".join(self._arg_text(v, spec) for v, spec in zip(self.args, self._arg_specs))
        results = ", ".join(str(t) for t in self.result_types)
        if len(self.result_types) != 1:
            results = f"({results})"
        return f"{self.KEYWORD} @{self.name}({args}) -> {results}"

    def _arg_text(self, value: Value, spec: Arg) -> str:
        return f"{value.name}: {value.type}"

    def __str__(self) -> str:
        body = "".join(f"  {line}\n" for line in self._lines)
        return f"{self._signature()} {{\n{body}}}\n"

    @staticmethod
    def _check_float(*values: Value) -> str:
        element = values[0].type.element
        for v in values:
            if v.type.element not in FLOAT_TYPES:
                raise ValueError(f"{v.name}: expected a float tensor, got {v.type}")
            if v.type.element != element:
                raise ValueError(f"element types differ: {values[0].type} vs {v.type}")
        return element

    # --- parameters and layers ------------------------------------------

    def param(self, name: str, type: TensorType, init: str, hint: Optional[str] = None) -> Value:
        """Declares parameter `name` (local inside a layer) with `init`."""
        if type.element not in FLOAT_TYPES:
            raise ValueError(f"parameter {name!r}: expected a float tensor, got {type}")
        text = f'braid.param "{name}" {{init = #braid.init<{init}>}} : {type}'
        return self._op(hint or name, text, type)

    def repeat(self, layer: "Body", inputs: Sequence[Value], prefix: str, count: int,
               first: Optional[int] = None, hint: str = "h",
               instance_names: Optional[Sequence[str]] = None) -> Union[Value, List[Value]]:
        """Applies `layer` `count` times; instance i names params prefix.i.*, or
        prefix.<instance_names[i - first]>.* (e.g. an nn.Sequential's child names)."""
        if layer.result_types is None or [v.type for v in layer.args] != layer.result_types:
            raise ValueError(f"@{layer.name} must yield the types of its arguments to be repeated")
        if [v.type for v in inputs] != layer.result_types:
            raise ValueError(f"inputs do not match the arguments of @{layer.name}")
        attrs = f'prefix = "{prefix}", count = {count} : i64'
        if first is not None:
            attrs += f", first = {first} : i64"
        if instance_names is not None:
            names = list(instance_names)
            if len(names) != count or len(set(names)) != count or \
                    any(not n or "." in n or " " in n or '"' in n or "\\" in n for n in names):
                raise ValueError(f"instance_names {names!r}: {count} distinct names without dots, spaces, "
                                 f"quotes or backslashes expected")
            attrs += ", instance_names = [" + ", ".join(f'"{n}"' for n in names) + "]"
        operands = ", ".join(v.name for v in inputs)
        text = f"braid.repeat @{layer.name}({operands}) {{{attrs}}} : {_ftype(inputs, layer.result_types)}"
        if len(inputs) == 1:
            return self._op(hint, text, layer.result_types[0])
        base = self._fresh(hint)
        self._lines.append(f"{base}:{len(inputs)} = {text}")
        return [Value(f"{base}#{i}", t) for i, t in enumerate(layer.result_types)]

    # --- linear algebra and elementwise ---------------------------------

    def matmul(self, a: Value, b: Value, transpose_a: bool = False, transpose_b: bool = False,
               hint: str = "mm") -> Value:
        element = self._check_float(a, b)
        sa, sb = a.type.shape, b.type.shape
        if len(sa) < 2 or len(sb) < 2:
            raise ValueError(f"matmul operands need rank >= 2, got {a.type} and {b.type}")
        m, ka = (sa[-1], sa[-2]) if transpose_a else (sa[-2], sa[-1])
        kb, n = (sb[-1], sb[-2]) if transpose_b else (sb[-2], sb[-1])
        if ka != kb:
            raise ValueError(f"matmul contraction sizes differ: {a.type} and {b.type}")
        result = TensorType(broadcast_shapes(sa[:-2], sb[:-2]) + (m, n), element)
        flags = [f for f, on in (("transpose_a", transpose_a), ("transpose_b", transpose_b)) if on]
        attrs = " {" + ", ".join(flags) + "}" if flags else ""
        return self._op(hint, f"braid.matmul {a}, {b}{attrs} : {_ftype([a, b], [result])}", result)

    def _binary(self, op: str, a: Value, b: Value, hint: str) -> Value:
        element = self._check_float(a, b)
        result = TensorType(broadcast_shapes(a.type.shape, b.type.shape), element)
        return self._op(hint, f"braid.{op} {a}, {b} : {_ftype([a, b], [result])}", result)

    def add(self, a: Value, b: Value, hint: str = "add") -> Value:
        return self._binary("add", a, b, hint)

    def sub(self, a: Value, b: Value, hint: str = "sub") -> Value:
        return self._binary("sub", a, b, hint)

    def mul(self, a: Value, b: Value, hint: str = "mul") -> Value:
        return self._binary("mul", a, b, hint)

    def div(self, a: Value, b: Value, hint: str = "div") -> Value:
        return self._binary("div", a, b, hint)

    def _unary(self, op: str, x: Value, hint: str, attrs: str = "") -> Value:
        self._check_float(x)
        return self._op(hint, f"braid.{op} {x}{attrs} : {x.type}", x.type)

    def neg(self, x: Value, hint: str = "neg") -> Value:
        return self._unary("neg", x, hint)

    def exp(self, x: Value, hint: str = "exp") -> Value:
        return self._unary("exp", x, hint)

    def sqrt(self, x: Value, hint: str = "sqrt") -> Value:
        return self._unary("sqrt", x, hint)

    def rsqrt(self, x: Value, hint: str = "rsqrt") -> Value:
        return self._unary("rsqrt", x, hint)

    def relu(self, x: Value, hint: str = "relu") -> Value:
        return self._unary("relu", x, hint)

    def silu(self, x: Value, hint: str = "silu") -> Value:
        return self._unary("silu", x, hint)

    def gelu(self, x: Value, approximation: str = "tanh", hint: str = "gelu") -> Value:
        if approximation not in ("tanh", "exact"):
            raise ValueError(f"gelu approximation must be tanh or exact, got {approximation!r}")
        return self._unary(f"gelu {approximation}", x, hint)

    def softmax(self, x: Value, axis: int = -1, hint: str = "softmax") -> Value:
        axis = _axis(axis, len(x.type.shape))
        return self._unary("softmax", x, hint, f" {{axis = {axis} : i64}}")

    def rotary(self, x: Value, base: float = 10000.0, inverse: bool = False, hint: str = "rope") -> Value:
        if len(x.type.shape) != 4 or x.type.shape[3] % 2:
            raise ValueError(f"rotary needs [B, S, A, D] with D even, got {x.type}")
        flags = ", inverse" if inverse else ""
        return self._unary("rotary", x, hint, f" {{base = {mlir_float(base)} : f64{flags}}}")

    # --- normalisation, embedding, attention, loss ----------------------

    def _check_scale(self, x: Value, *scales: Value) -> None:
        for s in scales:
            if s.type.shape != x.type.shape[-1:]:
                raise ValueError(f"{s.name}: expected [{x.type.shape[-1]}] to normalise {x.type}, got {s.type}")

    def layer_norm(self, x: Value, g: Value, b: Value, epsilon: float = 1e-5, hint: str = "ln") -> Value:
        self._check_float(x, g, b)
        self._check_scale(x, g, b)
        text = (f"braid.layer_norm {x}, {g}, {b} {{epsilon = {mlir_float(epsilon)} : f64}}"
                f" : {_ftype([x, g, b], [x.type])}")
        return self._op(hint, text, x.type)

    def rms_norm(self, x: Value, g: Value, epsilon: float = 1e-5, hint: str = "rms") -> Value:
        self._check_float(x, g)
        self._check_scale(x, g)
        text = (f"braid.rms_norm {x}, {g} {{epsilon = {mlir_float(epsilon)} : f64}}"
                f" : {_ftype([x, g], [x.type])}")
        return self._op(hint, text, x.type)

    def embedding(self, table: Value, ids: Value, hint: str = "emb") -> Value:
        element = self._check_float(table)
        if len(table.type.shape) != 2 or ids.type.element not in INT_TYPES:
            raise ValueError(f"embedding needs a [V, H] table and integer ids, got {table.type}, {ids.type}")
        result = TensorType(tuple(ids.type.shape) + (table.type.shape[1],), element)
        return self._op(hint, f"braid.embedding {table}, {ids} : {_ftype([table, ids], [result])}", result)

    def attention(self, q: Value, k: Value, v: Value, causal: bool = False,
                  scale: Optional[float] = None, hint: str = "attn") -> Value:
        self._check_float(q, k, v)
        sq, sk = q.type.shape, k.type.shape
        if len(sq) != 4 or sk != v.type.shape or len(sk) != 4:
            raise ValueError(f"attention needs q [B,S,Hq,D], k = v [B,T,Hkv,D]; got {q.type}, {k.type}, {v.type}")
        if sq[0] != sk[0] or sq[3] != sk[3] or sq[2] % sk[2]:
            raise ValueError(f"attention q {q.type} does not fit k/v {k.type}")
        if causal and sq[1] != sk[1]:
            raise ValueError(f"causal attention needs S = T, got {q.type} and {k.type}")
        attrs = (["causal"] if causal else []) + ([f"scale = {mlir_float(scale)} : f64"] if scale is not None else [])
        attr_text = " {" + ", ".join(attrs) + "}" if attrs else ""
        return self._op(hint, f"braid.attention {q}, {k}, {v}{attr_text} : {_ftype([q, k, v], [q.type])}", q.type)

    def cross_entropy(self, logits: Value, labels: Value, hint: str = "loss") -> Value:
        element = self._check_float(logits)
        if labels.type.element not in INT_TYPES or tuple(labels.type.shape) != tuple(logits.type.shape[:-1]):
            raise ValueError(f"cross_entropy labels {labels.type} do not fit logits {logits.type}")
        result = TensorType((), element)
        return self._op(hint, f"braid.cross_entropy {logits}, {labels} : {_ftype([logits, labels], [result])}", result)

    # --- shapes, reductions, constants ----------------------------------

    def reshape(self, x: Value, shape: Sequence[int], hint: str = "reshape") -> Value:
        result = TensorType(tuple(shape), x.type.element)
        if math.prod(shape) != math.prod(x.type.shape):
            raise ValueError(f"reshape {x.type} -> {result} changes the element count")
        return self._op(hint, f"braid.reshape {x} : {_ftype([x], [result])}", result)

    def transpose(self, x: Value, permutation: Sequence[int], hint: str = "transpose") -> Value:
        if sorted(permutation) != list(range(len(x.type.shape))):
            raise ValueError(f"{list(permutation)} is not a permutation of the dims of {x.type}")
        result = TensorType(tuple(x.type.shape[p] for p in permutation), x.type.element)
        text = f"braid.transpose {x} {{permutation = {_i64_array(permutation)}}} : {_ftype([x], [result])}"
        return self._op(hint, text, result)

    def reduce(self, kind: str, x: Value, axes: Sequence[int], keep_dims: bool = False,
               hint: str = "reduce") -> Value:
        if kind not in ("sum", "mean", "max"):
            raise ValueError(f"reduce kind must be sum, mean or max, got {kind!r}")
        self._check_float(x)
        rank = len(x.type.shape)
        axes = sorted({_axis(a, rank) for a in axes})
        if keep_dims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.type.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.type.shape) if i not in axes)
        result = TensorType(shape, x.type.element)
        attrs = f"axes = {_i64_array(axes)}" + (", keep_dims" if keep_dims else "")
        return self._op(hint, f"braid.reduce {kind} {x} {{{attrs}}} : {_ftype([x], [result])}", result)

    def broadcast(self, x: Value, shape: Sequence[int], hint: str = "bcast") -> Value:
        if broadcast_shapes(x.type.shape, shape) != tuple(shape):
            raise ValueError(f"{x.type} does not broadcast to {list(shape)}")
        result = TensorType(tuple(shape), x.type.element)
        return self._op(hint, f"braid.broadcast {x} : {_ftype([x], [result])}", result)

    def slice(self, x: Value, start: Sequence[int], limit: Sequence[int],
              stride: Optional[Sequence[int]] = None, hint: str = "slice") -> Value:
        steps = stride or [1] * len(start)
        if not len(start) == len(limit) == len(steps) == len(x.type.shape):
            raise ValueError(f"slice start/limit/stride must have one entry per dim of {x.type}")
        for s, l, st, d in zip(start, limit, steps, x.type.shape):
            if not (0 <= s <= l <= d and st > 0):
                raise ValueError(f"bad slice {list(start)}:{list(limit)}:{list(steps)} of {x.type}")
        shape = tuple(-(-(l - s) // st) for s, l, st in zip(start, limit, steps))
        result = TensorType(shape, x.type.element)
        attrs = f"start = {_i64_array(start)}, limit = {_i64_array(limit)}"
        if stride is not None:
            attrs += f", stride = {_i64_array(stride)}"
        return self._op(hint, f"braid.slice {x} {{{attrs}}} : {_ftype([x], [result])}", result)

    def concat(self, values: Sequence[Value], axis: int, hint: str = "concat") -> Value:
        first = values[0].type
        axis = _axis(axis, len(first.shape))
        for v in values:
            same = [d for i, d in enumerate(v.type.shape) if i != axis]
            if v.type.element != first.element or len(v.type.shape) != len(first.shape) or \
                    same != [d for i, d in enumerate(first.shape) if i != axis]:
                raise ValueError(f"concat along {axis}: {v.type} does not match {first}")
        shape = list(first.shape)
        shape[axis] = sum(v.type.shape[axis] for v in values)
        result = TensorType(tuple(shape), first.element)
        operands = ", ".join(v.name for v in values)
        return self._op(hint, f"braid.concat {operands} {{axis = {axis} : i64}} : {_ftype(values, [result])}", result)

    def constant(self, values: Sequence[Union[int, float]], type: TensorType, hint: str = "cst") -> Value:
        """A constant from flat row-major `values`."""
        return self._op(hint, f"braid.constant {_dense(values, type)} : {type}", type)


class Layer(Body):
    """A ``braid.layer``: define it once, apply it with Body.repeat."""

    KEYWORD = "braid.layer"

    def __init__(self, name: str, args: Sequence[Tuple[str, TensorType]]):
        super().__init__(name, [Arg(n, t) for n, t in args])

    def yield_(self, *values: Value) -> None:
        self._terminate("braid.yield", values)


class Func(Body):
    """A ``func.func`` entry point; arguments carry braid.name (and braid.range, braid.data)."""

    KEYWORD = "func.func"

    def _arg_text(self, value: Value, spec: Arg) -> str:
        attrs = [f'braid.name = "{spec.name}"']
        if spec.range is not None:
            attrs.append(f"braid.range = {spec.range} : i64")
        if spec.data is not None:
            attrs.append(f'braid.data = "{spec.data}"')
        return f"{value.name}: {value.type} {{{', '.join(attrs)}}}"

    def return_(self, *values: Value) -> None:
        self._terminate("return", values)


class Module:
    """A list of layers and functions, printed in the order they were added."""

    def __init__(self):
        self._bodies: List[Body] = []

    def layer(self, name: str, args: Sequence[Tuple[str, TensorType]]) -> Layer:
        layer = Layer(name, args)
        self._bodies.append(layer)
        return layer

    def func(self, name: str, args: Sequence[Arg]) -> Func:
        func = Func(name, args)
        self._bodies.append(func)
        return func

    def __str__(self) -> str:
        return "\n".join(str(b) for b in self._bodies)

"""Imports a PyTorch nn.Module into braid IR by running it once.

Tracing: one forward (and the loss) runs under a TorchDispatchMode, which sees
every ATen op that actually executes, with concrete shapes; forward hooks on
every submodule say which module each op belongs to. Nothing is re-derived
from Python source, so code that fx.symbolic_trace rejects (``B, T, C =
x.size()``) is fine. Emission then walks back from the loss, so ops whose
results are not used (layer_norm's saved mean, a detach for autograd) vanish.

Values: example inputs become func arguments named after forward's
parameters; parameters are recognised by identity and keep their
named_parameters() name (tied weights: one tensor, one name); anything that
depends on neither (buffers, torch.arange, Python scalars) is a constant,
folded by PyTorch at trace time and written as a braid.constant.

Layers: the children of an nn.ModuleList (or of an nn.Sequential with two or
more) that run once each, in order, each taking and returning one tensor of
the same type, with identical op sequences, become one braid.layer applied by
braid.repeat with the container's path as prefix and, where a Sequential
names its children other than by their index (torchvision's encoder_layer_i),
those names as instance_names, so that every instance's parameters are
PATH.CHILD.NAME, the state-dict keys.
Anything else is emitted inline, which is the same model.

Patterns: nn.Linear's view/addmm/view is one matmul on [..., K]; torch.matmul's
expand/view/bmm/view is one batched matmul; explicit causal attention is one
braid.attention (see _causal_attention), with grouped KV heads unrepeated;
RMSNorm written out is braid.rms_norm (_rms_norm); x * cos + rotate_half(x) *
sin with braid's tables is braid.rotary (_rotary_match); F.cross_entropy's
log_softmax + nll_loss is braid.cross_entropy; nn.MultiheadAttention's
bmm/softmax/bmm is braid.attention (_mha_attention); a convolution with stride =
kernel (a patch embedding) is one matmul over patches (_patch_matmul).
fuse=False keeps the attention, RMSNorm and rotary patterns op by op. See docs/importing-pytorch.md.
"""

import inspect
import math
import os
import sys
import traceback
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from braid.ir import Arg, Body, Module, TensorType, Value, normal

aten = torch.ops.aten

_ELEMENT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
            torch.int32: "i32", torch.int64: "i64"}
_SAFETENSORS = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.int32: "I32",
                torch.int64: "I64"}
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


class UnsupportedError(Exception):
    """An op or structure braid cannot represent; the message locates it."""




class Node:
    """One traced tensor: an op result, an input, a parameter or a constant."""

    def __init__(self, kind: str, tensor: torch.Tensor, op=None, args=(), kwargs=None, index=0,
                 where: str = "", module: str = "", name: str = "", instance=()):
        self.kind = kind  # "op", "input", "param", "const"
        self.op, self.args, self.kwargs, self.index = op, args, kwargs or {}, index
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype
        self.where, self.module, self.name = where, module, name
        self.instance = instance  # the (container path, child index) calls it runs inside, outermost first
        self.value = tensor if kind == "const" else None  # read after tracing, never cloned inside it
        self.seq = 0

    def describe(self) -> str:
        return f"{self.op} in module '{self.module or '<root>'}' at {self.where or '?'}"


class Ref(NamedTuple):
    node: Node


class Imported(NamedTuple):
    """The result of import_module: IR text and the weights by state-dict name."""

    mlir: str
    weights: Dict[str, torch.Tensor]
    layers: List[str]  # the ModuleList/Sequential paths that became braid.repeat

    def save_weights(self, path: str) -> None:
        from braid import safetensors as st
        tensors = {}
        for name, t in self.weights.items():
            if t.dtype not in _SAFETENSORS:
                raise UnsupportedError(f"parameter {name}: no safetensors dtype for {t.dtype}")
            tensors[name] = st.from_numpy(t.detach().cpu().numpy(), _SAFETENSORS[t.dtype])
        st.save(path, tensors)


def _source_line() -> str:
    """The innermost frame of user code (not torch, not this importer)."""
    for frame in reversed(traceback.extract_stack()):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_TORCH_DIR) and not path.startswith(_HERE):
            return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return "?"


class _Tracer(TorchDispatchMode):
    def __init__(self, params: Dict[int, str], buffers: Dict[int, str]):
        super().__init__()
        self.params, self.buffers = params, buffers
        self.nodes: Dict[int, Node] = {}
        self.keep: List[torch.Tensor] = []  # keeps traced tensors alive so ids stay unique
        self.order: List[Node] = []
        self.modules: List[str] = []  # the module call stack
        self.instances: List[Tuple[str, int]] = []  # active ModuleList/Sequential child calls
        self.calls: List[dict] = []  # ModuleList/Sequential child calls, in order of their start
        self.open: List[dict] = []  # the calls not yet returned, innermost last

    def register(self, tensor: torch.Tensor, node: Node) -> Node:
        self.keep.append(tensor)
        self.nodes[id(tensor)] = node
        node.seq = len(self.order)
        self.order.append(node)
        return node

    def node_of(self, t: torch.Tensor) -> Node:
        node = self.nodes.get(id(t))
        if node is not None:
            return node
        if id(t) in self.params:
            return self.register(t, Node("param", t, name=self.params[id(t)]))
        if t.requires_grad:
            raise UnsupportedError(f"a tensor that requires grad but is not a parameter of the module "
                               f"(shape {list(t.shape)}) is used at {_source_line()}")
        # A buffer, a tensor attribute or a wrapped Python number: its value is fixed.
        return self.register(t, Node("const", t, name=self.buffers.get(id(t), "")))

    def _where(self) -> Tuple[str, str, Tuple[Tuple[str, int], ...]]:
        return _source_line(), (self.modules[-1] if self.modules else ""), tuple(self.instances)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)

        def wrap(a):
            if isinstance(a, torch.Tensor):
                return Ref(self.node_of(a))
            if isinstance(a, (list, tuple)):
                return type(a)(wrap(x) for x in a)
            return a

        wargs, wkwargs = wrap(args), {k: wrap(v) for k, v in kwargs.items()}
        refs = [a for a in _flatten(wargs) + _flatten(list(wkwargs.values())) if isinstance(a, Ref)]
        constant = all(r.node.kind == "const" for r in refs)
        where, module, instance = self._where()
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                kind = "const" if constant else "op"
                self.register(o, Node(kind, o, op=func, args=wargs, kwargs=wkwargs, index=i,
                                      where=where, module=module, instance=instance))
        return out


def _flatten(x) -> list:
    if isinstance(x, (list, tuple)) and not isinstance(x, Ref):
        return [y for e in x for y in _flatten(e)]
    return [x]


def _install_hooks(module: torch.nn.Module, tracer: _Tracer) -> list:
    # The children of an nn.ModuleList or nn.Sequential (other than the root) may become a braid.repeat;
    # every such call is recorded, nested ones too, so that a list inside a container whose children
    # differ can still be folded.
    containers = {name: m for name, m in module.named_modules()
                  if name and isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential))}
    handles = []
    for name, m in module.named_modules():
        parent, _, child = name.rpartition(".")
        siblings = list(containers[parent]._modules) if parent in containers else []
        index = siblings.index(child) if child in siblings else None
        sequential = isinstance(containers.get(parent), torch.nn.Sequential)

        def pre(mod, inputs, name=name, parent=parent, child=child, index=index, sequential=sequential):
            tracer.modules.append(name)
            if index is not None:
                ins = [tracer.node_of(t) for t in _flatten(list(inputs)) if isinstance(t, torch.Tensor)]
                call = dict(list=parent, index=index, child=child, sequential=sequential, inputs=ins,
                            start=len(tracer.order))
                tracer.calls.append(call)
                tracer.open.append(call)
                tracer.instances.append((parent, index))

        def post(mod, inputs, output, index=index):
            tracer.modules.pop()
            if index is not None:
                tracer.instances.pop()
                call = tracer.open.pop()
                outs = _flatten(list(output) if isinstance(output, (list, tuple)) else [output])
                call["outputs"] = [tracer.node_of(t) for t in outs if isinstance(t, torch.Tensor)]
                call["end"] = len(tracer.order)

        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    return handles


def _element(node: Node) -> str:
    if node.dtype not in _ELEMENT:
        raise UnsupportedError(f"dtype {node.dtype} of a value of {node.describe()} has no braid type")
    return _ELEMENT[node.dtype]


def _ttype(node: Node) -> TensorType:
    return TensorType(node.shape, _element(node))


def _hex_constant(value: torch.Tensor) -> str:
    """A dense literal holding the exact bytes (also -inf, which has no decimal literal)."""
    array = value.detach().cpu().contiguous().numpy()
    data = array.astype(array.dtype.newbyteorder("<")).tobytes()
    return f'dense<"0x{data.hex().upper()}">'


class _Emitter:
    """Writes braid ops for traced nodes into one body, on demand."""

    def __init__(self, body: Body, values: Dict[int, Value], local_prefix: Optional[str] = None,
                 owner: Optional[Tuple[str, int]] = None, importer=None):
        self.body, self.values = body, values
        self.local_prefix, self.owner, self.importer = local_prefix, owner, importer
        self.attention: Dict[int, Value] = {}  # id(node of att @ v) -> braid.attention [B, T, H, D]
        self.patches: Dict[int, Value] = {}  # id(patch-embedding convolution) -> its [B, P, O] matmul
        self.rotary: Dict[int, Tuple[Value, int]] = {}  # id(x * cos + rotate_half(x) * sin) -> [B, T, H, D], position dim

    # --- leaves ----------------------------------------------------------

    def value(self, node: Node) -> Value:
        if id(node) in self.values:
            return self.values[id(node)]
        if node.kind == "param":
            name = node.name
            if self.local_prefix is not None:
                if not name.startswith(self.local_prefix):
                    raise _NotRepeatable(f"parameter {name} is not under {self.local_prefix}")
                name = name[len(self.local_prefix):]
            shape = node.shape
            init = ("ones" if name.endswith("weight") else "zeros") if len(shape) == 1 else normal(0.02)
            v = self.body.param(name, _ttype(node), init)
        elif node.kind == "const":
            v = self.constant(node.value)
        elif node.kind == "input":
            raise UnsupportedError(f"input {node.name} is not an argument of this body")
        else:
            if self.owner is not None and self.owner not in node.instance:
                raise _NotRepeatable(f"{node.describe()} is computed outside the repeated child")
            repeat = self.importer.repeat_for(node) if self.owner is None else None
            v = repeat(self) if repeat else self.emit(node)
        self.values[id(node)] = v
        return v

    def constant(self, value: torch.Tensor, dtype: Optional[torch.dtype] = None) -> Value:
        if dtype is not None:
            value = value.to(dtype)
        if value.dtype not in _ELEMENT:
            raise UnsupportedError(f"a constant of dtype {value.dtype} has no braid type")
        t = TensorType(tuple(value.shape), _ELEMENT[value.dtype])
        return self.body._op("cst", f"braid.constant {_hex_constant(value)} : {t}", t)

    def operand(self, a, like: Optional[Node] = None) -> Value:
        """A tensor operand; a Python number becomes a constant of like's dtype."""
        if isinstance(a, Ref):
            return self.value(a.node)
        if isinstance(a, (int, float)) and like is not None:
            return self.constant(torch.tensor(a, dtype=like.dtype))
        raise UnsupportedError(f"expected a tensor operand, got {a!r}")

    # --- ops -------------------------------------------------------------

    def emit(self, node: Node) -> Value:
        op, a = node.op, node.args
        handler = _HANDLERS.get(op)
        if handler is None:
            raise UnsupportedError(f"aten op {op} has no braid equivalent: used by module "
                               f"'{node.module or '<root>'}' at {node.where}")
        v = handler(self, node, *a, **node.kwargs)
        if tuple(v.type.shape) != node.shape:
            raise UnsupportedError(f"internal: {op} gave {v.type}, PyTorch gave {list(node.shape)} "
                               f"({node.describe()})")
        return v


class _NotRepeatable(Exception):
    pass


def _is(node: Node, *ops) -> bool:
    return node.kind == "op" and node.op in ops


def _reshape(e: _Emitter, node: Node, x, *rest, **kw) -> Value:
    src = x.node
    # Linear on [..., K]: view(x -> 2-D) @ W^T (+ b) -> view back: one matmul on x.
    if _is(src, aten.addmm.default, aten.mm.default) and len(node.shape) > 2:
        mm_args = src.args if src.op is aten.mm.default else src.args[1:]
        a2, w = mm_args[0].node, mm_args[1].node
        if _is(a2, aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default) and \
                a2.args[0].node.shape[:-1] == node.shape[:-1] and _is(w, aten.t.default) and \
                not src.kwargs and (src.op is aten.mm.default or src.args[3:] in ((), (1, 1))):
            y = e.body.matmul(e.value(a2.args[0].node), e.value(w.args[0].node), transpose_b=True)
            if src.op is aten.addmm.default:
                y = e.body.add(y, e.value(src.args[0].node))
            return y
    # Batched matmul on [..., M, K]: bmm of operands flattened to 3-D, viewed back.
    if _is(src, aten.bmm.default) and len(node.shape) > 3:
        a4, b4 = (_unflatten(r.node, node.shape[:-2]) for r in src.args)
        if a4 is not None and b4 is not None:
            fused = _fused_attention(e, node)
            if fused is not None:
                return e.body.transpose(fused, [0, 2, 1, 3], hint="attn_bhsd")
            (x, ta), (w, tb) = _matmul_operand(e, Ref(a4)), _matmul_operand(e, Ref(b4))
            return e.body.matmul(x, w, transpose_a=ta, transpose_b=tb)
    v = e.value(src)
    return v if tuple(v.type.shape) == node.shape else e.body.reshape(v, node.shape)


def _unflatten(n: Node, batch: Tuple[int, ...]) -> Optional[Node]:
    """The [*batch, M, K] tensor that torch.matmul flattened into bmm's 3-D operand n, if any."""
    if not _is(n, aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default):
        return None
    m = n.args[0].node
    while _is(m, aten.clone.default) or (_is(m, aten.expand.default) and m.args[0].node.shape == m.shape):
        m = m.args[0].node
    return m if m.shape[:-2] == batch and m.shape[-2:] == n.shape[-2:] else None


def _identity(e, node, x, *rest, **kw):
    return e.value(x.node)


def _expand(e, node, x, size, **kw):
    v = e.value(x.node)
    return v if tuple(v.type.shape) == node.shape else e.body.broadcast(v, node.shape)


def _cat(e, node, tensors, dim=0):
    parts = [e.value(t.node) for t in tensors if t.node.shape != (0,)]  # torch.cat skips 1-D empties
    return parts[0] if len(parts) == 1 else e.body.concat(parts, dim % len(node.shape))


def _repeat_factor(index: torch.Tensor, n: int) -> Optional[int]:
    """r if index is [0]*r + [1]*r + ... + [n-1]*r (repeat_interleave's index), else None."""
    if index.dim() != 1 or index.numel() % n:
        return None
    r = index.numel() // n
    return r if torch.equal(index.cpu(), torch.arange(n).repeat_interleave(r)) else None


def _index_select(e, node, x, dim, index):
    if index.node.kind != "const":
        raise UnsupportedError(f"{node.describe()}: indices that depend on the inputs; braid gathers "
                               f"rows of an embedding table only")
    shape, idx = x.node.shape, index.node.value.to(torch.int64).reshape(-1)
    dim %= len(shape)
    v = e.value(x.node)
    r = _repeat_factor(idx, shape[dim])
    if r is not None:  # repeat_interleave: insert a dim of r after dim, broadcast, merge
        inner = shape[:dim + 1] + (1,) + shape[dim + 1:]
        wide = shape[:dim + 1] + (r,) + shape[dim + 1:]
        return e.body.reshape(e.body.broadcast(e.body.reshape(v, inner), wide), node.shape)
    # Any other constant index: slices of its ascending runs, concatenated.
    runs: List[List[int]] = []
    for i in idx.tolist():
        if runs and i == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([i, i + 1])
    parts = []
    for start, limit in runs:
        starts, limits = [0] * len(shape), list(shape)
        starts[dim], limits[dim] = start, limit
        parts.append(e.body.slice(v, starts, limits))
    return parts[0] if len(parts) == 1 else e.body.concat(parts, dim)


def _pow(e, node, x, exponent):
    v = e.value(x.node)
    if exponent == 2:
        return e.body.mul(v, v)  # what PyTorch computes for x ** 2
    if exponent == 1:
        return v
    if exponent == 0.5:
        return e.body.sqrt(v)
    if exponent == -0.5:
        return e.body.rsqrt(v)
    raise UnsupportedError(f"{node.describe()}: exponent {exponent!r}; braid has no pow, only exponents "
                           f"1, 2, 0.5 and -0.5 are mapped")


def _heads_of(n: Node) -> Optional[Node]:
    """X [B, T, H, D] if n is X.transpose(1, 2), as attention code writes q, k and v."""
    if _is(n, aten.transpose.int) and len(n.shape) == 4 and {n.args[1] % 4, n.args[2] % 4} == {1, 2}:
        return n.args[0].node
    return None


def _fused_attention(e, node: Node) -> Optional[Value]:
    """braid.attention [B, T, H, D] for node = view(bmm(...)) computing attention, or None."""
    if not (e.importer.fuse_attention and e.importer.fuse):
        return None
    if id(node) in e.attention:
        return e.attention[id(node)]
    if not _is(node, aten._unsafe_view.default, aten.view.default) or len(node.shape) != 4 or \
            not _is(node.args[0].node, aten.bmm.default):
        return None
    a4, b4 = (_unflatten(r.node, node.shape[:-2]) for r in node.args[0].node.args)
    if a4 is None or b4 is None:
        return None
    fused = _causal_attention(e, a4, b4)
    if fused is not None:
        e.attention[id(node)] = fused
    return fused


def _causal_attention(e, probs: Node, v4: Node) -> Optional[Value]:
    """softmax(masked_fill((q @ k^T) * s, causal, -inf)) @ v as one braid.attention, or None.

    Matched only exactly: q, k, v are [B, T, H, D] tensors transposed to
    [B, H, T, D], the mask is a constant equal to "key after query" and the
    fill is -inf; anything else stays op by op (the same model)."""
    if not _is(probs, aten._softmax.default) or probs.args[1] % 4 != 3:
        return None
    scores, scale = _causally_masked(probs.args[0].node), 1.0
    if scores is None:
        return None
    if _is(scores, aten.mul.Tensor, aten.div.Tensor) and isinstance(scores.args[1], float):
        scale = scores.args[1] if scores.op is aten.mul.Tensor else 1.0 / scores.args[1]
        scores = scores.args[0].node
    if not _is(scores, aten._unsafe_view.default, aten.view.default) or \
            not _is(scores.args[0].node, aten.bmm.default):
        return None
    q4, kt4 = (_unflatten(r.node, scores.shape[:-2]) for r in scores.args[0].node.args)
    if q4 is None or kt4 is None or not _is(kt4, aten.transpose.int) or \
            {kt4.args[1] % 4, kt4.args[2] % 4} != {2, 3}:
        return None
    if len(q4.shape) != 4:
        return None
    q, k, v = (_bthd(r, e.importer.fuse) for r in (q4, kt4.args[0].node, v4))
    if k[2] != v[2] or q[2][2] % k[2][2]:
        return None
    return e.body.attention(*(_bthd_value(e, x) for x in (q, k, v)), causal=True, scale=scale)


def _causally_masked(masked: Node) -> Optional[Node]:
    """s if masked is s with -inf where the key comes after the query: masked_fill with a constant
    "key after query" mask, or s + a constant that is -inf there and 0 elsewhere. The lowest finite
    value (HF's torch.finfo(dtype).min) counts as -inf: for scores below 2^103 (f32) in magnitude,
    s + min rounds to min and softmax gives exactly 0 there, as braid.attention's causal mask."""
    t = masked.shape[-1]
    if masked.shape[-2] != t or not masked.dtype.is_floating_point:
        return None
    after = torch.ones(t, t, dtype=torch.bool).triu(1)
    lowest = (-math.inf, torch.finfo(masked.dtype).min)
    if _is(masked, aten.masked_fill.Scalar) and masked.args[1].node.kind == "const" and \
            isinstance(masked.args[2], float) and masked.args[2] in lowest:
        mask = masked.args[1].node.value
        if mask.shape[-2:] == (t, t) and mask.numel() == t * t and \
                torch.equal(mask.reshape(t, t).to(torch.bool), after):
            return masked.args[0].node
        return None
    if _is(masked, aten.add.Tensor) and masked.kwargs.get("alpha", 1) == 1 and \
            all(isinstance(a, Ref) for a in masked.args[:2]):
        for s, c in ((masked.args[0].node, masked.args[1].node), (masked.args[1].node, masked.args[0].node)):
            if c.kind == "const" and s.shape == masked.shape and c.dtype == masked.dtype and \
                    any(torch.equal(torch.broadcast_to(c.value, masked.shape),
                                    torch.broadcast_to(torch.zeros(t, t, dtype=c.dtype).masked_fill(after, low),
                                                       masked.shape)) for low in lowest):
                return s
    return None


def _bthd(n: Node, fuse: bool) -> Tuple[str, Node, Tuple[int, ...]]:
    """How to get n, a [B, H, T, D] query, key or value, as braid.attention reads it: [B, T, H', D]
    with n's head h being head h // (H / H'), so that grouped-query k/v repeated to the query heads
    are taken unrepeated. Returns (how, node, shape); _bthd_value emits it."""
    y = _heads_of(n)
    if y is not None:  # X.transpose(1, 2); X maybe k/v repeated in [B, T, H, D] (Meta's repeat_kv)
        y = _repeated(y, 2) or y
        return "value", y, y.shape
    swapped = (n.shape[0], n.shape[2], n.shape[1], n.shape[3])
    if fuse and _rotary_match(n) is not None:
        return "rotary", n, swapped
    src = _repeated(n, 1)  # HF's repeat_kv (or repeat_interleave) on [B, Hkv, T, D]
    return _bthd(src, fuse) if src is not None else ("transpose", n, swapped)


def _bthd_value(e, plan: Tuple[str, Node, Tuple[int, ...]]) -> Value:
    how, n, _ = plan
    if how == "rotary":
        return _rotary_bthd(e, n)
    return e.value(n) if how == "value" else e.body.transpose(e.value(n), [0, 2, 1, 3])


def _repeated(n: Node, axis: int) -> Optional[Node]:
    """X if n is X with each index along axis repeated r times in place (head h of n is X's h // r):
    X.unsqueeze(axis + 1).expand(..r..).reshape(...) or X.repeat_interleave(r, axis)."""
    if _is(n, aten.index_select.default) and n.args[1] % len(n.shape) == axis and \
            n.args[2].node.kind == "const":
        x = n.args[0].node
        return x if _repeat_factor(n.args[2].node.value.reshape(-1), x.shape[axis]) is not None else None
    if not _is(n, aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default,
               aten.reshape.default):
        return None
    m = n.args[0].node
    while _is(m, aten.clone.default):
        m = m.args[0].node
    if not _is(m, aten.expand.default):
        return None
    u = _through_full_slices(m.args[0].node)
    if not _is(u, aten.unsqueeze.default) or u.args[1] % len(u.shape) != axis + 1:
        return None
    x = _through_full_slices(u.args[0].node)
    r = m.shape[axis + 1] if len(m.shape) == len(x.shape) + 1 else 0
    wide = x.shape[:axis + 1] + (r,) + x.shape[axis + 1:]
    merged = x.shape[:axis] + (x.shape[axis] * r,) + x.shape[axis + 1:]
    return x if r and m.shape == wide and n.shape == merged else None


def _through_full_slices(n: Node) -> Node:
    """n without the whole-dimension slices that indexing such as x[:, :, None] adds."""
    while _is(n, aten.slice.Tensor) and n.shape == n.args[0].node.shape and \
            (n.args[4] if len(n.args) > 4 else 1) == 1:
        n = n.args[0].node
    return n


def _transpose(e, node, x, d0, d1):
    rank = len(x.node.shape)
    if rank == 4 and {d0 % 4, d1 % 4} == {1, 2}:
        fused = _fused_attention(e, x.node)
        if fused is not None:
            return fused  # (att @ v).transpose(1, 2) is braid.attention's own [B, T, H, D]
    if rank == 3 and {d0 % 3, d1 % 3} == {0, 1}:
        fused = _mha_attention(e, x.node)
        if fused is not None:  # nn.MultiheadAttention's [T, B * H, D]
            return e.body.reshape(e.body.transpose(fused, [1, 0, 2, 3]), node.shape)
    perm = list(range(rank))
    d0, d1 = d0 % rank, d1 % rank
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return e.body.transpose(e.value(x.node), perm)


def _t(e, node, x):
    return _transpose(e, node, x, 0, 1) if len(x.node.shape) == 2 else e.value(x.node)


def _permute(e, node, x, dims):
    rows = _patch_rows(e, node, dims)
    if rows is not None:
        return rows
    return e.body.transpose(e.value(x.node), [d % len(x.node.shape) for d in dims])


def _matmul_operand(e, ref) -> Tuple[Value, bool]:
    """An operand and whether it is a transpose of its last two dims (folded into matmul)."""
    n = ref.node
    if _is(n, aten.t.default) and len(n.shape) == 2:
        return e.value(n.args[0].node), True
    if _is(n, aten.transpose.int) and len(n.shape) >= 2:
        r = len(n.shape)
        if {n.args[1] % r, n.args[2] % r} == {r - 2, r - 1}:
            return e.value(n.args[0].node), True
    return e.value(n), False


def _mm(e, node, a, b_):
    fused = _mha_attention(e, node)
    if fused is not None:  # back to bmm's [B * H, T, D]
        return e.body.reshape(e.body.transpose(fused, [0, 2, 1, 3]), node.shape)
    x, ta = _matmul_operand(e, a)
    w, tb = _matmul_operand(e, b_)
    return e.body.matmul(x, w, transpose_a=ta, transpose_b=tb)


def _addmm(e, node, bias, a, b_, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        raise UnsupportedError(f"addmm with beta={beta}, alpha={alpha} at {node.where}: only 1, 1")
    return e.body.add(_mm(e, node, a, b_), e.value(bias.node))


def _binary(kind):
    def handler(e, node, a, b_, alpha=1):
        like = node
        x, y = e.operand(a, like), e.operand(b_, like)
        if alpha != 1:
            y = e.body.mul(y, e.constant(torch.tensor(alpha, dtype=node.dtype)))
        x, y = _same_type(e, node, x), _same_type(e, node, y)
        return getattr(e.body, kind)(x, y)
    return handler


def _same_type(e, node, v: Value) -> Value:
    """A 0-d operand of another float type (a wrapped Python number) in the result's type."""
    element = _element(node)
    if v.type.element == element:
        return v
    raise UnsupportedError(f"{node.op} mixes {v.type} with a {element} result at {node.where}: "
                       f"cast explicitly in the module")


def _unary(kind):
    def handler(e, node, x, *rest, **kw):
        return getattr(e.body, kind)(e.value(x.node))
    return handler


def _gelu(e, node, x, approximate="none"):
    return e.body.gelu(e.value(x.node), "tanh" if approximate == "tanh" else "exact")


def _softmax(e, node, x, dim, half_to_float=False):
    if half_to_float:
        raise UnsupportedError(f"softmax with half_to_float at {node.where}")
    return e.body.softmax(e.value(x.node), dim)


def _layer_norm(e, node, x, shape, weight, bias, eps):
    if node.index != 0:
        raise UnsupportedError(f"native_layer_norm's saved mean/rstd are used at {node.where}")
    if len(shape) != 1:
        raise UnsupportedError(f"layer_norm over {list(shape)} at {node.where}: braid normalises "
                           f"the last dimension only")
    w = e.value(weight.node) if weight is not None else e.constant(torch.ones(shape, dtype=node.dtype))
    b = e.value(bias.node) if bias is not None else e.constant(torch.zeros(shape, dtype=node.dtype))
    return e.body.layer_norm(e.value(x.node), w, b, eps)


def _scalar(a) -> Optional[float]:
    """a Python number, or a one-element constant, as a float."""
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return float(a)
    if isinstance(a, Ref) and a.node.kind == "const" and a.node.value.numel() == 1:
        return float(a.node.value)
    return None


def _both_tensors(node: Node) -> Optional[Tuple[Node, Node]]:
    if len(node.args) < 2 or not all(isinstance(a, Ref) for a in node.args[:2]) or \
            node.kwargs.get("alpha", 1) != 1:
        return None
    return node.args[0].node, node.args[1].node


def _rms_norm(e, node: Node) -> Optional[Value]:
    """x * rsqrt(mean(x^2, -1, keepdim=True) + eps) * w, factors in any order, as braid.rms_norm."""
    pair = _both_tensors(node) if e.importer.fuse and _is(node, aten.mul.Tensor) else None
    for normed, w in ((pair, pair[::-1]) if pair else ()):
        inner = _both_tensors(normed) if _is(normed, aten.mul.Tensor) else None
        if inner is None or w.shape != node.shape[-1:] or normed.shape != node.shape or w.dtype != node.dtype:
            continue
        for x, r in (inner, inner[::-1]):
            eps = _rms_epsilon(x, r) if x.shape == node.shape else None
            if eps is not None:
                return e.body.rms_norm(e.value(x), e.value(w), eps)
    return None


def _rms_epsilon(x: Node, r: Node) -> Optional[float]:
    """eps if r is rsqrt(mean(x^2, -1, keepdim=True) + eps) (x^2 as x.pow(2) or x * x)."""
    if not _is(r, aten.rsqrt.default) or not _is(r.args[0].node, aten.add.Tensor):
        return None
    s = r.args[0].node
    if s.kwargs.get("alpha", 1) != 1:
        return None
    for m, eps in ((s.args[0], _scalar(s.args[1])), (s.args[1], _scalar(s.args[0]))):
        if not isinstance(m, Ref) or eps is None or not _is(m.node, aten.mean.dim):
            continue
        m = m.node
        dims, keep = list(m.args[1]), (m.args[2] if len(m.args) > 2 else m.kwargs.get("keepdim", False))
        if dims not in ([-1], [len(x.shape) - 1]) or not keep or m.kwargs.get("dtype") is not None:
            continue
        sq = m.args[0].node
        if _is(sq, aten.pow.Tensor_Scalar) and sq.args[0].node is x and sq.args[1] == 2:
            return eps
        if _is(sq, aten.mul.Tensor) and _both_tensors(sq) == (x, x):
            return eps
    return None


def _rotary_bthd(e, n: Node) -> Optional[Value]:
    """braid.rotary in [B, T, H, D] if n is x * cos + rotate_half(x) * sin with braid's tables."""
    if not e.importer.fuse:
        return None
    if id(n) not in e.rotary:
        found = _rotary_match(n)
        if found is None:
            return None
        x, position, base = found
        if position == 1:
            xv = e.value(x)
        else:  # x is [B, H, T, D], as HF rotates q and k after .transpose(1, 2)
            y = _heads_of(x)
            xv = e.value(y) if y is not None else e.body.transpose(e.value(x), [0, 2, 1, 3])
        e.rotary[id(n)] = (e.body.rotary(xv, base), position)
    return e.rotary[id(n)][0]


def _rotary_match(node: Node) -> Optional[Tuple[Node, int, float]]:
    """(x, position dim, base) if node is x * cos + rotate_half(x) * sin (terms and factors in any
    order) with constant tables equal to braid.rotary's for that base, positions 0.. along dim 1 or 2
    of a 4-D x; None otherwise (the pattern then stays op by op, which is the same model)."""
    pair = _both_tensors(node) if _is(node, aten.add.Tensor) else None
    if pair is None or len(node.shape) != 4 or node.shape[-1] % 2:
        return None
    for plain, turned in (pair, pair[::-1]):
        p1, p2 = _times_constant(plain), _times_constant(turned)
        if p1 is None or p2 is None or p1[0].shape != node.shape or _rotate_half_of(p2[0]) is not p1[0]:
            continue
        found = _rotary_position(p1[1], p2[1], node.shape, node.dtype)
        if found is not None:
            return (p1[0],) + found
    return None


def _times_constant(n: Node) -> Optional[Tuple[Node, torch.Tensor]]:
    pair = _both_tensors(n) if _is(n, aten.mul.Tensor) else None
    if pair is None or (pair[0].kind == "const") == (pair[1].kind == "const"):
        return None
    return (pair[0], pair[1].value) if pair[1].kind == "const" else (pair[1], pair[0].value)


def _rotate_half_of(n: Node) -> Optional[Node]:
    """x if n is cat((-x[..., D/2:], x[..., :D/2]), -1)."""
    if not _is(n, aten.cat.default) or len(n.args[0]) != 2 or \
            (n.args[1] if len(n.args) > 1 else 0) % len(n.shape) != len(n.shape) - 1:
        return None
    neg, second = n.args[0][0].node, n.args[0][1].node
    if not _is(neg, aten.neg.default):
        return None
    d = n.shape[-1]
    first, second = _last_dim_range(neg.args[0].node), _last_dim_range(second)
    if first is None or second is None or first[0] is not second[0] or first[0].shape[-1] != d or \
            first[1:] != (d // 2, d) or second[1:] != (0, d // 2):
        return None
    return first[0]


def _last_dim_range(n: Node) -> Optional[Tuple[Node, int, int]]:
    """(x, start, stop) if n is x[..., start:stop]."""
    if not _is(n, aten.slice.Tensor):
        return None
    x = n.args[0].node
    dim, start, end, step = (list(n.args[1:]) + [0, None, None, 1][len(n.args) - 1:])[:4]
    if dim % len(x.shape) != len(x.shape) - 1 or step != 1:
        return None
    s, l, _ = slice(start, end).indices(x.shape[-1])
    return x, s, max(s, l)


def _rotary_position(cos: torch.Tensor, sin: torch.Tensor, shape, dtype) -> Optional[Tuple[int, float]]:
    """(position dim, base) if cos and sin, broadcast to shape [B, ., ., D], are braid.rotary's
    rotate-half tables: cos/sin(p * base^(-2i/D)) in column i and i + D/2 at position p of that dim."""
    if cos.dtype != dtype or sin.dtype != dtype:
        return None
    try:
        cos, sin = torch.broadcast_to(cos, shape).double(), torch.broadcast_to(sin, shape).double()
    except RuntimeError:
        return None
    d, half = shape[-1], shape[-1] // 2
    for position in (1, 2):
        t, base = shape[position], 10000.0
        if t > 1 and half > 1:  # the angle of column 1 at position 1 is base^(-2/D)
            at = [0, 0, 0, 1]
            at[position] = 1
            angle = math.atan2(float(sin[tuple(at)]), float(cos[tuple(at)]))
            if not 0 < angle < 1:
                continue
            base = angle ** (-d / 2)
            if abs(base - round(base)) <= 1e-4 * base:
                base = float(round(base))
        inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
        angles = torch.outer(torch.arange(t, dtype=torch.float64), inv).repeat(1, 2)
        view = [1, 1, 1, d]
        view[position] = t
        # The module's tables are rounded to its dtype, angles up to t - 1 radians.
        tol = 8 * torch.finfo(dtype).eps * max(1, t - 1)
        if (cos - angles.cos().reshape(view)).abs().max() <= tol and \
                (sin - angles.sin().reshape(view)).abs().max() <= tol:
            return position, base
    return None


def _mul(e, node, a, b_, **kw):
    fused = _rms_norm(e, node)
    return fused if fused is not None else _binary("mul")(e, node, a, b_, **kw)


def _add(e, node, a, b_, **kw):
    rotated = _rotary_bthd(e, node) if isinstance(a, Ref) and isinstance(b_, Ref) else None
    if rotated is not None:
        return rotated if e.rotary[id(node)][1] == 1 else e.body.transpose(rotated, [0, 2, 1, 3])
    return _binary("add")(e, node, a, b_, **kw)


def _embedding(e, node, weight, ids, padding_idx=-1, scale_grad=False, sparse=False):
    if padding_idx not in (-1, None) or scale_grad or sparse:
        raise UnsupportedError(f"embedding with padding_idx/scale_grad_by_freq/sparse at {node.where}: "
                           f"braid's embedding has none of these")
    return e.body.embedding(e.value(weight.node), e.value(ids.node))


def _slice(e, node, x, dim=0, start=None, end=None, step=1):
    shape = x.node.shape
    dim %= len(shape)
    s, l, st_ = slice(start, end, step).indices(shape[dim])
    starts, limits, steps = [0] * len(shape), list(shape), [1] * len(shape)
    starts[dim], limits[dim], steps[dim] = s, max(s, l), st_
    v = e.value(x.node)
    if starts == [0] * len(shape) and limits == list(shape) and st_ == 1:
        return v
    return e.body.slice(v, starts, limits, steps if st_ != 1 else None)


def _split(e, node, x, size, dim=0):
    shape = x.node.shape
    dim %= len(shape)
    sizes = size if isinstance(size, (list, tuple)) else None
    offsets, o = [], 0
    for i in range(node.index + 1):
        n = sizes[i] if sizes else min(size, shape[dim] - o)
        offsets.append((o, o + n))
        o += n
    start, limit = offsets[-1]
    starts, limits = [0] * len(shape), list(shape)
    starts[dim], limits[dim] = start, limit
    return e.body.slice(e.value(x.node), starts, limits)


def _masked_fill(e, node, x, mask, value):
    if mask.node.kind != "const":
        raise UnsupportedError(f"masked_fill with a mask that depends on the inputs at {node.where}: "
                           f"braid has no select op; only constant masks (e.g. a causal buffer)")
    m = mask.node.value.to(torch.bool)
    fill = float(value.node.value) if isinstance(value, Ref) else float(value)
    v = e.value(x.node)
    if math.isinf(fill):
        # x + (-inf where masked, 0 elsewhere): exactly masked_fill for finite x.
        add = torch.zeros(m.shape, dtype=node.dtype).masked_fill(m, fill)
        return e.body.add(v, e.constant(add))
    keep = (~m).to(node.dtype)
    y = e.body.mul(v, e.constant(keep))
    return e.body.add(y, e.constant(torch.zeros(m.shape, dtype=node.dtype).masked_fill(m, fill)))


def _nll(e, node, logp, target, weight, reduction, ignore_index):
    if node.index != 0:
        raise UnsupportedError(f"nll_loss's total_weight is used at {node.where}")
    lp = logp.node
    if not _is(lp, aten._log_softmax.default) or lp.args[1] % len(lp.shape) != len(lp.shape) - 1:
        raise UnsupportedError(f"nll_loss over something other than log_softmax(last dim) at {node.where}: "
                           f"braid has cross_entropy only")
    if weight is not None or reduction != 1:
        raise UnsupportedError(f"cross_entropy with class weights or reduction other than 'mean' at "
                           f"{node.where}")
    z, t = lp.args[0].node, target.node
    # Fold the flattening views (logits.view(-1, V), targets.view(-1)): same mean.
    if _is(z, aten.view.default, aten._unsafe_view.default) and \
            _is(t, aten.view.default, aten._unsafe_view.default) and \
            z.args[0].node.shape[:-1] == t.args[0].node.shape and z.args[0].node.shape[-1] == z.shape[-1]:
        z, t = z.args[0].node, t.args[0].node
    return e.body.cross_entropy(e.value(z), e.value(t))


def _dropout(e, node, x, p, train):
    if train and p > 0:
        raise UnsupportedError(f"dropout with p={p} in training mode at {node.where}: braid has no "
                           f"dropout; use p=0 or module.eval()")
    return e.value(x.node)


def _unsqueeze_like(e, node, x, *rest):
    return e.body.reshape(e.value(x.node), node.shape)


def _select(e, node, x, dim, index):
    shape = x.node.shape
    dim %= len(shape)
    index %= shape[dim]
    starts, limits = [0] * len(shape), list(shape)
    starts[dim], limits[dim] = index, index + 1
    return e.body.reshape(e.body.slice(e.value(x.node), starts, limits), node.shape)


def _convolution(e, node, *args):
    """A patch embedding (stride = kernel, no padding), as ViT's conv_proj: see _patch_matmul."""
    y = _patch_matmul(e, node)
    return e.body.reshape(e.body.transpose(y, [0, 2, 1]), node.shape)


def _patch_matmul(e, node: Node) -> Value:
    """The convolution node as [B, P, O]: the input cut into non-overlapping patches [B, P, C*k*k]
    times the flattened kernel [O, C*k*k]^T (+ bias), one matmul; refused unless stride = kernel."""
    if id(node) in e.patches:
        return e.patches[id(node)]
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
    kernel = list(weight.node.shape[2:])
    if transposed or groups != 1 or any(padding) or any(d != 1 for d in dilation) or list(stride) != kernel:
        raise UnsupportedError(
            f"aten op {node.op} (stride {list(stride)}, kernel {kernel}, padding {list(padding)}, "
            f"dilation {list(dilation)}, groups {groups}{', transposed' if transposed else ''}) has no braid "
            f"equivalent: used by module '{node.module or '<root>'}' at {node.where}; braid imports only "
            f"patch embeddings (stride = kernel, no padding, dilation 1, groups 1)")
    shape = x.node.shape  # [B, C, *spatial]
    b, c, r = shape[0], shape[1], len(kernel)
    counts = [s // k for s, k in zip(shape[2:], kernel)]
    v = e.value(x.node)
    if any(n * k != s for n, k, s in zip(counts, kernel, shape[2:])):  # PyTorch drops the remainder
        v = e.body.slice(v, [0] * len(shape), [b, c] + [n * k for n, k in zip(counts, kernel)])
    split = [b, c] + [d for n, k in zip(counts, kernel) for d in (n, k)]
    perm = [0] + [2 + 2 * i for i in range(r)] + [1] + [3 + 2 * i for i in range(r)]
    patches = e.body.reshape(e.body.transpose(e.body.reshape(v, split), perm),
                             [b, math.prod(counts), c * math.prod(kernel)], hint="patches")
    out = weight.node.shape[0]
    w = e.body.reshape(e.value(weight.node), [out, c * math.prod(kernel)])
    y = e.body.matmul(patches, w, transpose_b=True)
    if bias is not None:
        y = e.body.add(y, e.value(bias.node))
    e.patches[id(node)] = y
    return y


def _patch_rows(e, node: Node, dims) -> Optional[Value]:
    """conv.reshape(B, O, P).permute(0, 2, 1) of a patch embedding: its matmul result [B, P, O]."""
    src = node.args[0].node if _is(node, aten.permute.default) else None
    if src is None or list(dims) != [0, 2, 1] or \
            not _is(src, aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default,
                    aten.reshape.default):
        return None
    conv = src.args[0].node
    if not _is(conv, aten.convolution.default) or src.shape != conv.shape[:2] + (math.prod(conv.shape[2:]),):
        return None
    return _patch_matmul(e, conv)


def _baddbmm(e, node, x, b1, b2, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        raise UnsupportedError(f"baddbmm with beta={beta}, alpha={alpha} at {node.where}: only 1, 1")
    return e.body.add(_mm(e, node, b1, b2), e.value(x.node))


def _scaled(n: Node) -> Tuple[Node, float]:
    """(x, s) for n = x * s or x / (1/s) with a Python number s, else (n, 1)."""
    if _is(n, aten.mul.Tensor, aten.div.Tensor) and isinstance(n.args[1], (int, float)) and \
            not isinstance(n.args[1], bool):
        return n.args[0].node, (n.args[1] if n.op is aten.mul.Tensor else 1.0 / n.args[1])
    return n, 1.0


def _mha_heads(n: Node) -> Optional[Tuple[Node, int]]:
    """(X, H) if n is X.view(T, B * H, D).transpose(0, 1) for X [T, B, H * D], as
    F.multi_head_attention_forward splits heads."""
    if not _is(n, aten.transpose.int) or len(n.shape) != 3 or {n.args[1] % 3, n.args[2] % 3} != {0, 1}:
        return None
    view = n.args[0].node
    if not _is(view, aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default):
        return None
    x = view.args[0].node
    while _is(x, aten.clone.default):
        x = x.args[0].node
    if len(x.shape) != 3:
        return None
    (t, b, width), (t2, bh, d) = x.shape, view.shape
    if t2 != t or bh % b or width != bh // b * d:
        return None
    return x, bh // b


def _mha_attention(e, node: Node) -> Optional[Value]:
    """braid.attention [B, T, H, D] for node = bmm(softmax(q @ k^T * s [+ causal mask]), v) with q, k
    and v split into heads as nn.MultiheadAttention does ([T, B, H * D] viewed as [T, B * H, D] and
    transposed), or None. Matched exactly; anything else (another mask, dropout) stays op by op."""
    if not (e.importer.fuse_attention and e.importer.fuse) or not _is(node, aten.bmm.default):
        return None
    if id(node) in e.attention:
        return e.attention[id(node)]
    probs, v3 = node.args[0].node, node.args[1].node
    if not _is(probs, aten._softmax.default) or probs.args[1] % 3 != 2:
        return None
    scores, scale = _scaled(probs.args[0].node)
    causal = False
    if _is(scores, aten.baddbmm.default):
        mask = scores.args[0].node
        t = scores.shape[-1]
        if scores.args[3:] not in ((), (1, 1)) or scores.kwargs or mask.kind != "const" or \
                scale != 1.0 or mask.value.numel() != t * t or scores.shape[-2] != t:
            return None
        causal_mask = torch.zeros(t, t, dtype=mask.dtype).masked_fill(
            torch.ones(t, t, dtype=torch.bool).triu(1), -math.inf)
        if not torch.equal(mask.value.reshape(t, t), causal_mask):
            return None
        causal, q3, kt = True, scores.args[1].node, scores.args[2].node
    elif _is(scores, aten.bmm.default):
        q3, kt = scores.args[0].node, scores.args[1].node
    else:
        return None
    q3, pre = _scaled(q3)
    if not _is(kt, aten.transpose.int) or {kt.args[1] % 3, kt.args[2] % 3} != {1, 2}:
        return None
    heads = [_mha_heads(n) for n in (q3, kt.args[0].node, v3)]
    if any(h is None for h in heads) or len({h for _, h in heads}) != 1 or \
            heads[1][0].shape != heads[2][0].shape or heads[0][0].shape[1:] != heads[1][0].shape[1:]:
        return None

    def bthd(x: Node, h: int) -> Value:
        t, b, width = x.shape
        return e.body.transpose(e.body.reshape(e.value(x), [t, b, h, width // h]), [1, 0, 2, 3])

    q, k, v = (bthd(x, h) for x, h in heads)
    fused = e.body.attention(q, k, v, causal=causal, scale=scale * pre)
    e.attention[id(node)] = fused
    return fused


def _mean(e, node, x, dims=None, keepdim=False, dtype=None):
    if dtype is not None:
        raise UnsupportedError(f"mean with dtype at {node.where}")
    axes = list(range(len(x.node.shape))) if not dims else list(dims)
    return e.body.reduce("mean", e.value(x.node), axes, keepdim)


def _sum(e, node, x, dims=None, keepdim=False, dtype=None):
    if dtype is not None:
        raise UnsupportedError(f"sum with dtype at {node.where}")
    axes = list(range(len(x.node.shape))) if not dims else list(dims)
    return e.body.reduce("sum", e.value(x.node), axes, keepdim)


def _to_copy(e, node, x, **kw):
    if node.dtype != x.node.dtype:
        raise UnsupportedError(f"a cast from {x.node.dtype} to {node.dtype} at {node.where}: braid "
                           f"keeps one element type per model")
    return e.value(x.node)


_HANDLERS: Dict[Any, Callable] = {
    aten.view.default: _reshape, aten._unsafe_view.default: _reshape,
    aten._reshape_alias.default: _reshape, aten.reshape.default: _reshape,
    aten.unsqueeze.default: _unsqueeze_like, aten.squeeze.dim: _unsqueeze_like,
    aten.squeeze.default: _unsqueeze_like, aten.flatten.using_ints: _unsqueeze_like,
    aten.clone.default: _identity, aten.detach.default: _identity, aten.alias.default: _identity,
    aten.contiguous.default: _identity, aten.lift_fresh.default: _identity,
    aten._to_copy.default: _to_copy,
    aten.expand.default: _expand, aten.cat.default: _cat, aten.index_select.default: _index_select,
    aten.t.default: _t, aten.transpose.int: _transpose, aten.permute.default: _permute,
    aten.mm.default: _mm, aten.bmm.default: _mm, aten.addmm.default: _addmm, aten.baddbmm.default: _baddbmm,
    aten.convolution.default: _convolution,
    aten.add.Tensor: _add, aten.sub.Tensor: _binary("sub"),
    aten.mul.Tensor: _mul, aten.div.Tensor: _binary("div"),
    aten.pow.Tensor_Scalar: _pow, aten.neg.default: _unary("neg"), aten.exp.default: _unary("exp"), aten.sqrt.default: _unary("sqrt"),
    aten.rsqrt.default: _unary("rsqrt"), aten.relu.default: _unary("relu"), aten.silu.default: _unary("silu"),
    aten.gelu.default: _gelu, aten._softmax.default: _softmax,
    aten.native_layer_norm.default: _layer_norm, aten.embedding.default: _embedding,
    aten.slice.Tensor: _slice, aten.select.int: _select,
    aten.split.Tensor: _split, aten.split_with_sizes.default: _split,
    aten.masked_fill.Scalar: _masked_fill, aten.masked_fill.Tensor: _masked_fill,
    aten.nll_loss_forward.default: _nll, aten.dropout.default: _dropout, aten.mean.dim: _mean, aten.sum.dim_IntList: _sum,
}

SUPPORTED_OPS = sorted(str(op) for op in _HANDLERS)


class _Importer:
    def __init__(self, tracer: _Tracer, loss: Node, inputs: List[Node], fuse_attention: bool,
                 fuse: bool = True):
        self.fuse = fuse  # RMSNorm, rotary and (with fuse_attention) attention as braid's fused ops
        self.tracer, self.loss, self.inputs = tracer, loss, inputs
        self.fuse_attention = fuse_attention
        self.groups: Dict[int, dict] = {}  # id(last instance's output node) -> group
        self.layers: List[str] = []

    def find_groups(self) -> None:
        calls = [c for c in self.tracer.calls if "outputs" in c]
        by_list: Dict[str, List[dict]] = {}
        for c in calls:
            by_list.setdefault(c["list"], []).append(c)
        for path, cs in by_list.items():
            if [c["index"] for c in cs] != list(range(len(cs))):
                continue  # a child skipped, reordered or called twice: inline
            if any(len(c["inputs"]) != 1 or len(c["outputs"]) != 1 for c in cs):
                continue
            if cs[0]["sequential"] and len(cs) < 2:
                continue  # a Sequential holding one module (torchvision's heads) is no stack of layers
            ok = all(c["inputs"][0].shape == c["outputs"][0].shape == cs[0]["inputs"][0].shape and
                     c["inputs"][0].dtype == c["outputs"][0].dtype for c in cs)
            ok = ok and all(cs[i + 1]["inputs"][0] is cs[i]["outputs"][0] for i in range(len(cs) - 1))
            if ok and all(self.signature(c) == self.signature(cs[0]) for c in cs[1:]):
                group = dict(list=path, calls=cs)
                self.groups.setdefault(id(cs[-1]["outputs"][0]), group)  # calls start outermost first

    def signature(self, call: dict) -> list:
        """The op sequence of one child call, with names relative to the child."""
        prefix = f"{call['list']}.{call['child']}."
        nodes = self.tracer.order[call["start"]:call["end"]]
        local = {id(n): i for i, n in enumerate(nodes)}
        local[id(call["inputs"][0])] = "in"

        def norm(a):
            if isinstance(a, Ref):
                n = a.node
                if id(n) in local:
                    return ("local", local[id(n)])
                if n.kind == "param":
                    return ("param", n.name[len(prefix):] if n.name.startswith(prefix) else n.name)
                if n.kind == "const":
                    return ("const", n.shape, str(n.dtype), n.value.cpu().numpy().tobytes())
                return ("outside", id(n))
            if isinstance(a, (list, tuple)):
                return tuple(norm(x) for x in a)
            if isinstance(a, dict):
                return tuple(sorted((k, norm(v)) for k, v in a.items()))
            return repr(a)

        return [(n.kind, str(n.op), n.index, n.shape, str(n.dtype), norm(n.args), norm(n.kwargs))
                for n in nodes]

    def repeat_for(self, node: Node):
        group = self.groups.get(id(node))
        if group is None:
            return None

        def emit(e: _Emitter) -> Value:
            first = group["calls"][0]
            path = group["list"]
            x = e.value(first["inputs"][0])
            if "layer" not in group:
                name = path.replace(".", "_") or "layer"
                layer = self.module.layer(name, [("x", x.type)])
                inner = _Emitter(layer, {id(first["inputs"][0]): layer.args[0]},
                                 local_prefix=f"{path}.{first['child']}.", owner=(path, 0), importer=self)
                try:
                    layer.yield_(inner.value(first["outputs"][0]))
                except _NotRepeatable:
                    self.module._bodies.remove(layer)
                    del self.groups[id(node)]
                    return e.emit(node)
                group["layer"] = layer
                self.layers.append(path)
            # Instance i's parameters are PATH.CHILD.NAME, the state-dict keys: the children's
            # names are instance_names unless they are the indices 0, 1, ... (nn.ModuleList).
            children = [c["child"] for c in group["calls"]]
            names = None if children == [str(i) for i in range(len(children))] else children
            return e.body.repeat(group["layer"], [x], prefix=path, count=len(children), instance_names=names)

        return emit

    def build(self, arg_specs: List[Arg]) -> str:
        self.module = Module()
        func = self.module.func("forward", arg_specs)
        values = {id(n): v for n, v in zip(self.inputs, func.args)}
        e = _Emitter(func, values, importer=self)
        loss = e.value(self.loss)
        if loss.type.shape != ():
            raise UnsupportedError(f"the loss must be a scalar, got {loss.type}")
        func.return_(loss)
        # The function was created first; put the layers before it, as the generator does.
        self.module._bodies.remove(func)
        self.module._bodies.append(func)
        return str(self.module)


def _input_ranges(tracer: _Tracer, inputs: List[Node]) -> Dict[int, int]:
    """braid.range of integer inputs: the table size for ids, the class count for labels."""
    ranges: Dict[int, int] = {}
    for n in tracer.order:
        if _is(n, aten.embedding.default):
            ranges.setdefault(id(_root(n.args[1].node)), n.args[0].node.shape[0])
        elif _is(n, aten.nll_loss_forward.default):
            ranges.setdefault(id(_root(n.args[1].node)), n.args[0].node.shape[-1])
    return ranges


def _data_roles(tracer: _Tracer, inputs: List[Node], ranges: Dict[int, int]) -> Dict[int, str]:
    """braid.data of a language model's inputs: the one integer input that
    indexes an embedding is "tokens", the one that labels the cross-entropy
    "labels", when they have the same shape and range (next-token labels,
    nanoGPT's idx and targets), so that a braidc program's --data fills them."""
    ids, labels = set(), set()
    for n in tracer.order:
        if _is(n, aten.embedding.default):
            ids.add(id(_root(n.args[1].node)))
        elif _is(n, aten.nll_loss_forward.default):
            labels.add(id(_root(n.args[1].node)))
    by_id = {id(n): n for n in inputs}
    ids, labels = ids & by_id.keys(), labels & by_id.keys()
    if len(ids) != 1 or len(labels) != 1 or ids == labels:
        return {}
    (t,), (l,) = ids, labels
    same = by_id[t].shape == by_id[l].shape and by_id[t].dtype == by_id[l].dtype
    if not same or ranges.get(t) != ranges.get(l):
        return {}
    return {t: "tokens", l: "labels"}


def _root(n: Node) -> Node:
    while n.kind == "op" and n.op in (aten.view.default, aten._unsafe_view.default,
                                      aten._reshape_alias.default, aten.clone.default):
        n = n.args[0].node
    return n


def import_module(module: torch.nn.Module, example_inputs, loss: Optional[Callable] = None,
                  fuse_attention: bool = True, fuse: bool = True) -> Imported:
    """Traces `module` on `example_inputs` and returns braid IR with a @forward entry.

    example_inputs: a dict from forward's parameter names to tensors (or a
    tuple, named by forward's signature). Names that forward does not take are
    passed only to `loss`. loss: called as loss(output, inputs) and must return
    a scalar tensor; without it the output must be a scalar tensor, or a tuple
    holding exactly one scalar tensor (nanoGPT's (logits, loss)).
    fuse_attention: write explicit causal attention (softmax of masked,
    scaled q @ k^T, times v) as one braid.attention; False keeps it op by op.
    fuse: False keeps every composite op by op: attention, RMSNorm
    (x * rsqrt(mean(x^2) + eps) * w) and rotary embeddings (x * cos +
    rotate_half(x) * sin), which are otherwise braid.rms_norm and braid.rotary.
    """
    forward_params = [p for p in inspect.signature(module.forward).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not isinstance(example_inputs, dict):
        example_inputs = dict(zip([p.name for p in forward_params], example_inputs))
    for name, t in example_inputs.items():
        if not isinstance(t, torch.Tensor):
            raise UnsupportedError(f"example input {name!r} is not a tensor")
    accepted = {p.name for p in forward_params}
    call_args = {k: v for k, v in example_inputs.items() if k in accepted}

    params = {id(p): name for name, p in module.named_parameters()}
    buffers = {id(b): name for name, b in module.named_buffers()}
    tracer = _Tracer(params, buffers)
    inputs = [tracer.register(t, Node("input", t, name=name)) for name, t in example_inputs.items()]
    handles = _install_hooks(module, tracer)
    try:
        with tracer:
            out = module(**call_args)
            out = loss(out, example_inputs) if loss is not None else out
    finally:
        for h in handles:
            h.remove()
    if loss is None and isinstance(out, (tuple, list)):
        scalars = [o for o in out if isinstance(o, torch.Tensor) and o.dim() == 0]
        if len(scalars) != 1:
            raise UnsupportedError(f"the module returns {len(out)} values with {len(scalars)} scalars; "
                               f"pass loss= to say which is the loss")
        out = scalars[0]
    if not isinstance(out, torch.Tensor) or out.dim() != 0:
        raise UnsupportedError("the loss (the module's output, or loss(output, inputs)) must be a scalar tensor")
    loss_node = tracer.nodes.get(id(out))
    if loss_node is None or loss_node.kind != "op":
        raise UnsupportedError("the loss does not depend on the inputs and parameters")

    ranges = _input_ranges(tracer, inputs)
    roles = _data_roles(tracer, inputs, ranges)
    arg_specs = [Arg(n.name, _ttype(n), ranges.get(id(n)), roles.get(id(n))) for n in inputs]
    importer = _Importer(tracer, loss_node, inputs, fuse_attention, fuse)
    importer.find_groups()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    text = importer.build(arg_specs)
    used = {n.name for n in tracer.order if n.kind == "param"}
    weights = {name: p.detach().clone() for name, p in module.named_parameters() if name in used}
    return Imported(text, weights, importer.layers)

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

Layers: the children of an nn.ModuleList that run once each, in order, each
taking and returning one tensor of the same type, with identical op
sequences, become one braid.layer applied by braid.repeat with the
ModuleList's path as prefix (so instance i's parameters are PATH.i.NAME, the
state-dict keys). Anything else is emitted inline, which is the same model.

Patterns: nn.Linear's view/addmm/view is one matmul on [..., K]; torch.matmul's
expand/view/bmm/view is one batched matmul; explicit causal attention is one
braid.attention (see _causal_attention); F.cross_entropy's log_softmax +
nll_loss is braid.cross_entropy. See docs/importing-pytorch.md.
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
                 where: str = "", module: str = "", name: str = "", instance=None):
        self.kind = kind  # "op", "input", "param", "const"
        self.op, self.args, self.kwargs, self.index = op, args, kwargs or {}, index
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype
        self.where, self.module, self.name = where, module, name
        self.instance = instance  # (ModuleList path, child index) while inside a repeated child
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
    layers: List[str]  # the ModuleList paths that became braid.repeat

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
        self.instances: List[Tuple[str, int]] = []  # active ModuleList child calls
        self.calls: List[dict] = []  # ModuleList child calls, in order

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

    def _where(self) -> Tuple[str, str, Optional[Tuple[str, int]]]:
        return _source_line(), (self.modules[-1] if self.modules else ""), \
            (self.instances[0] if self.instances else None)

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
    lists = {name for name, m in module.named_modules() if isinstance(m, torch.nn.ModuleList)}
    handles = []
    for name, m in module.named_modules():
        parent, _, child = name.rpartition(".")
        repeated = parent in lists and child.isdigit()

        def pre(mod, inputs, name=name, parent=parent, child=child, repeated=repeated):
            tracer.modules.append(name)
            if repeated and not tracer.instances:
                ins = [tracer.node_of(t) for t in _flatten(list(inputs)) if isinstance(t, torch.Tensor)]
                tracer.calls.append(dict(list=parent, index=int(child), inputs=ins, start=len(tracer.order)))
                tracer.instances.append((parent, int(child)))
            elif repeated:
                tracer.instances.append((parent, int(child)))

        def post(mod, inputs, output, repeated=repeated):
            tracer.modules.pop()
            if repeated:
                tracer.instances.pop()
                if not tracer.instances:
                    call = tracer.calls[-1]
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
            if self.owner is not None and node.instance != self.owner:
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


def _heads_of(n: Node) -> Optional[Node]:
    """X [B, T, H, D] if n is X.transpose(1, 2), as attention code writes q, k and v."""
    if _is(n, aten.transpose.int) and len(n.shape) == 4 and {n.args[1] % 4, n.args[2] % 4} == {1, 2}:
        return n.args[0].node
    return None


def _fused_attention(e, node: Node) -> Optional[Value]:
    """braid.attention [B, T, H, D] for node = view(bmm(...)) computing attention, or None."""
    if not e.importer.fuse_attention:
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
    masked = probs.args[0].node
    if not _is(masked, aten.masked_fill.Scalar) or masked.args[1].node.kind != "const" or \
            not (isinstance(masked.args[2], float) and masked.args[2] == -math.inf):
        return None
    t = masked.shape[-1]
    mask = masked.args[1].node.value
    if mask.shape[-2:] != (t, t) or mask.numel() != t * t or masked.shape[-2] != t or \
            not torch.equal(mask.reshape(t, t).to(torch.bool), torch.ones(t, t, dtype=torch.bool).triu(1)):
        return None
    scores, scale = masked.args[0].node, 1.0
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
    q, k, v = _heads_of(q4), _heads_of(kt4.args[0].node), _heads_of(v4)
    if q is None or k is None or v is None:
        return None
    return e.body.attention(e.value(q), e.value(k), e.value(v), causal=True, scale=scale)


def _transpose(e, node, x, d0, d1):
    rank = len(x.node.shape)
    if rank == 4 and {d0 % 4, d1 % 4} == {1, 2}:
        fused = _fused_attention(e, x.node)
        if fused is not None:
            return fused  # (att @ v).transpose(1, 2) is braid.attention's own [B, T, H, D]
    perm = list(range(rank))
    d0, d1 = d0 % rank, d1 % rank
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return e.body.transpose(e.value(x.node), perm)


def _t(e, node, x):
    return _transpose(e, node, x, 0, 1) if len(x.node.shape) == 2 else e.value(x.node)


def _permute(e, node, x, dims):
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
    aten.expand.default: _expand,
    aten.t.default: _t, aten.transpose.int: _transpose, aten.permute.default: _permute,
    aten.mm.default: _mm, aten.bmm.default: _mm, aten.addmm.default: _addmm,
    aten.add.Tensor: _binary("add"), aten.sub.Tensor: _binary("sub"),
    aten.mul.Tensor: _binary("mul"), aten.div.Tensor: _binary("div"),
    aten.neg.default: _unary("neg"), aten.exp.default: _unary("exp"), aten.sqrt.default: _unary("sqrt"),
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
    def __init__(self, tracer: _Tracer, loss: Node, inputs: List[Node], fuse_attention: bool):
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
            ok = all(c["inputs"][0].shape == c["outputs"][0].shape == cs[0]["inputs"][0].shape and
                     c["inputs"][0].dtype == c["outputs"][0].dtype for c in cs)
            ok = ok and all(cs[i + 1]["inputs"][0] is cs[i]["outputs"][0] for i in range(len(cs) - 1))
            if ok and all(self.signature(c) == self.signature(cs[0]) for c in cs[1:]):
                group = dict(list=path, calls=cs)
                self.groups[id(cs[-1]["outputs"][0])] = group

    def signature(self, call: dict) -> list:
        """The op sequence of one child call, with names relative to the child."""
        prefix = f"{call['list']}.{call['index']}."
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
                                 local_prefix=f"{path}.0.", owner=(path, 0), importer=self)
                try:
                    layer.yield_(inner.value(first["outputs"][0]))
                except _NotRepeatable:
                    self.module._bodies.remove(layer)
                    del self.groups[id(node)]
                    return e.emit(node)
                group["layer"] = layer
                self.layers.append(path)
            return e.body.repeat(group["layer"], [x], prefix=path, count=len(group["calls"]))

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


def _root(n: Node) -> Node:
    while n.kind == "op" and n.op in (aten.view.default, aten._unsafe_view.default,
                                      aten._reshape_alias.default, aten.clone.default):
        n = n.args[0].node
    return n


def import_module(module: torch.nn.Module, example_inputs, loss: Optional[Callable] = None,
                  fuse_attention: bool = True) -> Imported:
    """Traces `module` on `example_inputs` and returns braid IR with a @forward entry.

    example_inputs: a dict from forward's parameter names to tensors (or a
    tuple, named by forward's signature). Names that forward does not take are
    passed only to `loss`. loss: called as loss(output, inputs) and must return
    a scalar tensor; without it the output must be a scalar tensor, or a tuple
    holding exactly one scalar tensor (nanoGPT's (logits, loss)).
    fuse_attention: write explicit causal attention (softmax of masked,
    scaled q @ k^T, times v) as one braid.attention; False keeps it op by op.
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
    arg_specs = [Arg(n.name, _ttype(n), ranges.get(id(n))) for n in inputs]
    importer = _Importer(tracer, loss_node, inputs, fuse_attention)
    importer.find_groups()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    text = importer.build(arg_specs)
    used = {n.name for n in tracer.order if n.kind == "param"}
    weights = {name: p.detach().clone() for name, p in module.named_parameters() if name in used}
    return Imported(text, weights, importer.layers)

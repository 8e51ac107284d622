"""Checks the runtime's CPU kernels and memory (braid/rt/kernels.h, memory.h).

Each kernel runs through ctypes on seeded random f32 inputs and is compared
with a float64 reference computed with NumPy or PyTorch from the same f32
values, following the op's definition in lib/Eval/BraidOpsEval.cpp;
gradient kernels are also compared with torch.autograd where the gradient is
the definition. Tolerance: the relative error max|kernel - ref| / max|ref| of
every result must be at most 1e-5 (f32 rounding and f32 GEMM accumulation,
measured against the largest magnitude as in test_ops_vs_torch.py).

The library is $BRAID_RT_KERNELS_LIB (ctest sets it to the built target),
else lib/libbraid_rt_kernels_shared.so in the build that holds the tools
($BRAID_BIN_DIR/../lib, by default <repo>/build/lib). The tests fail, naming
the path, when it is missing: a missing build must not pass for a green run.
"""

import ctypes
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import bin_dir

LIB_PATH = Path(os.environ.get("BRAID_RT_KERNELS_LIB")
                or bin_dir().parent / "lib" / "libbraid_rt_kernels_shared.so")
TOLERANCE = 1e-5
OK, INVALID_ARGUMENT = 0, 1
GELU_EXACT, GELU_TANH = 0, 1
SUM, MEAN, MAX = 0, 1, 2
CONSTANT, LINEAR, COSINE = 0, 1, 2

# Argument codes: p pointer, q int64_t, d double, i int (flags, enums), f float.
_C = {"p": ctypes.c_void_p, "q": ctypes.c_int64, "d": ctypes.c_double,
      "i": ctypes.c_int, "f": ctypes.c_float, "I": ctypes.c_int32}
SIGNATURES = {
    "matmul_f32": "v ppqpqpiip",
    **{f"{op}_f32": "v ppqpqpp" for op in ("add", "sub", "mul", "div")},
    **{f"{op}_f32": "v pqp" for op in ("neg", "exp", "sqrt", "rsqrt", "relu", "silu")},
    "round_bf16_f32": "v pqp",
    "pack_bf16_f32": "v pqp", "unpack_bf16_f32": "v pqp", "copy_bf16": "v pqp",
    "gelu_f32": "v pqip",
    "softmax_f32": "v pqqqp",
    "layer_norm_f32": "v pppqqdp",
    "rms_norm_f32": "v ppqqdp",
    "embedding_f32": "i ppqqqp",
    "embedding_f32_i64": "i ppqqqp",
    "rotary_f32": "v pqqqqdip",
    "attention_f32": "i pppqqqqqqidp",
    "cross_entropy_f32": "i ppqqp",
    "cross_entropy_f32_i64": "i ppqqp",
    "copy_f32": "v pqp", "copy_i32": "v pqp",
    "fill_f32": "v fqp", "fill_i32": "v Iqp",
    "transpose_f32": "v pqppp", "transpose_i32": "v pqppp",
    "reduce_f32": "v pqpqpip",
    "broadcast_to_f32": "v pqpqpp", "broadcast_to_i32": "v pqpqpp",
    "slice_f32": "v pqppppp", "slice_i32": "v pqppppp",
    "concat_f32": "v pqqpqpp", "concat_i32": "v pqqpqpp",
    "relu_grad_f32": "v ppqp", "silu_grad_f32": "v ppqp", "gelu_grad_f32": "v ppqip",
    "layer_norm_grad_f32": "v pppqqdp", "rms_norm_grad_f32": "v pppqqdp",
    "embedding_grad_f32": "i ppqqqp", "embedding_grad_f32_i64": "i ppqqqp",
    "attention_grad_f32": "i ppppqqqqqqidqp",
    "attention_grad_all_f32": "i ppppqqqqqqidppp",
    # Not in kernels.h: the untiled baseline (kernels/internal.h).
    "cpu_attention_sgemm_f32": "i pppqqqqqqidp",
    "cpu_attention_grad_all_sgemm_f32": "i ppppqqqqqqidppp",
    "cross_entropy_grad_f32": "i pppqqp", "cross_entropy_grad_f32_i64": "i pppqqp",
    "reduce_max_grad_f32": "i ppqpqpp",
    "slice_grad_f32": "v pqppppp",
    "lr_schedule_f32": "v piddqqp",
    "lr_schedule_f32_i64": "v piddqqp",
    "global_norm_f32": "v ppqp", "sum_squares_f32": "v ppqp",
    "clip_coefficient_f32": "v pdp",
    "adamw_update_f32": "v pppppppqddddppp",
    "adamw_update_f32_i64": "v pppppppqddddppp",
    "sgd_update_f32": "v pppppqdidpp",
    "vocab_parallel_max_f32": "v pqqp",
    "vocab_parallel_sum_exp_f32": "v ppqqp",
    "vocab_parallel_picked_f32": "v ppqqqp", "vocab_parallel_picked_f32_i64": "v ppqqqp",
    "vocab_parallel_combine_f64": "v pqqip",
    "vocab_parallel_loss_f32": "v pppqp",
    "vocab_parallel_cross_entropy_grad_f32": "v pppppqqqp",
    "vocab_parallel_cross_entropy_grad_f32_i64": "v pppppqqqp",
    "vocab_parallel_embedding_f32": "v ppqqqqp", "vocab_parallel_embedding_f32_i64": "v ppqqqqp",
    "vocab_parallel_embedding_grad_f32": "i ppqqqqp",
    "vocab_parallel_embedding_grad_f32_i64": "i ppqqqqp",
}


class Kernels:
    """The kernels of the shared library, called with NumPy arrays."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))
        for name, sig in SIGNATURES.items():
            fn = getattr(self.lib, "braid_rt_" + name)
            ret, args = sig.split(" ")
            fn.restype = None if ret == "v" else ctypes.c_int
            # Every kernel takes its stream first (NULL: the default one).
            fn.argtypes = [ctypes.c_void_p] + [_C[c] for c in args]

    def __getattr__(self, name):
        fn = getattr(self.lib, "braid_rt_" + name)

        def call(*args):
            keep = []  # keeps temporaries alive across the call
            converted = []
            for a in args:
                if isinstance(a, np.ndarray):
                    assert a.flags.c_contiguous
                    keep.append(a)
                    converted.append(a.ctypes.data)
                elif isinstance(a, (list, tuple)):  # a shape or axes array
                    arr = np.array(list(a) or [0], dtype=np.int64)
                    keep.append(arr)
                    converted.append(arr.ctypes.data)
                else:
                    converted.append(a)
            return fn(None, *converted)

        return call


@pytest.fixture(scope="module")
def k():
    if not LIB_PATH.is_file():
        pytest.fail(f"the kernel library {LIB_PATH} does not exist: build the target "
                    f"braid_rt_kernels_shared, or set BRAID_RT_KERNELS_LIB to the library "
                    f"(or BRAID_BIN_DIR to the bin/ of the build that has it)", pytrace=False)
    try:
        return Kernels(LIB_PATH)
    except (OSError, AttributeError) as err:
        pytest.fail(f"cannot load the kernel library {LIB_PATH}: {err}", pytrace=False)


RNG = np.random.default_rng(20240607)


def normal(*shape):
    return np.asarray(RNG.normal(size=shape), dtype=np.float32)


def positive(*shape):
    return np.asarray(np.abs(RNG.normal(size=shape)) + 0.5, dtype=np.float32)


def out(*shape, dtype=np.float32):
    return np.full(shape, np.nan if dtype == np.float32 else -1, dtype=dtype)


def f64(a):
    return np.asarray(a, dtype=np.float64)


def check(got, ref, tol=TOLERANCE):
    got, ref = f64(got), f64(ref)
    assert got.shape == ref.shape or got.size == ref.size, (got.shape, ref.shape)
    got = got.reshape(ref.shape)
    assert np.all(np.isfinite(got)), "non-finite result"
    scale = max(np.abs(ref).max(initial=0.0), 1e-30)
    err = np.abs(got - ref).max(initial=0.0) / scale
    assert err <= tol, f"relative error {err:.3g} > {tol}"


def t64(a, grad=False):
    return torch.tensor(f64(a), requires_grad=grad)


# ---------------------------------------------------------------------------
# Matmul and elementwise arithmetic
# ---------------------------------------------------------------------------

MATMUL_CASES = [
    ((3, 4), (4, 5), False, False),
    ((4, 3), (4, 5), True, False),
    ((3, 4), (5, 4), False, True),
    ((4, 3), (5, 4), True, True),
    ((2, 3, 7, 4), (4, 5), False, False),  # batch folded into M
    ((2, 1, 3, 4), (5, 4, 6), False, False),  # broadcast batch dims
    ((3, 4), (2, 4, 5), False, False),  # rhs batch only
    ((2, 3, 4, 6), (3, 5, 4), True, True),  # rank 4 x rank 3, transposes
    ((6, 1, 8, 16), (1, 3, 16, 8), False, False),
    ((0, 3, 4), (4, 5), False, False),  # empty batch
    ((3, 0), (0, 5), False, False),  # K = 0: zeros
    # Above the threads' threshold (m n k >= 2^18): split by rows, by
    # columns (n > m, transposed operands), a batch one GEMM per thread,
    # and a batch of 3 whose GEMMs are each split.
    ((257, 96), (96, 70), False, False),
    ((96, 130), (150, 96), True, True),
    ((4, 64, 96), (4, 64, 80), True, False),
    ((3, 70, 64), (3, 90, 64), False, True),
]


@pytest.mark.parametrize("a_shape,b_shape,ta,tb", MATMUL_CASES)
def test_matmul(k, a_shape, b_shape, ta, tb):
    a, b = normal(*a_shape), normal(*b_shape)
    am = np.swapaxes(f64(a), -1, -2) if ta else f64(a)
    bm = np.swapaxes(f64(b), -1, -2) if tb else f64(b)
    ref = np.matmul(am, bm)
    c = out(*ref.shape)
    k.matmul_f32(a, b, a.ndim, a.shape, b.ndim, b.shape, int(ta), int(tb), c)
    check(c, ref)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
BROADCAST_SHAPES = [
    ((2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((5, 1, 3, 1), (4, 1, 2)),
    ((1, 6), (5, 1)),
    ((64, 1024), (1024,)),  # above the threading threshold
]


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("a_shape,b_shape", BROADCAST_SHAPES)
def test_binary(k, op, a_shape, b_shape):
    a = normal(*a_shape)
    b = positive(*b_shape) if op == "div" else normal(*b_shape)
    ref = BINARY[op](f64(a), f64(b))
    c = out(*ref.shape)
    getattr(k, op + "_f32")(a, b, a.ndim, a.shape, b.ndim, b.shape, c)
    check(c, ref)


def gelu_exact(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


UNARY = {
    "neg": (normal, lambda x: -x),
    "exp": (normal, np.exp),
    "sqrt": (positive, np.sqrt),
    "rsqrt": (positive, lambda x: 1.0 / np.sqrt(x)),
    "relu": (normal, lambda x: np.where(x > 0, x, 0.0)),
    "silu": (normal, lambda x: x / (1.0 + np.exp(-x))),
}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("shape", [(7,), (3, 5, 2), (200, 300)])
def test_unary(k, op, shape):
    gen, ref = UNARY[op]
    x = gen(*shape)
    y = out(*shape)
    getattr(k, op + "_f32")(x, x.size, y)
    check(y, ref(f64(x)))


def test_round_bf16(k):
    # braid.round to bf16 (the bf16-mixed programs' rounding): each float to
    # the nearest bf16 value, ties to even, exactly as PyTorch's bf16
    # conversion; NaN stays NaN, overflow goes to infinity.
    normal_values = np.concatenate([RNG.normal(size=2000) * s for s in (1e-30, 1e-3, 1.0, 1e4, 1e30)])
    bf16_values = np.arange(0, 1 << 16, 7, dtype=np.uint32) << 16  # every 7th bf16
    ties = bf16_values | 0x8000  # exactly halfway between two bf16 values
    near = np.concatenate([bf16_values | 0x7FFF, bf16_values | 0x8001, bf16_values | 0x0001])
    special = np.array([0.0, -0.0, np.inf, -np.inf, 3.4028235e38, -3.4028235e38,
                        1.4e-45, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], dtype=np.float32)
    x = np.concatenate([normal_values.astype(np.float32),
                        np.concatenate([ties, near]).view(np.float32), special])
    x = x[~np.isnan(x)]
    y = np.empty_like(x)
    k.round_bf16_f32(x, x.size, y)
    expected = torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy()
    bad = np.flatnonzero(y.view(np.uint32) != expected.view(np.uint32))
    assert bad.size == 0, f"{bad.size} of {x.size} differ, e.g. {x[bad[:3]]} -> {y[bad[:3]]}, " \
                          f"expected {expected[bad[:3]]}"
    assert np.isinf(y[x == 3.4028235e38]).all(), "the largest float rounds up to infinity"
    nan = np.array([np.nan, -np.nan], dtype=np.float32)
    k.round_bf16_f32(nan, nan.size, nan)
    assert np.isnan(nan).all()


def test_pack_bf16(k):
    # bf16 storage (braid-legalize-bf16): pack gives each float's nearest
    # bf16 value as 16 bits, the bits braid.round keeps (so exact on the
    # values bf16-mixed programs store), unpack gives it back bit for bit;
    # a NaN stays a quiet NaN of the same sign; copy_bf16 moves the bits.
    bf16_values = np.arange(0, 1 << 16, 3, dtype=np.uint32) << 16
    x = np.concatenate([(RNG.normal(size=4000) * 10.0 ** RNG.integers(-30, 30, 4000)).astype(np.float32),
                        (bf16_values | 0x8000).view(np.float32),  # ties
                        (bf16_values | 0x7FFF).view(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, 3.4028235e38], dtype=np.float32)])
    x = x[~np.isnan(x)]
    rounded = np.empty_like(x)
    k.round_bf16_f32(x, x.size, rounded)
    packed = np.empty(x.size, dtype=np.uint16)
    k.pack_bf16_f32(x, x.size, packed)
    bad = np.flatnonzero(packed != (rounded.view(np.uint32) >> 16))
    assert bad.size == 0, f"{bad.size} of {x.size} differ, e.g. {x[bad[:3]]} -> {packed[bad[:3]]}"
    unpacked = np.empty_like(x)
    k.unpack_bf16_f32(packed, x.size, unpacked)
    assert (unpacked.view(np.uint32) == rounded.view(np.uint32)).all()
    copied = np.zeros_like(packed)
    k.copy_bf16(packed, x.size, copied)
    assert (copied == packed).all()
    nan = np.array([0x7F800001, 0xFF800001, 0x7FC00000], dtype=np.uint32).view(np.float32)
    bits = np.empty(3, dtype=np.uint16)
    k.pack_bf16_f32(nan, 3, bits)
    assert (bits == [0x7FC0, 0xFFC0, 0x7FC0]).all(), [hex(b) for b in bits]


def test_unary_in_place(k):
    x = normal(4, 5)
    ref = np.exp(f64(x))
    k.exp_f32(x, x.size, x)
    check(x, ref)


@pytest.mark.parametrize("approximate", [GELU_EXACT, GELU_TANH])
def test_gelu(k, approximate):
    x = (normal(40, 50) * 3).astype(np.float32)
    y = out(*x.shape)
    k.gelu_f32(x, x.size, approximate, y)
    ref = gelu_tanh(f64(x)) if approximate == GELU_TANH else gelu_exact(f64(x))
    check(y, ref)
    torch_ref = F.gelu(t64(x), approximate="tanh" if approximate == GELU_TANH else "none")
    check(y, torch_ref.numpy())


# ---------------------------------------------------------------------------
# Normalisation, embeddings, attention, loss
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((4, 10), 1), ((2, 3, 5), 1), ((2, 3, 5), 0),
                                        ((3, 4, 2, 6), 3), ((128, 512), 1)])
def test_softmax(k, shape, axis):
    x = (normal(*shape) * 3).astype(np.float32)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    y = out(*shape)
    k.softmax_f32(x, outer, shape[axis], inner, y)
    check(y, torch.softmax(t64(x), dim=axis).numpy())


@pytest.mark.parametrize("shape,eps", [((4, 16), 1e-5), ((2, 3, 33), 1e-3), ((300, 256), 1e-5)])
def test_layer_norm_and_grad(k, shape, eps):
    x, g, b, dy = normal(*shape), normal(shape[-1]), normal(shape[-1]), normal(*shape)
    rows, cols = x.size // shape[-1], shape[-1]
    y = out(*shape)
    k.layer_norm_f32(x, g, b, rows, cols, eps, y)
    tx = t64(x, True)
    ty = F.layer_norm(tx, (cols,), t64(g), t64(b), eps)
    check(y, ty.detach().numpy())
    ty.backward(t64(dy))
    dx = out(*shape)
    k.layer_norm_grad_f32(x, g, dy, rows, cols, eps, dx)
    check(dx, tx.grad.numpy())


def rms_norm_ref(x, g, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


@pytest.mark.parametrize("shape,eps", [((4, 16), 1e-6), ((2, 3, 33), 1e-2), ((300, 256), 1e-6)])
def test_rms_norm_and_grad(k, shape, eps):
    x, g, dy = normal(*shape), normal(shape[-1]), normal(*shape)
    rows, cols = x.size // shape[-1], shape[-1]
    y = out(*shape)
    k.rms_norm_f32(x, g, rows, cols, eps, y)
    tx = t64(x, True)
    ty = rms_norm_ref(tx, t64(g), eps)
    check(y, ty.detach().numpy())
    ty.backward(t64(dy))
    dx = out(*shape)
    k.rms_norm_grad_f32(x, g, dy, rows, cols, eps, dx)
    check(dx, tx.grad.numpy())


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_embedding_and_grad(k, id_dtype):
    suffix = "_i64" if id_dtype == np.int64 else ""
    V, H = 11, 6
    table = normal(V, H)
    ids = RNG.integers(0, V, size=(3, 5)).astype(id_dtype)
    ids[0, :3] = 4  # repeated ids accumulate in the gradient
    y = out(3, 5, H)
    assert getattr(k, "embedding_f32" + suffix)(table, ids, V, H, ids.size, y) == OK
    tt = t64(table, True)
    ty = F.embedding(torch.tensor(ids.astype(np.int64)), tt)
    check(y, ty.detach().numpy())
    dy = normal(3, 5, H)
    ty.backward(t64(dy))
    dt = out(V, H)
    assert getattr(k, "embedding_grad_f32" + suffix)(ids, dy, ids.size, V, H, dt) == OK
    check(dt, tt.grad.numpy())


@pytest.mark.parametrize("bad", [-1, 11, 1 << 20])
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_embedding_out_of_range(k, bad, id_dtype):
    suffix = "_i64" if id_dtype == np.int64 else ""
    V, H = 11, 4
    table, ids = normal(V, H), np.array([1, 2, bad, 3], dtype=id_dtype)
    y = out(4, H)
    assert getattr(k, "embedding_f32" + suffix)(table, ids, V, H, 4, y) == INVALID_ARGUMENT
    assert getattr(k, "embedding_grad_f32" + suffix)(ids, normal(4, H), 4, V, H,
                                                     out(V, H)) == INVALID_ARGUMENT


def rotary_ref(x, base, inverse):
    B, S, A, D = x.shape
    half = D // 2
    i = np.arange(half)
    angle = np.arange(S)[:, None] * np.power(base, -2.0 * i / D)[None, :]  # [S, half]
    c = np.cos(angle)[None, :, None, :]
    s = (-1.0 if inverse else 1.0) * np.sin(angle)[None, :, None, :]
    x0, x1 = x[..., :half], x[..., half:]
    return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)


@pytest.mark.parametrize("shape,base", [((2, 5, 3, 8), 10000.0), ((1, 7, 2, 260), 500.0)])
@pytest.mark.parametrize("inverse", [0, 1])
def test_rotary(k, shape, base, inverse):
    x = normal(*shape)
    y = out(*shape)
    k.rotary_f32(x, *shape, base, inverse, y)
    check(y, rotary_ref(f64(x), base, inverse))
    back = out(*shape)
    k.rotary_f32(y, *shape, base, 1 - inverse, back)
    check(back, f64(x))


def attention_ref(q, k_, v, causal, scale):
    """BraidOpsEval.cpp's attention in torch float64 (differentiable)."""
    B, S, Hq, D = q.shape
    T, Hkv = k_.shape[1], k_.shape[2]
    group = Hq // Hkv
    kk = k_.repeat_interleave(group, dim=2)  # query head h uses KV head h // group
    vv = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bshd,bthd->bhst", q, kk) * scale
    if causal:
        mask = torch.ones(S, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("bhst,bthd->bshd", p, vv)


ATTENTION_CASES = [
    # B, S, T, Hq, Hkv, D, causal, scale attribute (None: 1/sqrt(D))
    (2, 5, 7, 4, 2, 8, False, None),
    (2, 6, 6, 4, 4, 8, True, None),
    (1, 9, 9, 6, 2, 16, True, 0.3),
    (3, 4, 3, 2, 1, 5, False, 1.7),
    (1, 64, 64, 4, 1, 32, True, None),
    # More than one 64-row block (attention.c's kBlock), sizes not a
    # multiple of it: the online softmax's rescaling across key blocks, the
    # causal diagonal block and the skipped blocks above it.
    (1, 130, 130, 2, 2, 16, False, None),
    (2, 130, 130, 4, 2, 8, True, None),
    (1, 200, 200, 6, 2, 24, True, 0.2),
    (1, 70, 150, 3, 1, 20, False, None),
    (1, 128, 128, 2, 1, 64, True, None),
]


@pytest.mark.parametrize("B,S,T,Hq,Hkv,D,causal,scale", ATTENTION_CASES)
def test_attention_and_grad(k, B, S, T, Hq, Hkv, D, causal, scale):
    q, kk, v, dy = normal(B, S, Hq, D), normal(B, T, Hkv, D), normal(B, T, Hkv, D), normal(B, S, Hq, D)
    eff = scale if scale is not None else 1.0 / math.sqrt(D)
    y = out(B, S, Hq, D)
    assert k.attention_f32(q, kk, v, B, S, T, Hq, Hkv, D, int(causal), eff, y) == OK
    tq, tk, tv = t64(q, True), t64(kk, True), t64(v, True)
    ty = attention_ref(tq, tk, tv, causal, eff)
    check(y, ty.detach().numpy())
    ty.backward(t64(dy))
    refs = [tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()]
    for operand, ref in enumerate(refs):
        g = out(*ref.shape)
        assert k.attention_grad_f32(q, kk, v, dy, B, S, T, Hq, Hkv, D, int(causal), eff,
                                    operand, g) == OK
        check(g, ref)
    dq, dk, dv = out(*q.shape), out(*kk.shape), out(*v.shape)
    assert k.attention_grad_all_f32(q, kk, v, dy, B, S, T, Hq, Hkv, D, int(causal), eff,
                                    dq, dk, dv) == OK
    for got, ref in zip((dq, dk, dv), refs):
        check(got, ref)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_tiled_vs_sgemm(k, causal):
    # The tiled kernels against the SGEMM kernels they replaced (kept in the
    # library as the baseline), on a size where scores span many blocks and
    # the rows' maxima change between key blocks (scores of a wide range).
    B, S, Hq, Hkv, D = 2, 300, 4, 2, 32
    q, kk, v, dy = (normal(B, S, h, D) for h in (Hq, Hkv, Hkv, Hq))
    q *= 3.0
    eff = 1.0 / math.sqrt(D)
    args = (B, S, S, Hq, Hkv, D, int(causal), eff)
    y, y0 = out(B, S, Hq, D), out(B, S, Hq, D)
    assert k.attention_f32(q, kk, v, *args, y) == OK
    assert k.cpu_attention_sgemm_f32(q, kk, v, *args, y0) == OK
    check(y, y0)
    got = [out(*q.shape), out(*kk.shape), out(*v.shape)]
    ref = [out(*q.shape), out(*kk.shape), out(*v.shape)]
    assert k.attention_grad_all_f32(q, kk, v, dy, *args, *got) == OK
    assert k.cpu_attention_grad_all_sgemm_f32(q, kk, v, dy, *args, *ref) == OK
    for g, r in zip(got, ref):
        check(g, r)


def test_attention_grad_bad_operand(k):
    q = normal(1, 2, 1, 4)
    assert k.attention_grad_f32(q, q, q, q, 1, 2, 2, 1, 1, 4, 0, 0.5, 3,
                                out(1, 2, 1, 4)) == INVALID_ARGUMENT


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(6, 10), (2, 3, 17), (64, 1000)])
def test_cross_entropy_and_grad(k, label_dtype, shape):
    suffix = "_i64" if label_dtype == np.int64 else ""
    V = shape[-1]
    logits = (normal(*shape) * 2).astype(np.float32)
    labels = RNG.integers(0, V, size=shape[:-1]).astype(label_dtype)
    rows = labels.size
    loss = out(1)
    assert getattr(k, "cross_entropy_f32" + suffix)(logits, labels, rows, V, loss) == OK
    tl = t64(logits, True)
    tloss = F.cross_entropy(tl.reshape(rows, V), torch.tensor(labels.reshape(-1).astype(np.int64)))
    check(loss, tloss.detach().numpy().reshape(1))
    g = np.array([1.7], dtype=np.float32)
    tloss.backward(torch.tensor(1.7, dtype=torch.float64))
    dl = out(*shape)
    assert getattr(k, "cross_entropy_grad_f32" + suffix)(logits, labels, g, rows, V, dl) == OK
    check(dl, tl.grad.numpy())


@pytest.mark.parametrize("bad", [-3, 10])
def test_cross_entropy_out_of_range(k, bad):
    logits, labels = normal(3, 10), np.array([0, bad, 2], dtype=np.int32)
    assert k.cross_entropy_f32(logits, labels, 3, 10, out(1)) == INVALID_ARGUMENT
    assert k.cross_entropy_grad_f32(logits, labels, np.ones(1, np.float32), 3, 10,
                                    out(3, 10)) == INVALID_ARGUMENT


def test_cross_entropy_no_rows(k):
    loss = out(1)
    assert k.cross_entropy_f32(normal(1, 4), np.zeros(1, np.int32), 0, 4, loss) == OK
    assert loss[0] == 0.0


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("parts,rows,cols", [(2, 6, 10), (3, 4, 17), (4, 64, 250)])
def test_vocab_parallel_cross_entropy(k, label_dtype, parts, rows, cols):
    # The vocabulary split into `parts` column blocks: each block's local
    # statistics, combined in block order, give the whole row's cross-entropy
    # and each block's columns of its gradient, as a NumPy float64 reference
    # on the whole logits does.
    suffix = "_i64" if label_dtype == np.int64 else ""
    V = parts * cols
    logits = (normal(rows, V) * 3).astype(np.float32)
    labels = RNG.integers(0, V, size=rows).astype(label_dtype)
    blocks = [np.ascontiguousarray(logits[:, p * cols:(p + 1) * cols]) for p in range(parts)]
    local = np.zeros((parts, rows))
    for p, b in enumerate(blocks):
        m = np.zeros(rows)
        k.vocab_parallel_max_f32(b, rows, cols, m)
        assert np.array_equal(m, f64(b).max(axis=1))
        local[p] = m
    mx = np.zeros(rows)
    k.vocab_parallel_combine_f64(local, parts, rows, MAX, mx)
    ref_mx = f64(logits).max(axis=1)
    assert np.array_equal(mx, ref_mx)
    for p, b in enumerate(blocks):
        sm = np.zeros(rows)
        k.vocab_parallel_sum_exp_f32(b, mx, rows, cols, sm)
        local[p] = sm
    total = np.zeros(rows)
    k.vocab_parallel_combine_f64(local, parts, rows, SUM, total)
    e = np.exp(f64(logits) - ref_mx[:, None])
    ref_sum = e.sum(axis=1)
    assert np.allclose(total, ref_sum, rtol=1e-12, atol=0)
    for p, b in enumerate(blocks):
        picked = np.full(rows, np.nan)
        getattr(k, "vocab_parallel_picked_f32" + suffix)(b, labels, rows, cols, p * cols, picked)
        mine = (labels >= p * cols) & (labels < (p + 1) * cols)
        ref = np.where(mine, f64(logits)[np.arange(rows), labels], 0.0)
        assert np.array_equal(picked, ref), p
        local[p] = picked
    target = np.zeros(rows)
    k.vocab_parallel_combine_f64(local, parts, rows, SUM, target)
    loss = out(1)
    k.vocab_parallel_loss_f32(mx, total, target, rows, loss)
    ref_loss = np.mean(np.log(ref_sum) + ref_mx - f64(logits)[np.arange(rows), labels])
    check(loss, np.array([ref_loss]))
    g = np.array([1.7], dtype=np.float32)
    ref_grad = 1.7 / rows * (e / ref_sum[:, None])
    ref_grad[np.arange(rows), labels] -= 1.7 / rows
    for p, b in enumerate(blocks):
        dl = out(rows, cols)
        getattr(k, "vocab_parallel_cross_entropy_grad_f32" + suffix)(
            b, labels, g, mx, total, rows, cols, p * cols, dl)
        check(dl, ref_grad[:, p * cols:(p + 1) * cols])


def test_vocab_parallel_no_rows_and_empty_block(k):
    loss = np.array([5.0], np.float32)
    k.vocab_parallel_loss_f32(np.zeros(1), np.ones(1), np.zeros(1), 0, loss)
    assert loss[0] == 0.0
    m = np.zeros(2)
    k.vocab_parallel_max_f32(normal(2, 1), 2, 0, m)
    assert np.all(m == -np.inf)


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_vocab_parallel_embedding(k, id_dtype):
    # Block p of the table's rows: ids it holds get their row, others zeros,
    # so the blocks' results sum to the whole embedding; the gradient's block
    # is the whole gradient's rows.
    suffix = "_i64" if id_dtype == np.int64 else ""
    parts, cols, H, n = 3, 5, 4, 40
    V = parts * cols
    table, dy = normal(V, H), normal(n, H)
    ids = RNG.integers(0, V, size=n).astype(id_dtype)
    whole = np.zeros((n, H))
    ref_grad = np.zeros((V, H))
    np.add.at(ref_grad, ids.astype(np.int64), f64(dy))
    for p in range(parts):
        y = np.full((n, H), np.nan, np.float32)
        getattr(k, "vocab_parallel_embedding_f32" + suffix)(
            np.ascontiguousarray(table[p * cols:(p + 1) * cols]), ids, cols, H, n, p * cols, y)
        whole += y
        dt = out(cols, H)
        assert getattr(k, "vocab_parallel_embedding_grad_f32" + suffix)(
            ids, dy, n, cols, H, p * cols, dt) == OK
        check(dt, ref_grad[p * cols:(p + 1) * cols])
    assert np.array_equal(whole, f64(table)[ids.astype(np.int64)])


# ---------------------------------------------------------------------------
# Shape ops and constants
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_copy_and_fill(k, dtype):
    sfx = "f32" if dtype == np.float32 else "i32"
    x = (normal(3, 7) * 100).astype(dtype)
    y = out(3, 7, dtype=dtype)
    getattr(k, "copy_" + sfx)(x, x.size, y)
    assert np.array_equal(x, y)
    getattr(k, "fill_" + sfx)(dtype(5), y.size, y)
    assert np.all(y == 5)


TRANSPOSE_CASES = [((3, 4), (1, 0)), ((2, 3, 4), (0, 2, 1)), ((2, 3, 4), (2, 0, 1)),
                   ((2, 3, 4, 5), (3, 1, 0, 2)), ((2, 3, 4, 5), (0, 1, 2, 3)),
                   ((2, 3, 4, 5), (0, 2, 1, 3)), ((300, 200), (1, 0))]


@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_transpose(k, shape, perm, dtype):
    x = (normal(*shape) * 1000).astype(dtype)
    ref = np.ascontiguousarray(np.transpose(x, perm))
    y = out(*ref.shape, dtype=dtype)
    getattr(k, "transpose_" + ("f32" if dtype == np.float32 else "i32"))(x, x.ndim, shape, perm, y)
    assert np.array_equal(y, ref)


REDUCE_CASES = [((3, 4), (1,)), ((3, 4), (0,)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (1,)),
                ((2, 3, 4, 5), (1, 3)), ((2, 3, 4, 5), (0, 1, 2, 3)), ((2, 3, 4, 5), (3, 0)),
                ((256, 384), (1,)), ((256, 384), (0,)), ((5,), ()),
                # The last dimension kept: a bias gradient's axes, and above
                # the threads' threshold (2^22 elements) the result rows
                # split over the threads.
                ((8, 64, 96), (0, 1)), ((4, 1100, 1000), (0,)), ((2, 3, 700, 1000), (0, 2))]


@pytest.mark.parametrize("kind", [SUM, MEAN, MAX])
@pytest.mark.parametrize("shape,axes", REDUCE_CASES)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce(k, kind, shape, axes, keep_dims):
    x = normal(*shape)
    fn = {SUM: np.sum, MEAN: np.mean, MAX: np.max}[kind]
    ref = fn(f64(x), axis=tuple(axes), keepdims=keep_dims)
    y = out(*np.shape(ref))
    k.reduce_f32(x, x.ndim, shape, len(axes), axes, kind, y)
    check(y, ref)


@pytest.mark.parametrize("shape,axes", [((3, 4), (1,)), ((2, 3, 4), (0, 2)), ((2, 3, 4, 5), (1, 3)),
                                        ((2, 3, 4), (0, 1, 2)), ((4, 6), (0,))])
def test_reduce_max_grad(k, shape, axes):
    x = RNG.integers(-3, 3, size=shape).astype(np.float32)  # many ties
    tx = t64(x, True)
    ty = torch.amax(tx, dim=tuple(axes))  # splits the gradient evenly among ties
    dy = normal(*ty.shape)
    ty.backward(t64(dy))
    dx = out(*shape)
    assert k.reduce_max_grad_f32(x, dy, x.ndim, shape, len(axes), axes, dx) == OK
    check(dx, tx.grad.numpy())


BROADCAST_CASES = [((3, 1), (2, 3, 4)), ((), (2, 3)), ((4,), (3, 4)), ((2, 1, 3), (2, 5, 3)),
                   ((1,), (1,)), ((1, 512), (128, 512))]


@pytest.mark.parametrize("in_shape,out_shape", BROADCAST_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_broadcast(k, in_shape, out_shape, dtype):
    x = np.asarray(normal(*in_shape) * 100, dtype=dtype)
    y = out(*out_shape, dtype=dtype)
    sfx = "f32" if dtype == np.float32 else "i32"
    getattr(k, "broadcast_to_" + sfx)(x, x.ndim, in_shape, len(out_shape), out_shape, y)
    assert np.array_equal(y, np.broadcast_to(x, out_shape))


SLICE_CASES = [((10,), (2,), (9,), None), ((10,), (1,), (10,), (3,)),
               ((4, 6), (1, 2), (3, 6), None), ((5, 7, 3), (0, 1, 1), (5, 7, 3), (2, 3, 1)),
               ((3, 4, 5, 6), (1, 0, 2, 1), (3, 4, 5, 6), (1, 2, 2, 2)),
               ((2, 8), (0, 3), (2, 4), None)]


def slice_out_shape(start, limit, stride):
    stride = stride or (1,) * len(start)
    return tuple(-(-(l - s) // st) for s, l, st in zip(start, limit, stride))


@pytest.mark.parametrize("shape,start,limit,stride", SLICE_CASES)
def test_slice_and_grad(k, shape, start, limit, stride):
    x = normal(*shape)
    steps = stride or (1,) * len(shape)
    index = tuple(slice(s, l, st) for s, l, st in zip(start, limit, steps))
    ref = np.ascontiguousarray(x[index])
    assert ref.shape == slice_out_shape(start, limit, stride)
    y = out(*ref.shape)
    k.slice_f32(x, x.ndim, shape, start, stride, ref.shape, y)
    assert np.array_equal(y, ref)
    xi = (x * 100).astype(np.int32)
    yi = out(*ref.shape, dtype=np.int32)
    k.slice_i32(xi, x.ndim, shape, start, stride, ref.shape, yi)
    assert np.array_equal(yi, xi[index])
    # slice_grad: autograd of the slice scatters into zeros.
    tx = t64(x, True)
    tx[index].backward(t64(y))
    dx = out(*shape)
    k.slice_grad_f32(y, x.ndim, ref.shape, start, stride, shape, dx)
    check(dx, tx.grad.numpy())


CONCAT_CASES = [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1),
                ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], 1), ([(2, 3, 4), (2, 3, 2)], 2),
                ([(1, 2, 3, 4), (1, 2, 3, 4)], 3), ([(3,), (0,), (2,)], 0)]


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_concat(k, shapes, axis, dtype):
    xs = [(normal(*s) * 100).astype(dtype) for s in shapes]
    ref = np.concatenate(xs, axis=axis)
    y = out(*ref.shape, dtype=dtype)
    ptrs = (ctypes.c_void_p * len(xs))(*[x.ctypes.data for x in xs])
    sfx = "f32" if dtype == np.float32 else "i32"
    getattr(k, "concat_" + sfx)(ctypes.cast(ptrs, ctypes.c_void_p), len(xs), ref.ndim, ref.shape,
                                axis, [s[axis] for s in shapes], y)
    assert np.array_equal(y, ref)


# ---------------------------------------------------------------------------
# Activation gradients
# ---------------------------------------------------------------------------

ACTIVATIONS = {
    "relu_grad": lambda x: torch.relu(x),
    "silu_grad": lambda x: F.silu(x),
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
@pytest.mark.parametrize("shape", [(3, 5), (300, 200)])
def test_activation_grad(k, op, shape):
    x, dy = (normal(*shape) * 3).astype(np.float32), normal(*shape)
    x[0, 0] = 0.0  # relu'(0) = 0 as in the reference (x > 0)
    tx = t64(x, True)
    ACTIVATIONS[op](tx).backward(t64(dy))
    dx = out(*shape)
    getattr(k, op + "_f32")(x, dy, x.size, dx)
    check(dx, tx.grad.numpy())


@pytest.mark.parametrize("approximate", [GELU_EXACT, GELU_TANH])
def test_gelu_grad(k, approximate):
    x, dy = (normal(50, 40) * 3).astype(np.float32), normal(50, 40)
    tx = t64(x, True)
    F.gelu(tx, approximate="tanh" if approximate == GELU_TANH else "none").backward(t64(dy))
    dx = out(*x.shape)
    k.gelu_grad_f32(x, dy, x.size, approximate, dx)
    check(dx, tx.grad.numpy())


# ---------------------------------------------------------------------------
# In place: generated code's buffer reuse passes a result equal to an operand
# (kernels.h, docs/codegen.md#memory); the bits and the speed are those of
# distinct buffers.
# ---------------------------------------------------------------------------

def in_place_cases(k, n):
    """(name, kernel call taking the result, operands, index of the operand
    the result may be) of every kernel that accepts a result equal to an
    operand, on n elements."""
    x, dy, pos = normal(n) * 3, normal(n), positive(n)
    one = positive(1)
    cases = [(f"{op}", lambda a, r, op=op: getattr(k, op + "_f32")(a[0], n, r), [x], 0)
             for op in ("neg", "exp", "relu", "silu", "round_bf16")]
    cases += [(f"{op}", lambda a, r, op=op: getattr(k, op + "_f32")(a[0], n, r), [pos], 0)
              for op in ("sqrt", "rsqrt")]
    for approx in (GELU_EXACT, GELU_TANH):
        cases.append((f"gelu {approx}", lambda a, r, ap=approx: k.gelu_f32(a[0], n, ap, r), [x], 0))
        for i in (0, 1):
            cases.append((f"gelu_grad {approx} over {i}",
                          lambda a, r, ap=approx: k.gelu_grad_f32(a[0], a[1], n, ap, r), [x, dy], i))
    for op in ("relu_grad", "silu_grad"):
        for i in (0, 1):
            cases.append((f"{op} over {i}", lambda a, r, op=op: getattr(k, op + "_f32")(a[0], a[1], n, r),
                          [x, dy], i))
    for op in ("add", "sub", "mul", "div"):
        for i in (0, 1):
            cases.append((f"{op} over {i}", lambda a, r, op=op: getattr(k, op + "_f32")(
                a[0], a[1], 1, (n,), 1, (n,), r), [x, pos], i))
        cases.append((f"{op} broadcast", lambda a, r, op=op: getattr(k, op + "_f32")(
            a[0], a[1], 1, (n,), 1, (1,), r), [x, one], 0))
    return cases


@pytest.mark.parametrize("n", [37, 100003])
def test_in_place_same_bits(k, n):
    # Above 2^15 elements on the threads, an odd count leaving a remainder
    # after the vector loop.
    for name, call, operands, i in in_place_cases(k, n):
        separate = out(n)
        call([a.copy() for a in operands], separate)
        args = [a.copy() for a in operands]
        call(args, args[i])
        assert np.array_equal(args[i].view(np.uint32), separate.view(np.uint32)), name
    p, g, m, v = normal(n), normal(n), normal(n) * 0.1, positive(n) * 0.01
    hp = (np.array([1e-3], np.float32), np.array([4], np.int32), np.array([0.5], np.float32), n,
          0.9, 0.95, 1e-8, 0.1)
    outs = [out(n) for _ in range(3)]
    k.adamw_update_f32(p, g, m, v, *hp, *outs)
    pi, mi, vi = p.copy(), m.copy(), v.copy()
    k.adamw_update_f32(pi, g, mi, vi, *hp, pi, mi, vi)
    assert all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
               for a, b in zip((pi, mi, vi), outs)), "adamw"
    lr, scale = np.array([0.1], np.float32), np.array([0.25], np.float32)
    np_, nb = out(n), out(n)
    k.sgd_update_f32(p, g, m, lr, scale, n, 0.9, 1, 0.01, np_, nb)
    pi, bi = p.copy(), m.copy()
    k.sgd_update_f32(pi, g, bi, lr, scale, n, 0.9, 1, 0.01, pi, bi)
    assert np.array_equal(pi, np_) and np.array_equal(bi, nb), "sgd"


# SHA-256 (first 16 hex digits) of the results on ACTIVATION_INPUTS, as the
# kernels computed them before issue 15 made in-place calls vectorize (and
# as braid/rt/elementwise_math.h's formulas give them on any x86-64, scalar
# or vectorized, native or portable: arithmetic only, no FMA). A change of
# these bits changes what programs compute, fused or not.
ACTIVATION_DIGESTS = {
    "gelu tanh": "507ef7ad167cf121",
    "gelu_grad tanh": "9ca0a8ede608cf2d",
    "silu": "6af62cbe1f07ce1a",
    "silu_grad": "15c7da854a91a50c",
    "exp": "c53fac57fa04313e",
}


def activation_inputs():
    n = 120011
    x = np.linspace(-40.0, 40.0, n - 8).astype(np.float32)
    x = np.concatenate([x, np.array([0.0, -0.0, 1e-40, -1e-40, 88.5, -88.5, 104.0, -104.0],
                                    np.float32)])
    dy = (((np.arange(n) * 37) % 101 - 50) / 50.0).astype(np.float32)
    return x, dy


def test_activation_bits_unchanged(k):
    import hashlib
    x, dy = activation_inputs()
    n = x.size
    calls = {
        "gelu tanh": lambda r, xx, d: k.gelu_f32(xx, n, GELU_TANH, r),
        "gelu_grad tanh": lambda r, xx, d: k.gelu_grad_f32(xx, d, n, GELU_TANH, r),
        "silu": lambda r, xx, d: k.silu_f32(xx, n, r),
        "silu_grad": lambda r, xx, d: k.silu_grad_f32(xx, d, n, r),
        "exp": lambda r, xx, d: k.exp_f32(xx, n, r),
    }
    got = {}
    for name, call in calls.items():
        r = out(n)
        call(r, x.copy(), dy.copy())
        got[name] = hashlib.sha256(r.tobytes()).hexdigest()[:16]
        xx, d = x.copy(), dy.copy()  # in place over the last operand
        call(d if "grad" in name else xx, xx, d)
        r2 = d if "grad" in name else xx
        assert hashlib.sha256(r2.tobytes()).hexdigest()[:16] == got[name], f"{name} in place"
    if os.environ.get("BRAID_PRINT_DIGESTS"):
        print(got)
    assert got == ACTIVATION_DIGESTS


# The mechanism that makes in-place calls as fast as separate buffers (issue
# 15): Clang guards a vector loop over pointers it cannot tell apart with a
# runtime check that they are a vector apart (instructions named diff.check,
# bound0/1 and found.conflict in the IR), which an in-place call fails, so it
# ran the scalar loop, 14 times slower for the tanh GELU gradient. Every loop
# of these files says omp simd (internal.h's BRAID_RT_PARALLEL_FOR_SIMD or
# BRAID_RT_SIMD) and so has no check; a loop without it that vectorizes has
# one. The time itself is bench/in_place_kernels.py's.
IN_PLACE_SOURCES = ("elementwise.c", "optim.c")
SIMD_MARKER = re.compile(r"\bBRAID_RT_(?:PARALLEL_FOR_SIMD|SIMD)\b")
# Loops from float to bf16 storage (uint16_t) or back: the element types
# alone rule out aliasing, so no check is there to remove, with or without
# the pragmas.
CONVERTING = re.compile(r"\bbraid_rt_(?:bf16_bits_of|float_of_bf16)\(")
ALIAS_CHECK = re.compile(
    r"^\s+%(?:diff\.check|found\.conflict|bound\d)[\w.]*\s*=.*!dbg (!\d+)", re.M)


def simd_loop_lines(source):
    """{first line: lines} of each loop a SIMD marker governs; a marker in a
    macro's definition (DEFINE_BINARY) stands for the macro's invocations,
    where the debug locations of its expansion are."""
    lines = source.splitlines()
    loops = {}
    for i, line in enumerate(lines):
        if not SIMD_MARKER.search(line) or line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):  # in a #define
            j = i
            while not lines[j].startswith("#define"):
                j -= 1
            macro = re.match(r"#define (\w+)\(", lines[j]).group(1)
            loops.update({n: {n} for n, use in enumerate(lines, 1)
                          if use.startswith(macro + "(")})
            continue
        f = end = i + 1  # the `for` after the marker, to its body's end
        if "{" in lines[f]:
            depth = lines[f].count("{") - lines[f].count("}")
            while depth > 0:
                end += 1
                depth += lines[end].count("{") - lines[end].count("}")
        else:  # one statement
            end += 1
            while not lines[end].rstrip().endswith(";"):
                end += 1
        loops[f + 1] = set(range(f + 1, end + 2))
    return loops


def compiled_ir(entry, *extra):
    """The LLVM IR, with debug locations, of a compile command of
    compile_commands.json, with `extra` flags after the build's."""
    import shlex
    import subprocess
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT"):
            skip = True
        elif a not in ("-c", "-MD"):
            kept.append(a)
    if "clang" not in Path(kept[0]).name:
        pytest.skip(f"the kernels are built with {kept[0]}; the check reads Clang's IR")
    r = subprocess.run(kept + ["-S", "-emit-llvm", "-g", "-fno-discard-value-names",
                               "-o", "-", *extra], cwd=entry["directory"],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(kept)}: {r.stderr}"
    return r.stdout


def alias_check_lines(ir):
    """The source lines of the alias checks in `ir`."""
    locations = dict(re.findall(r"^(!\d+) = !DILocation\(line: (\d+)", ir, re.M))
    return {int(locations[ref]) for ref in ALIAS_CHECK.findall(ir)}


def test_in_place_loops_have_no_alias_check():
    commands_file = bin_dir().parent / "compile_commands.json"
    if not commands_file.is_file():
        pytest.fail(f"{commands_file} does not exist: configure the build that holds "
                    f"{bin_dir()} (CMAKE_EXPORT_COMPILE_COMMANDS is on)", pytrace=False)
    import json
    # Every variant of the library (portable, native, shared) as built.
    entries = [e for e in json.loads(commands_file.read_text())
               if Path(e["file"]).parent.name == "kernels"
               and Path(e["file"]).name in IN_PLACE_SOURCES]
    assert {Path(e["file"]).name for e in entries} == set(IN_PLACE_SOURCES), entries
    irs = [(e, compiled_ir(e)) for e in entries]
    # A sanitized build (scripts/sanitize.sh) vectorizes none of the loops:
    # no vector loop, no check to look for. All variants or none.
    vectorized = ["vector.body:" in ir for _, ir in irs]
    if not any(vectorized):
        pytest.skip(f"the build of {commands_file.parent} vectorizes no loop of "
                    f"{', '.join(IN_PLACE_SOURCES)} (a sanitizer's flags?): no alias check "
                    f"to look for")
    assert all(vectorized), "vectorized in some variants only: " + ", ".join(
        e["command"] for (e, _), v in zip(irs, vectorized) if not v)
    controlled = set()
    for entry, ir in irs:
        name = Path(entry["file"]).name
        checked = alias_check_lines(ir)
        assert not checked, f"{name}: alias checks at lines {sorted(checked)} " \
                            f"({entry['command']})"
        if name in controlled:
            continue
        # The control: without the pragmas every marked loop has the check,
        # so that its absence above is the pragmas' doing.
        controlled.add(name)
        source = Path(entry["file"]).read_text()
        loops = simd_loop_lines(source)
        assert loops, f"no BRAID_RT_*SIMD loop in {name}"
        unmarked = alias_check_lines(compiled_ir(entry, "-fno-openmp", "-fno-openmp-simd",
                                                 "-UBRAID_RT_OPENMP_SIMD"))
        source_lines = source.splitlines()
        for first, body in loops.items():
            if any(CONVERTING.search(source_lines[n - 1]) for n in body):
                continue
            assert body & unmarked, \
                f"{name}:{first}: no alias check found even without omp simd"


# ---------------------------------------------------------------------------
# Training ops
# ---------------------------------------------------------------------------

def lr_ref(t, decay, lr, min_lr, warmup, total):
    if t < warmup:
        return lr * (t + 1) / warmup
    p = min(1.0, (t - warmup) / max(1.0, float(total - warmup)))
    return {CONSTANT: lr, LINEAR: min_lr + (lr - min_lr) * (1 - p),
            COSINE: min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * p))}[decay]


@pytest.mark.parametrize("decay", [CONSTANT, LINEAR, COSINE])
@pytest.mark.parametrize("warmup,total", [(10, 100), (0, 50), (5, 5), (0, 1)])
@pytest.mark.parametrize("step_dtype", [np.int32, np.int64])
def test_lr_schedule(k, decay, warmup, total, step_dtype):
    fn = k.lr_schedule_f32 if step_dtype == np.int32 else k.lr_schedule_f32_i64
    for t in [0, 1, 4, 9, 10, 11, 37, 99, 100, 250]:
        y = out(1)
        fn(np.array([t], dtype=step_dtype), decay, 3e-4, 3e-5, warmup, total, y)
        check(y, [lr_ref(t, decay, 3e-4, 3e-5, warmup, total)])


def test_norms_and_clip(k):
    # The last spans more than one group of 64 chunks of 2^14 elements.
    xs = [normal(3, 4), normal(5), normal(200, 300), normal(1100, 1000)]
    ptrs = (ctypes.c_void_p * 4)(*[x.ctypes.data for x in xs])
    counts = [x.size for x in xs]
    ss = sum(float(np.sum(f64(x) ** 2)) for x in xs)
    y = out(1)
    k.sum_squares_f32(ctypes.cast(ptrs, ctypes.c_void_p), counts, 4, y)
    check(y, [ss])
    k.global_norm_f32(ctypes.cast(ptrs, ctypes.c_void_p), counts, 4, y)
    check(y, [math.sqrt(ss)])
    for norm, max_norm in [(0.5, 1.0), (10.0, 1.0), (0.0, 2.0), (3.0, 3.0)]:
        k.clip_coefficient_f32(np.array([norm], np.float32), max_norm, y)
        check(y, [min(1.0, max_norm / (np.float32(norm) + 1e-6))])


def adamw_ref(p, g, m, v, lr, step, scale, b1, b2, eps, wd):
    p, g, m, v = f64(p), f64(g) * float(scale), f64(m), f64(v)
    t = step + 1
    nm = b1 * m + (1 - b1) * g
    nv = b2 * v + (1 - b2) * g * g
    np_ = p * (1 - lr * wd) - lr * (nm / (1 - b1 ** t)) / (np.sqrt(nv / (1 - b2 ** t)) + eps)
    return np_, nm, nv


@pytest.mark.parametrize("step_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("count", [17, 100000])
def test_adamw_update(k, step_dtype, count):
    fn = k.adamw_update_f32 if step_dtype == np.int32 else k.adamw_update_f32_i64
    p, g, m, v = normal(count), normal(count), normal(count) * 0.1, positive(count) * 0.01
    lr, scale = np.array([1e-3], np.float32), np.array([0.5], np.float32)
    step = np.array([4], step_dtype)
    hp = (0.9, 0.95, 1e-8, 0.1)
    outs = [out(count) for _ in range(3)]
    fn(p, g, m, v, lr, step, scale, count, *hp, *outs)
    for got, ref in zip(outs, adamw_ref(p, g, m, v, float(lr[0]), 4, scale[0], *hp)):
        check(got, ref)
    # In place (results aliasing param, m, v) gives the same.
    pi, mi, vi = p.copy(), m.copy(), v.copy()
    fn(pi, g, mi, vi, lr, step, scale, count, *hp, pi, mi, vi)
    for got, ref in zip((pi, mi, vi), outs):
        assert np.array_equal(got, ref)


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_skipped_step_keeps_state(k, bad):
    # A non-finite gradient scale (dynamic loss scaling's overflow) skips the
    # step: parameters and state come out as they went in, bit for bit,
    # separate or in place (a vector copy onto itself, see optim.c).
    n = 100003
    p, g, m, v = normal(n), normal(n), normal(n) * 0.1, positive(n) * 0.01
    lr, scale, step = np.array([1e-3], np.float32), np.array([bad], np.float32), \
        np.array([4], np.int32)
    outs = [out(n) for _ in range(3)]
    k.adamw_update_f32(p, g, m, v, lr, step, scale, n, 0.9, 0.95, 1e-8, 0.1, *outs)
    assert all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
               for a, b in zip(outs, (p, m, v))), "adamw"
    pi, mi, vi = p.copy(), m.copy(), v.copy()
    k.adamw_update_f32(pi, g, mi, vi, lr, step, scale, n, 0.9, 0.95, 1e-8, 0.1, pi, mi, vi)
    assert all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
               for a, b in zip((pi, mi, vi), (p, m, v))), "adamw in place"
    np_, nb = out(n), out(n)
    k.sgd_update_f32(p, g, m, lr, scale, n, 0.9, 1, 0.01, np_, nb)
    assert np.array_equal(np_, p) and np.array_equal(nb, m), "sgd"
    pi, bi = p.copy(), m.copy()
    k.sgd_update_f32(pi, g, bi, lr, scale, n, 0.9, 1, 0.01, pi, bi)
    assert np.array_equal(pi, p) and np.array_equal(bi, m), "sgd in place"


def test_adamw_matches_torch(k):
    """The first step from zero state is torch.optim.AdamW's."""
    p, g = normal(50), normal(50)
    tp = torch.tensor(f64(p), requires_grad=True)
    opt = torch.optim.AdamW([tp], lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    for step in range(3):
        tp.grad = torch.tensor(f64(g) * (step + 1))
        opt.step()
    cur, m, v = p.copy(), np.zeros(50, np.float32), np.zeros(50, np.float32)
    for step in range(3):
        gs = (g * (step + 1)).astype(np.float32)
        k.adamw_update_f32(cur, gs, m, v, np.array([1e-2], np.float32),
                           np.array([step], np.int32), np.ones(1, np.float32), 50,
                           0.9, 0.999, 1e-8, 0.01, cur, m, v)
    check(cur, tp.detach().numpy())


@pytest.mark.parametrize("nesterov", [0, 1])
@pytest.mark.parametrize("momentum,wd", [(0.9, 0.01), (0.0, 0.0)])
def test_sgd_update(k, nesterov, momentum, wd):
    n = 1000
    p, g, buf = normal(n), normal(n), normal(n)
    lr, scale = np.array([0.1], np.float32), np.array([0.25], np.float32)
    np_, nb = out(n), out(n)
    k.sgd_update_f32(p, g, buf, lr, scale, n, momentum, nesterov, wd, np_, nb)
    gi = f64(g) * float(scale[0]) + wd * f64(p)
    rb = momentum * f64(buf) + gi
    rp = f64(p) - float(lr[0]) * (gi + momentum * rb if nesterov else rb)
    check(np_, rp)
    check(nb, rb)
    if nesterov and momentum == 0.0:
        return  # torch.optim.SGD rejects Nesterov without momentum
    # Against torch.optim.SGD from a zero buffer, two steps.
    tp = torch.tensor(f64(p), requires_grad=True)
    opt = torch.optim.SGD([tp], lr=0.1, momentum=momentum, nesterov=bool(nesterov),
                          weight_decay=wd)
    cur, b = p.copy(), np.zeros(n, np.float32)
    for _ in range(2):
        tp.grad = torch.tensor(f64(g))
        opt.step()
        k.sgd_update_f32(cur, g, b, lr, np.ones(1, np.float32), n, momentum, nesterov, wd,
                         cur, b)
    check(cur, tp.detach().numpy())


def header_kernels():
    """Each kernel declared in kernels.h (and the CPU baselines of
    kernels/internal.h) with its parameters."""
    root = Path(__file__).resolve().parents[2]
    text = "\n".join((root / path).read_text() for path in (
        "runtime/include/braid/rt/kernels.h", "runtime/src/cpu/kernels/internal.h"))
    decls = {}
    for m in re.finditer(r"^(?:void|braid_rt_status_t)\s+braid_rt_(\w+)\(([^)]*)\)",
                         text, re.M):
        decls[m.group(1)] = m.group(2)
    return decls


def test_signatures_match_header():
    # The ctypes signatures above must follow kernels.h: every kernel takes
    # its stream first, then what SIGNATURES lists.
    decls = header_kernels()
    assert len(decls) >= 50, f"parsed only {len(decls)} kernels from kernels.h"
    for name, params in decls.items():
        first = params.split(",")[0].split()
        assert first[:2] == ["braid_rt_stream_t", "*stream"], (name, params)
    for name, sig in SIGNATURES.items():
        assert name in decls, f"{name} is not declared in kernels.h or internal.h"
        assert len(decls[name].split(",")) == 1 + len(sig.split(" ")[1]), (name, decls[name])


def test_memory(k):
    # CPU backend: device memory is aligned host memory; the copies are
    # memcpy and a copy onto itself is nothing.
    lib = k.lib
    lib.braid_rt_memory_alloc.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    lib.braid_rt_memory_alloc.restype = ctypes.c_int
    lib.braid_rt_memory_free.argtypes = [ctypes.c_void_p]
    for fn in ("copy_to_device", "copy_to_host", "copy"):
        f = getattr(lib, "braid_rt_memory_" + fn)
        f.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t]
        f.restype = ctypes.c_int
    assert lib.braid_rt_memory_is_host() == 1
    lib.braid_rt_memory_synchronize.argtypes = [ctypes.c_void_p]
    lib.braid_rt_memory_synchronize.restype = ctypes.c_int
    assert lib.braid_rt_memory_synchronize(None) == OK  # nothing is pending on CPU
    for nbytes in (0, 1, 100, 4096 + 3):
        ptr = ctypes.c_void_p()
        assert lib.braid_rt_memory_alloc(nbytes, ctypes.byref(ptr)) == OK
        assert ptr.value and ptr.value % 64 == 0, (nbytes, ptr.value)
        lib.braid_rt_memory_free(ptr)
    huge = ctypes.c_void_p(1)
    assert lib.braid_rt_memory_alloc(2**64 - 8, ctypes.byref(huge)) == 2  # OUT_OF_MEMORY
    assert huge.value is None
    src = normal(257)
    dev = ctypes.c_void_p()
    assert lib.braid_rt_memory_alloc(src.nbytes, ctypes.byref(dev)) == OK
    assert lib.braid_rt_memory_copy_to_device(None, dev, src.ctypes.data, src.nbytes) == OK
    mid = out(257)
    assert lib.braid_rt_memory_copy(None, mid.ctypes.data, dev, src.nbytes) == OK
    assert lib.braid_rt_memory_copy(None, mid.ctypes.data, mid.ctypes.data, src.nbytes) == OK
    back = out(257)
    assert lib.braid_rt_memory_copy_to_host(None, back.ctypes.data, dev, src.nbytes) == OK
    assert np.array_equal(back, src) and np.array_equal(mid, src)
    assert lib.braid_rt_memory_copy(None, None, dev, 4) == INVALID_ARGUMENT
    lib.braid_rt_memory_free(dev)
    lib.braid_rt_memory_free(None)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_updates_skip_on_nonfinite_scale(k, bad):
    # braid-train-step makes the scale non-finite when the loss or the
    # gradient norm is: the update is skipped, results equal the inputs.
    n = 300
    p, g, m, v = normal(n), normal(n), normal(n), positive(n)
    lr, scale = np.array([0.1], np.float32), np.array([bad], np.float32)
    step = np.array([3], np.int32)
    np_, nm, nv = out(n), out(n), out(n)
    k.adamw_update_f32(p, g, m, v, lr, step, scale, n, 0.9, 0.999, 1e-8, 0.01, np_, nm, nv)
    assert np.array_equal(np_, p) and np.array_equal(nm, m) and np.array_equal(nv, v)
    nb = out(n)
    k.sgd_update_f32(p, g, m, lr, scale, n, 0.9, 1, 0.01, np_, nb)
    assert np.array_equal(np_, p) and np.array_equal(nb, m)


def thread_digests():
    """Digests of the results of the kernels that split their work over
    OpenMP threads, on fixed inputs large enough to be split; printed as
    JSON by a child process of test_results_do_not_depend_on_thread_count."""
    import hashlib
    import json
    k = Kernels(LIB_PATH)
    rng = np.random.default_rng(11)

    def n(*shape):
        return np.asarray(rng.normal(size=shape), dtype=np.float32)

    digests = {}

    def record(name, *arrays):
        digests[name] = hashlib.sha1(b"".join(a.tobytes() for a in arrays)).hexdigest()

    big = n(4, 1100, 1000)
    for kind in (SUM, MEAN, MAX):
        for axes in ((0,), (0, 1), (2,)):
            shape = [d for i, d in enumerate(big.shape) if i not in axes]
            y = out(*shape)
            k.reduce_f32(big, 3, big.shape, len(axes), axes, kind, y)
            record(f"reduce {kind} {axes}", y)
    x = n(4, 128, 256)
    xs = [n(2100, 1000), n(5), n(70000)]
    ptrs = (ctypes.c_void_p * 3)(*[a.ctypes.data for a in xs])
    y = out(1)
    k.sum_squares_f32(ctypes.cast(ptrs, ctypes.c_void_p), [a.size for a in xs], 3, y)
    record("sum_squares", y)
    logits, labels = n(512, 1000) * 3, rng.integers(0, 1000, size=512).astype(np.int32)
    loss, dl = out(1), out(512, 1000)
    k.cross_entropy_f32(logits, labels, 512, 1000, loss)
    k.cross_entropy_grad_f32(logits, labels, np.array([1.3], np.float32), 512, 1000, dl)
    record("cross_entropy", loss, dl)
    rows = x.reshape(512, 256)
    g, b, dy = n(256), n(256), n(512, 256)
    y, dx = out(512, 256), out(512, 256)
    k.layer_norm_f32(rows, g, b, 512, 256, 1e-5, y)
    k.layer_norm_grad_f32(rows, g, dy, 512, 256, 1e-5, dx)
    record("layer_norm", y, dx)
    k.softmax_f32(rows, 512, 256, 1, y)
    record("softmax", y)
    k.gelu_f32(rows, rows.size, GELU_TANH, y)
    k.gelu_grad_f32(rows, dy, rows.size, GELU_TANH, dx)
    record("gelu", y, dx)
    y = out(4, 128, 256)
    k.add_f32(x, b, 3, x.shape, 1, b.shape, y)
    record("add", y)
    k.transpose_f32(x, 3, x.shape, (0, 2, 1), out(4, 256, 128))
    k.copy_f32(x, x.size, y)
    record("copy", y)
    q, kk, v, dyq = n(2, 128, 4, 32), n(2, 128, 4, 32), n(2, 128, 4, 32), n(2, 128, 4, 32)
    ya, grads = out(2, 128, 4, 32), [out(2, 128, 4, 32) for _ in range(3)]
    k.attention_f32(q, kk, v, 2, 128, 128, 4, 4, 32, 1, 32 ** -0.5, ya)
    k.attention_grad_all_f32(q, kk, v, dyq, 2, 128, 128, 4, 4, 32, 1, 32 ** -0.5, *grads)
    record("attention", ya, *grads)
    ids = rng.integers(0, 1000, size=512).astype(np.int32)
    dt = out(1000, 256)
    k.embedding_grad_f32(ids, dy, 512, 1000, 256, dt)
    record("embedding_grad", dt)
    count = 100000
    p, gr, m, vv = n(count), n(count), n(count) * 0.1, np.abs(n(count)) * 0.01
    outs = [out(count) for _ in range(3)]
    k.adamw_update_f32(p, gr, m, vv, np.array([1e-3], np.float32), np.array([4], np.int32),
                       np.array([0.5], np.float32), count, 0.9, 0.95, 1e-8, 0.1, *outs)
    record("adamw", *outs)
    print(json.dumps(digests))


def test_results_do_not_depend_on_thread_count():
    # Each kernel that splits its work over threads gives every element to
    # one thread, which computes it as one thread alone would, and its sums
    # (loss, sum of squares) add their parts in an order fixed by the
    # sizes: the same bits on 1, 2 and 3 threads (3 split unevenly). SGEMM
    # is not among them: OpenBLAS's kernel and its accumulation depend on
    # the shape of each thread's block (docs/runtime.md#compute-kernels).
    if not LIB_PATH.is_file():
        pytest.fail(f"the kernel library {LIB_PATH} does not exist", pytrace=False)
    import json
    import subprocess
    import sys
    here = Path(__file__).resolve().parent
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import test_runtime_kernels as t; t.thread_digests()")
    results = {}
    for threads in (1, 2, 3):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), BRAID_RT_KERNELS_LIB=str(LIB_PATH))
        run = subprocess.run([sys.executable, "-c", code, str(here)], env=env,
                             capture_output=True, text=True, check=True)
        results[threads] = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(results[1]) == 19
    for threads in (2, 3):
        differ = [name for name in results[1] if results[threads][name] != results[1][name]]
        assert not differ, f"results on {threads} threads differ from 1 thread's: {differ}"

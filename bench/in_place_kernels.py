#!/usr/bin/python3
"""In-place elementwise kernels (issue 15): each kernel that generated code
calls with its result over an operand, timed in place against the same call
into a separate buffer, in one run.

Workload: --elements f32 elements (default 256 x 512, the GPT's MLP
activation that braidc's buffer reuse hands the tanh GELU gradient), through
ctypes on the kernel library of this build (the portable one). Kernels:
gelu_grad tanh (dx over dy), silu_grad (dx over dy), gelu tanh (y over x),
exp (y over x), add (out over a) and adamw_update (all three results over
their inputs). Each repeat calls both ways alternately, so that each pair
sees the same load, after restoring the operands (not timed: an in-place call
overwrites them); the best of each and the median of the pairs' ratios (in
place / separate) are printed, with the machine's load average at the start
and the end. Threads: OMP_NUM_THREADS as set by --threads (default 1).

Before the kernels' loops said omp simd, Clang's alias check sent every
in-place call to the scalar loop: 3.6x (portable) to 14x (native, AVX-512)
the separate call for gelu_grad tanh. python/tests/test_runtime_kernels.py's
test_in_place_loops_have_no_alias_check checks the mechanism without timing.

    bench/in_place_kernels.py [--elements N] [--repeats 100] [--threads 1]
                              [--lib PATH] [--check]

--check (ctest's bench-in-place-kernels, on small sizes): exits 1 unless
every kernel ran, in place and separate gave the same bits, and every time
is positive. No ratio is checked: a busy machine must not fail it.
"""

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GELU_TANH = 1
P, Q, I, D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
SIGNATURES = {
    "braid_rt_gelu_grad_f32": [P, P, P, Q, I, P],
    "braid_rt_silu_grad_f32": [P, P, P, Q, P],
    "braid_rt_gelu_f32": [P, P, Q, I, P],
    "braid_rt_exp_f32": [P, P, Q, P],
    "braid_rt_add_f32": [P, P, P, Q, P, Q, P, P],
    "braid_rt_adamw_update_f32": [P, P, P, P, P, P, P, P, Q, D, D, D, D, P, P, P],
}


def library(path):
    lib = ctypes.CDLL(str(path))
    for name, argtypes in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = None
        fn.argtypes = argtypes
    return lib


def cases(lib, n, rng):
    """(name, operands, call(operands, results), indices of the operands the
    results are in place)."""
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    dy = rng.standard_normal(n).astype(np.float32)
    m = (rng.standard_normal(n) * 0.1).astype(np.float32)
    v = (rng.random(n) * 0.01 + 1e-3).astype(np.float32)
    shape = np.array([n], np.int64)
    lr, step, scale = (np.array([1e-3], np.float32), np.array([4], np.int32),
                       np.array([0.5], np.float32))
    d = lambda a: a.ctypes.data  # noqa: E731
    return [
        ("gelu_grad tanh", [x, dy],
         lambda a, r: lib.braid_rt_gelu_grad_f32(None, d(a[0]), d(a[1]), n, GELU_TANH, d(r[0])),
         [1]),
        ("silu_grad", [x, dy],
         lambda a, r: lib.braid_rt_silu_grad_f32(None, d(a[0]), d(a[1]), n, d(r[0])), [1]),
        ("gelu tanh", [x],
         lambda a, r: lib.braid_rt_gelu_f32(None, d(a[0]), n, GELU_TANH, d(r[0])), [0]),
        ("exp", [x], lambda a, r: lib.braid_rt_exp_f32(None, d(a[0]), n, d(r[0])), [0]),
        ("add", [x, dy],
         lambda a, r: lib.braid_rt_add_f32(None, d(a[0]), d(a[1]), 1, d(shape), 1, d(shape),
                                           d(r[0])), [0]),
        ("adamw_update", [x, dy, m, v],
         lambda a, r: lib.braid_rt_adamw_update_f32(
             None, d(a[0]), d(a[1]), d(a[2]), d(a[3]), d(lr), d(step), d(scale), n, 0.9, 0.95,
             1e-8, 0.1, d(r[0]), d(r[1]), d(r[2])), [0, 2, 3]),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=256 * 512)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--lib", help="the kernel library (default: this build's)")
    ap.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"))
    args = ap.parse_args()
    lib_path = Path(args.lib or os.environ.get("BRAID_RT_KERNELS_LIB")
                    or Path(args.bin_dir).parent / "lib" / "libbraid_rt_kernels_shared.so")
    if not lib_path.is_file():
        sys.exit(f"in_place_kernels.py: the kernel library {lib_path} does not exist")
    # Before the library loads, so that OpenMP reads it.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    lib = library(lib_path)
    n = args.elements
    print(f"load average {os.getloadavg()[0]:.2f}; {n} elements, OMP_NUM_THREADS="
          f"{args.threads}, best of {args.repeats} pairs; {lib_path}")
    print(f"{'kernel':>15} {'separate us':>12} {'in place us':>12} {'best x':>7} "
          f"{'median x':>8} {'same bits':>9}")
    ok = True
    for name, operands, call, over in cases(lib, n, np.random.default_rng(0)):
        times = {"separate": [], "in place": []}
        separate = [np.zeros(n, np.float32) for _ in over]  # written: resident
        same = True
        for _ in range(args.repeats):
            for how in times:
                a = [o.copy() for o in operands]
                r = separate if how == "separate" else [a[i] for i in over]
                t0 = time.perf_counter()
                call(a, r)
                times[how].append(time.perf_counter() - t0)
                if how == "separate":
                    expected = [x.copy() for x in r]
                else:
                    same &= all(np.array_equal(x.view(np.uint32), y.view(np.uint32))
                                for x, y in zip(r, expected))
        ok &= same and all(t > 0 for ts in times.values() for t in ts)
        sep, inp = times["separate"], times["in place"]
        ratio = median(i / s for i, s in zip(inp, sep))
        print(f"{name:>15} {1e6 * min(sep):>12.1f} {1e6 * min(inp):>12.1f} "
              f"{min(inp) / min(sep):>7.2f} {ratio:>8.2f} {'yes' if same else 'NO':>9}",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.check and not ok:
        print("in_place_kernels.py --check: FAILED (results in place differ from a separate "
              "buffer's, or a time is not positive)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

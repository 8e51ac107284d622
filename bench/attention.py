#!/usr/bin/python3
"""Attention kernels: the tiled (flash-attention style) CPU kernels against
the SGEMM kernels they replaced, in one invocation.

Workload: causal attention (the GPT's), batch 4, 8 heads, head dim 64, at
sequence lengths 256, 512 and 1024 (--seqs), forward (braid_rt_attention_f32
vs braid_rt_cpu_attention_sgemm_f32) and backward (the three gradients in
one call: braid_rt_attention_grad_all_f32 vs
braid_rt_cpu_attention_grad_all_sgemm_f32), through ctypes on the kernel
library of this build (the portable one; its block products are chosen per
CPU at load time, OpenBLAS chooses its own kernels too). The two kernels run
alternately, --repeats pairs each, so that each pair sees the same load;
the best of each and the median of the pairs' ratios are printed, with the
machine's load average at the start and the end. Threads: OMP_NUM_THREADS
and OPENBLAS_NUM_THREADS as set by --threads (default: both unset).

Memory: each kernel also runs once in a fresh process that allocates and
touches its inputs and outputs, warms the thread pool on a tiny call, then
makes one call; the growth of the process's peak RSS (ru_maxrss) over that
call is the kernel's scratch as the system saw it (the SGEMM kernels hold a
seq x seq score matrix, twice in the backward; the tiled ones O(64 x (64 +
dim)) floats per thread).

Results: each pair's outputs are compared; the tiled and SGEMM results must
agree within 1e-5 relative to the largest magnitude (another summation
order), else the script exits 1.

    bench/attention.py [--seqs 256,512,1024] [--batch 4] [--heads 8] [--dim 64]
                       [--repeats 5] [--threads N] [--no-causal] [--check]

--check (ctest's bench-attention, on small sizes): exits 1 unless every
kernel ran, returned OK, the results agree and every time is positive.
"""

import argparse
import ctypes
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-5

P, Q, I, D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
FORWARD = {"tiled": "braid_rt_attention_f32", "sgemm": "braid_rt_cpu_attention_sgemm_f32"}
BACKWARD = {"tiled": "braid_rt_attention_grad_all_f32",
            "sgemm": "braid_rt_cpu_attention_grad_all_sgemm_f32"}


def library(path):
    lib = ctypes.CDLL(str(path))
    for name in FORWARD.values():
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [P, P, P, P] + [Q] * 6 + [I, D, P]
    for name in BACKWARD.values():
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [P, P, P, P, P] + [Q] * 6 + [I, D, P, P, P]
    return lib


class Problem:
    def __init__(self, batch, seq, heads, dim, causal, seed=0):
        rng = np.random.default_rng(seed)
        shape = (batch, seq, heads, dim)
        # f32 directly: no f64 temporaries to raise the peak RSS before a call.
        self.q, self.k, self.v, self.dy = (
            rng.standard_normal(shape, dtype=np.float32) for _ in range(4))
        # Written (np.full), so that their pages are resident before a call.
        self.y = np.full(shape, 0.0, np.float32)
        self.grads = [np.full(shape, 0.0, np.float32) for _ in range(3)]
        self.args = (batch, seq, seq, heads, heads, dim, int(causal), 1.0 / math.sqrt(dim))

    def call(self, lib, kind, which):
        a = self.args
        if kind == "forward":
            return getattr(lib, FORWARD[which])(
                None, self.q.ctypes.data, self.k.ctypes.data, self.v.ctypes.data, *a,
                self.y.ctypes.data)
        return getattr(lib, BACKWARD[which])(
            None, self.q.ctypes.data, self.k.ctypes.data, self.v.ctypes.data,
            self.dy.ctypes.data, *a, *(g.ctypes.data for g in self.grads))

    def outputs(self, kind):
        return [self.y.copy()] if kind == "forward" else [g.copy() for g in self.grads]


def rel_err(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def rss_growth(lib_path, batch, seq, heads, dim, causal, kind, which):
    """Peak-RSS growth (KiB) of one call, measured in a fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, "--lib", str(lib_path), "--rss-child",
         json.dumps([batch, seq, heads, dim, causal, kind, which])],
        check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1])


def rss_child(lib_path, spec):
    batch, seq, heads, dim, causal, kind, which = json.loads(spec)
    lib = library(lib_path)
    prob = Problem(batch, seq, heads, dim, causal)
    # Thread pools (OpenMP, OpenBLAS) and OpenBLAS's buffers started by both
    # kernels on a smaller problem of the same shape (scratch under glibc's
    # mmap threshold), so that the call measured adds only its own scratch.
    warm = Problem(batch, min(seq, 128), heads, dim, causal)
    for w in FORWARD:
        warm.call(lib, "forward", w)
        warm.call(lib, "backward", w)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert prob.call(lib, kind, which) == 0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(after - before)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqs", default="256,512,1024")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--lib", help="the kernel library (default: this build's)")
    ap.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    lib_path = Path(args.lib or os.environ.get("BRAID_RT_KERNELS_LIB")
                    or Path(args.bin_dir).parent / "lib" / "libbraid_rt_kernels_shared.so")
    if args.rss_child:
        return rss_child(lib_path, args.rss_child)
    if not lib_path.is_file():
        sys.exit(f"attention.py: the kernel library {lib_path} does not exist")
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    causal = not args.no_causal
    seqs = [int(s) for s in args.seqs.split(",")]
    # Memory first, before this process loads the library: children started
    # after it had run the kernels saw no growth (measured: 0 KiB where a
    # fresh parent's child sees the score matrix).
    mems = {(seq, kind, w): rss_growth(lib_path, args.batch, seq, args.heads, args.dim,
                                        causal, kind, w)
            for seq in seqs for kind in ("forward", "backward") for w in ("sgemm", "tiled")}
    lib = library(lib_path)
    print(f"load average {os.getloadavg()[0]:.2f}; batch {args.batch}, heads {args.heads}, "
          f"dim {args.dim}, {'causal' if causal else 'not causal'}; threads: "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; {lib_path}")
    print(f"{'seq':>5} {'pass':>8} {'sgemm ms':>9} {'tiled ms':>9} {'best x':>7} {'median x':>8}"
          f" {'sgemm KiB':>10} {'tiled KiB':>10} {'rel diff':>9}")
    ok = True
    for seq in seqs:
        prob = Problem(args.batch, seq, args.heads, args.dim, causal)
        for kind in ("forward", "backward"):
            times = {"sgemm": [], "tiled": []}
            outs = {}
            for _ in range(args.repeats):
                for which in ("sgemm", "tiled"):
                    t0 = time.perf_counter()
                    status = prob.call(lib, kind, which)
                    times[which].append(time.perf_counter() - t0)
                    if status != 0:
                        print(f"{which} {kind} seq {seq}: status {status}")
                        ok = False
                    outs[which] = prob.outputs(kind)
            diff = max(rel_err(a, b) for a, b in zip(outs["tiled"], outs["sgemm"]))
            ok &= diff <= TOLERANCE and all(t > 0 for ts in times.values() for t in ts)
            ratio = [s / t for s, t in zip(times["sgemm"], times["tiled"])]
            mem = {w: mems[seq, kind, w] for w in ("sgemm", "tiled")}
            print(f"{seq:>5} {kind:>8} {1e3 * min(times['sgemm']):>9.2f} "
                  f"{1e3 * min(times['tiled']):>9.2f} "
                  f"{min(times['sgemm']) / min(times['tiled']):>7.2f} {median(ratio):>8.2f} "
                  f"{mem['sgemm']:>10} {mem['tiled']:>10} {diff:>9.2g}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.check and not ok:
        print("attention.py --check: FAILED (a status, a time, or results differing by more "
              f"than {TOLERANCE})")
        return 1
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())

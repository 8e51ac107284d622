#!/usr/bin/python3
"""GPT-2 small training on one GPU: Braid against PyTorch eager and torch.compile.

Issue 15's GPU benchmark, run by `scripts/gpu-check.sh run` (which times the
braidc-compiled program and hands its log here with --braid-log).

Workload: the GPT of `python3 -m braid.models gpt` (pre-LN, tied wte,
separate q/k/v projections with biases, tanh GELU, causal attention), by
default GPT-2 small: 12 layers, hidden 768, 12 heads, sequence 1024,
vocabulary 50304, batch 8; an AdamW step (lr 3e-4, weight decay 0.01, no
clipping) in bf16 mixed precision (f32 master weights and optimizer state;
Braid: --precision bf16-mixed, PyTorch: torch.autocast bf16).
PyTorch: the same model written here in plain torch.nn (its parameter count
must equal the Braid model's), attention by scaled_dot_product_attention
(a plain softmax where torch has none), the default AdamW, one fixed random
batch; each mode in its own process, eager, then torch.compile(model).

Timing, both sides alike: every step's wall time with the device
synchronised at its end (Braid's program synchronises its stream when it
polls the step's id checks), the first --warmup steps left out (with them
the compilation of torch.compile), the mean of the rest. Braid's own
summary line (which leaves out its first step only) is reported beside it.

Figures (issue 15): tokens/s = B*S / mean step time; FLOPs per token =
6N + 12*L*H*S with N the model's parameters (each once: the tied wte once,
wpe included; nanoGPT's estimate leaves wpe out, 0.6% of N here), L
layers, H the hidden width (the issue's "hidden 768"; 12*L*H*S is the
attention's QK^T and AV, forward and backward), S the sequence; MFU =
tokens/s * FLOPs per token / 989e12 (the H200's dense bf16 TFLOP/s,
issue 15's figure). Ratios: Braid's
tokens/s over eager's and over torch.compile's (above 1: Braid is faster).

    bench/gpt2_gpu.py [--braid-log LOG --braid-mlir MLIR] [--json F] [--markdown F]
    bench/gpt2_gpu.py --device cpu --tiny          (a check that runs anywhere)

Without torch, or without CUDA for --device cuda, the PyTorch runs are
reported as skipped with the reason; torch.compile likewise where torch has
none (before 2.0).
"""

import argparse
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEAK_TFLOPS = 989.0  # H200 SXM, dense bf16
GPT2_SMALL = dict(layers=12, hidden=768, heads=12, seq=1024, vocab=50304, batch=8)
TINY = dict(layers=2, hidden=64, heads=2, seq=32, vocab=128, batch=2)
SKIP_EXIT = 3  # a worker that cannot run here (no torch, CUDA or torch.compile)


# --- the figures -------------------------------------------------------------

def flops_per_token(params, layers, hidden, seq):
    """Issue 15's training FLOPs per token: 6N + 12 L H S."""
    return 6 * params + 12 * layers * hidden * seq


def figures(ms_per_step, tokens_per_step, fpt, peak_tflops=PEAK_TFLOPS):
    """(tokens/s, MFU) of a mean step time."""
    tokens_per_s = tokens_per_step / (ms_per_step / 1e3)
    return tokens_per_s, tokens_per_s * fpt / (peak_tflops * 1e12)


def _elements(tensor_type):
    """Elements of 'tensor<768x3072xf32>' (a scalar 'tensor<f32>': 1)."""
    dims = re.findall(r"(\d+)x", tensor_type)
    return math.prod(int(d) for d in dims)


def mlir_param_count(text, entry="forward"):
    """The parameters @ENTRY holds: its braid.param ops (each name once) and
    COUNT times those of each layer it applies with braid.repeat."""
    sections, current = {}, None
    for line in text.splitlines():
        start = re.match(r"(?:braid\.layer|func\.func) @([\w.$-]+)", line)
        if start:
            current = sections.setdefault(start.group(1), {"params": {}, "repeats": []})
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is None:
            continue
        param = re.search(r'braid\.param "([^"]+)".*:\s*(tensor<[^>]*>)\s*$', line)
        if param:
            current["params"][param.group(1)] = _elements(param.group(2))
        repeat = re.search(r"braid\.repeat @([\w.$-]+).*\bcount = (\d+)", line)
        if repeat:
            current["repeats"].append((repeat.group(1), int(repeat.group(2))))

    def total(name, depth=0):
        if name not in sections or depth > 16:
            raise SystemExit(f"gpt2_gpu: the model has no @{name} (or its layers nest too deep)")
        s = sections[name]
        return sum(s["params"].values()) + sum(n * total(l, depth + 1) for l, n in s["repeats"])

    return total(entry)


def braid_run(log_text, warmup, tokens_per_step, fpt, peak_tflops):
    """Braid's figures from its program's output: the per-step 'ms' of the
    steps from WARMUP on, and its own summary line."""
    steps = [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
             for m in re.finditer(r"^step (\d+) loss (\S+).* ms (\S+)", log_text, re.M)]
    timed = [ms for s, _, ms in steps if s >= warmup]
    summary = re.search(r"^summary: .*$", log_text, re.M)
    losses = [loss for _, loss, _ in steps]
    if not timed or not all(math.isfinite(v) and v > 0 for v in timed):
        return {"status": "FAIL", "reason": f"no timed steps (step {warmup} on) in Braid's output",
                "losses": losses}
    ms = sum(timed) / len(timed)
    tokens_per_s, mfu = figures(ms, tokens_per_step, fpt, peak_tflops)
    result = {"status": "ok", "ms_per_step": ms, "tokens_per_s": tokens_per_s, "mfu": mfu,
              "timed_steps": len(timed), "losses": losses,
              "summary": summary.group(0) if summary else None}
    if not all(math.isfinite(v) for v in losses):
        result.update(status="FAIL", reason="a loss is not finite")
    return result


# --- PyTorch -----------------------------------------------------------------

def torch_worker(args):
    """One PyTorch mode (eager or compile) in this process; prints a JSON line."""
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print(f"SKIP: torch is not importable by {sys.executable}: {e}")
        return SKIP_EXIT
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"SKIP: torch {torch.__version__} sees no CUDA device")
        return SKIP_EXIT
    if args.worker == "compile" and not hasattr(torch, "compile"):
        print(f"SKIP: torch {torch.__version__} has no torch.compile (2.0 and later)")
        return SKIP_EXIT
    L, H, A, S, V, B = args.layers, args.hidden, args.heads, args.seq, args.vocab, args.batch
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(H, eps=1e-5), nn.LayerNorm(H, eps=1e-5)
            self.q, self.k, self.v, self.proj = (nn.Linear(H, H) for _ in range(4))
            self.fc, self.mlp_proj = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)

        def forward(self, x):
            n = self.ln_1(x)
            q, k, v = (f(n).view(B, S, A, H // A).transpose(1, 2) for f in (self.q, self.k, self.v))
            if sdpa is not None:
                a = sdpa(q, k, v, is_causal=True)
            else:  # torch 1.x
                scores = (q @ k.transpose(-1, -2)) / math.sqrt(H // A)
                mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
                a = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(B, S, H))
            return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, H)
            self.wpe = nn.Parameter(torch.randn(S, H) * 0.01)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(H, eps=1e-5)
            for name, p in self.named_parameters():
                if p.dim() == 2 and name != "wpe":
                    nn.init.normal_(p, std=0.02)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe
            for block in self.h:
                x = block(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied head

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = GPT().to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    run = torch.compile(model) if args.worker == "compile" else model
    tokens = torch.randint(0, V, (B, S), device=device)
    labels = torch.randint(0, V, (B, S), device=device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = run(tokens)
        loss = F.cross_entropy(logits.float().view(-1, V), labels.view(-1))
        loss.backward()
        opt.step()
        return loss

    ms, losses = [], []
    for _ in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        loss = step()
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())  # after the clock, as Braid prints its loss
    print(json.dumps({
        "ms": ms, "losses": losses, "params": params, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "attention": "scaled_dot_product_attention" if sdpa else "softmax(QK^T)V",
        "peak_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else None}))
    return 0


def _tail(text, lines=30):
    """The last lines of a worker's stderr, for report.json."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "").strip().splitlines()[-lines:]


def torch_run(mode, args, timeout, tokens_per_step, fpt):
    if timeout < 20:
        return {"status": "skip", "reason": f"{timeout:.0f} s of the run's time budget left"}
    cmd = [sys.executable, __file__, "--worker", mode, "--device", args.device,
           "--warmup", str(args.warmup), "--steps", str(args.steps)]
    cmd += [f"--{k}={getattr(args, k)}" for k in GPT2_SMALL]
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return {"status": "FAIL", "reason": f"timed out after {timeout:.0f} s",
                "stderr_tail": _tail(e.stderr)}
    seconds = time.monotonic() - start
    last = (p.stdout.strip().splitlines() or [""])[-1]
    if p.returncode == SKIP_EXIT and last.startswith("SKIP: "):
        return {"status": "skip", "reason": last[len("SKIP: "):]}
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or [last])[-1]
        return {"status": "FAIL", "reason": f"exit {p.returncode}: {tail}",
                "stderr_tail": _tail(p.stderr)}
    out = json.loads(last)
    timed = out["ms"][args.warmup:]
    ms = sum(timed) / len(timed)
    tokens_per_s, mfu = figures(ms, tokens_per_step, fpt, args.peak_tflops)
    ok = all(math.isfinite(v) for v in out["losses"] + out["ms"])
    return dict(out, status="ok" if ok else "FAIL", ms_per_step=ms, tokens_per_s=tokens_per_s,
                mfu=mfu, timed_steps=len(timed), seconds=seconds,
                **({} if ok else {"reason": "a loss or a time is not finite"}))


# --- the report --------------------------------------------------------------

def percent(fraction):
    """40.0% on a GPU; three digits on a tiny CPU run (0.0000717%)."""
    return f"{100 * fraction:.1f}%" if fraction >= 1e-3 else f"{100 * fraction:.3g}%"


def markdown(r):
    c = r["config"]
    lines = [
        f"GPT as braid.models builds it: {c['layers']} layers, hidden {c['hidden']}, "
        f"{c['heads']} heads, seq {c['seq']}, vocab {c['vocab']}, batch {c['batch']} "
        f"({r['tokens_per_step']} tokens a step), bf16 mixed, AdamW; {r['warmup']} warm-up "
        f"steps left out, mean of {r['steps']}.",
        "",
        f"N = {r['params']:,} parameters; FLOPs per token = 6N + 12*L*H*S = "
        f"6*{r['params']} + 12*{c['layers']}*{c['hidden']}*{c['seq']} = {r['flops_per_token']:,}; "
        f"MFU = tokens/s * FLOPs per token / {r['peak_tflops']:g} TFLOP/s.",
        "",
        "| run | ms/step | tokens/s | MFU | note |",
        "|---|---|---|---|---|",
    ]
    for name, run in r["runs"].items():
        if run["status"] == "ok":
            if name == "braid":
                note = run["summary"] or (f"{run['timed_steps']} timed steps; no summary line "
                                          "(the program did not finish)")
            else:
                note = f"torch {run['torch']}, {run['attention']}, {run['device']}"
                if run.get("peak_bytes"):
                    note += f", peak {run['peak_bytes'] / 2**30:.1f} GiB allocated"
            lines.append(f"| {name} | {run['ms_per_step']:.1f} | {run['tokens_per_s']:,.0f} | "
                         f"{percent(run['mfu'])} | {note} |")
        else:
            lines.append(f"| {name} | - | - | - | {run['status']}: {run.get('reason', '')} |")
    lines.append("")
    for name, ratio in r["ratios"].items():
        shown = "not measured" if ratio is None else f"{ratio:.2f}"
        lines.append(f"- {name} (tokens/s): {shown}")
    for name, met in r["goals"].items():
        lines.append(f"- goal {name}: " + {None: "not measured", True: "met",
                                            False: "not met"}[met])
    return "\n".join(lines) + "\n"


def checks(r):
    """name|status|detail lines for gpu-check.sh's table."""
    rows = []
    for name, run in r["runs"].items():
        if name == "braid":
            continue
        if run["status"] == "ok":
            detail = (f"{run['tokens_per_s']:,.0f} tokens/s, MFU {percent(run['mfu'])} "
                      f"(torch {run['torch']})")
            rows.append((f"gpt2-{name}", "pass", detail))
        else:
            rows.append((f"gpt2-{name}", run["status"], run.get("reason", "")))
    b = r["runs"].get("braid")
    if b is not None:
        if b["status"] == "ok":
            ratios = ", ".join(f"{k} {v:.2f}" for k, v in r["ratios"].items() if v is not None)
            rows.append(("gpt2-speed", "pass", f"Braid {b['tokens_per_s']:,.0f} tokens/s, MFU "
                         f"{percent(b['mfu'])}" + (f"; {ratios}" if ratios else "")))
        else:
            rows.append(("gpt2-speed", "FAIL", b.get("reason", "")))
    return "".join(f"{n}|{s}|{d}\n" for n, s, d in rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for k, v in GPT2_SMALL.items():
        parser.add_argument(f"--{k}", type=int, default=v)
    parser.add_argument("--tiny", action="store_true",
                        help="tiny shapes (2 layers, hidden 64, 2 heads, seq 32, vocab 128, "
                        "batch 2)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--modes", default="eager,compile", help="PyTorch modes, or 'none'")
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the mean")
    parser.add_argument("--steps", type=int, default=8, help="timed steps")
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS)
    parser.add_argument("--braid-log", type=Path, help="the Braid program's output")
    parser.add_argument("--braid-mlir", type=Path,
                        help="the Braid model (N is counted from it; default: braid.models')")
    parser.add_argument("--timeout-eager", type=float, default=120)
    parser.add_argument("--timeout-compile", type=float, default=240)
    parser.add_argument("--time-left", type=float, default=math.inf,
                        help="seconds the PyTorch runs may take in all (gpu-check's budget)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--checks", type=Path,
                        help="gpu-check.sh's table rows (name|status|detail)")
    parser.add_argument("--worker", choices=["eager", "compile"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tiny:
        for k, v in TINY.items():
            setattr(args, k, v)
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.warmup < 0 or args.steps < 1:
        parser.error("--warmup must be >= 0 and --steps >= 1")
    if args.worker:
        return torch_worker(args)

    config = {k: getattr(args, k) for k in GPT2_SMALL}
    if args.braid_mlir:
        text = args.braid_mlir.read_text()
    else:
        sys.path.insert(0, str(ROOT / "python"))
        from braid import models
        text = models.gpt(**config)
    params = mlir_param_count(text)
    fpt = flops_per_token(params, args.layers, args.hidden, args.seq)
    tokens_per_step = args.batch * args.seq
    runs = {}
    if args.braid_log:
        text = args.braid_log.read_text() if args.braid_log.exists() else ""
        runs["braid"] = braid_run(text, args.warmup, tokens_per_step, fpt, args.peak_tflops)
    deadline = time.monotonic() + args.time_left
    for mode in [m for m in args.modes.split(",") if m and m != "none"]:
        if mode not in ("eager", "compile"):
            parser.error(f"--modes: unknown mode '{mode}' (eager, compile)")
        timeout = min(getattr(args, f"timeout_{mode}"), deadline - time.monotonic())
        runs[mode] = torch_run(mode, args, timeout, tokens_per_step, fpt)
        if runs[mode]["status"] == "ok" and runs[mode]["params"] != params:
            runs[mode].update(status="FAIL", reason=f"the PyTorch model has {runs[mode]['params']}"
                              f" parameters, Braid's {params}: not the same model")

    def ratio(a, b):
        ok = a in runs and b in runs and runs[a]["status"] == runs[b]["status"] == "ok"
        return runs[a]["tokens_per_s"] / runs[b]["tokens_per_s"] if ok else None

    ratios = {"braid/eager": ratio("braid", "eager"), "braid/compile": ratio("braid", "compile")}
    braid_mfu = runs["braid"]["mfu"] if runs.get("braid", {}).get("status") == "ok" else None
    report = {
        "config": config, "params": params, "flops_per_token": fpt,
        "peak_tflops": args.peak_tflops, "tokens_per_step": tokens_per_step,
        "warmup": args.warmup, "steps": args.steps, "runs": runs, "ratios": ratios,
        "goals": {"braid/eager >= 1.2": None if ratios["braid/eager"] is None
                  else ratios["braid/eager"] >= 1.2,
                  "Braid MFU >= 40%": None if braid_mfu is None else braid_mfu >= 0.40},
    }
    text = markdown(report)
    print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(text)
    if args.checks:
        args.checks.write_text(checks(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

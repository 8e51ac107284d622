"""bench/gpt2_gpu.py, issue 15's GPU benchmark (run by scripts/gpu-check.sh
on a GPU; never run on one yet). Here, without a GPU: the FLOP and MFU
formula against figures worked out by hand, Braid's figures from a made-up
program log, the PyTorch reference on the CPU at tiny shapes (it runs and
prints finite numbers), its skips, and gpu-check.sh's benchmark step with
stand-ins for the GPU and the Braid program."""

import json
import math
import os
import stat
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "gpt2_gpu.py"

# GPT-2 small as braid.models builds it (12 layers, hidden 768, seq 1024,
# vocab 50304, MLP 4H, tied wte), by hand:
#   wte 50304*768 = 38,633,472; wpe 1024*768 = 786,432;
#   a layer: q, k, v, proj 4*(768*768 + 768) = 2,362,368, ln_1 and ln_2
#   4*768 = 3,072, fc 768*3072 + 3072 = 2,362,368, proj 3072*768 + 768 =
#   2,360,064: 7,087,872, times 12 = 85,054,464; ln_f 1,536.
GPT2_PARAMS = 124_475_904
# 6N + 12*L*H*S = 746,855,424 + 12*12*768*1024 (113,246,208).
GPT2_FLOPS_PER_TOKEN = 860_101_632
# The tiny model (2 layers, hidden 64, seq 32, vocab 128, MLP 256):
#   wte 8,192; wpe 2,048; a layer 4*4,160 + 256 + 16,640 + 16,448 = 49,984,
#   twice 99,968; ln_f 128.
TINY_PARAMS = 110_336
# 6*110,336 + 12*2*64*32 = 662,016 + 49,152.
TINY_FLOPS_PER_TOKEN = 711_168


def braid_log(ms, loss=10.8):
    """Output as the Braid program prints it (lib/Target/ProgramDriver.cpp)."""
    lines = [f"step {s} loss {loss} lr 0.0003 grad_norm 1.5 ms {t:.2f} tokens/s 1"
             for s, t in enumerate(ms)]
    timed = ms[1:]
    lines.append(f"summary: {len(ms)} steps, {sum(timed) / len(timed):.2f} ms/step, "
                 "1 tokens/s (step 0 excluded)")
    return "\n".join(lines) + "\n"


def bench(tmp_path, *args, env=None):
    out = tmp_path / "gpt2.json"
    p = subprocess.run([sys.executable, str(SCRIPT), *map(str, args), "--json", out,
                        "--checks", tmp_path / "checks.txt"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(out.read_text()), p.stdout


def test_gpt2_small_figures_by_hand(tmp_path):
    # Steps 0 and 1 are the warm-up (left out); steps 2-9 take 100 ms each.
    log = tmp_path / "braid.log"
    log.write_text(braid_log([5000.0, 900.0] + [100.0] * 8))
    r, text = bench(tmp_path, "--modes", "none", "--braid-log", log)
    assert r["params"] == GPT2_PARAMS
    assert r["flops_per_token"] == GPT2_FLOPS_PER_TOKEN
    braid = r["runs"]["braid"]
    assert braid["status"] == "ok" and braid["timed_steps"] == 8
    assert braid["ms_per_step"] == pytest.approx(100.0)
    # 8 * 1024 tokens in 0.1 s.
    assert braid["tokens_per_s"] == pytest.approx(81_920)
    # 81,920 * 860,101,632 = 70,459,525,693,440 FLOP/s over 989e12.
    assert braid["mfu"] == pytest.approx(0.0712432009, rel=1e-9)
    assert braid["summary"].startswith("summary: 10 steps, 188.89 ms/step")
    assert "MFU = tokens/s * FLOPs per token / 989 TFLOP/s" in text
    assert "| braid | 100.0 | 81,920 | 7.1% |" in text
    assert r["ratios"] == {"braid/eager": None, "braid/compile": None}
    assert r["goals"] == {"braid/eager >= 1.2": None, "Braid MFU >= 40%": False}
    assert (tmp_path / "checks.txt").read_text().startswith("gpt2-speed|pass|Braid 81,920 tokens/s")


def test_braid_log_without_steps_is_a_failure(tmp_path):
    log = tmp_path / "braid.log"
    log.write_text("error: no CUDA device\n")
    r, _ = bench(tmp_path, "--tiny", "--modes", "none", "--braid-log", log)
    assert r["runs"]["braid"]["status"] == "FAIL"
    assert "no timed steps" in r["runs"]["braid"]["reason"]
    assert (tmp_path / "checks.txt").read_text().startswith("gpt2-speed|FAIL|no timed steps")
    # Not there at all (the program did not start): the same.
    r, _ = bench(tmp_path, "--tiny", "--modes", "none", "--braid-log", tmp_path / "absent.log")
    assert r["runs"]["braid"]["status"] == "FAIL"


def test_tiny_model_on_the_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    log = tmp_path / "braid.log"
    log.write_text(braid_log([40.0, 30.0, 20.0, 20.0]))
    r, _ = bench(tmp_path, "--device", "cpu", "--tiny", "--warmup", "2", "--steps", "2",
                 "--braid-log", log)
    assert r["params"] == TINY_PARAMS
    assert r["flops_per_token"] == TINY_FLOPS_PER_TOKEN
    eager = r["runs"]["eager"]
    assert eager["status"] == "ok", eager
    # The PyTorch model's own count: the same model as Braid's.
    assert eager["params"] == TINY_PARAMS
    assert len(eager["ms"]) == 4 and eager["timed_steps"] == 2
    assert all(math.isfinite(v) and v > 0 for v in eager["ms"])
    assert eager["ms_per_step"] == pytest.approx(sum(eager["ms"][2:]) / 2)
    assert eager["tokens_per_s"] == pytest.approx(2 * 32 / (eager["ms_per_step"] / 1e3))
    assert eager["mfu"] == pytest.approx(eager["tokens_per_s"] * TINY_FLOPS_PER_TOKEN / 989e12)
    # Random init (std 0.02): the first loss is close to ln(128) = 4.85.
    assert all(math.isfinite(v) for v in eager["losses"])
    assert abs(eager["losses"][0] - math.log(128)) < 0.1
    # Braid: 64 tokens in 20 ms.
    assert r["runs"]["braid"]["tokens_per_s"] == pytest.approx(3200)
    assert r["ratios"]["braid/eager"] == pytest.approx(3200 / eager["tokens_per_s"])
    compiled = r["runs"]["compile"]
    if hasattr(torch, "compile"):
        assert compiled["status"] == "ok", compiled
    else:
        assert compiled == {"status": "skip", "reason":
                            f"torch {torch.__version__} has no torch.compile (2.0 and later)"}
        assert r["ratios"]["braid/compile"] is None


def test_skipped_without_torch_or_cuda(tmp_path):
    # A torch that cannot be imported: both modes skipped, with the reason.
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    r, text = bench(tmp_path, "--tiny", env=env)
    for mode in ("eager", "compile"):
        assert r["runs"][mode]["status"] == "skip"
        assert r["runs"][mode]["reason"].endswith("no torch here")
    assert "| eager | - | - | - | skip: torch is not importable by" in text
    # CUDA asked for where torch sees none.
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    r, _ = bench(tmp_path, "--tiny", "--modes", "eager")
    assert r["runs"]["eager"] == {"status": "skip", "reason":
                                  f"torch {torch.__version__} sees no CUDA device"}


def executable(path, text):
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_gpu_check_benchmark_step(tmp_path):
    """gpu-check.sh run with GPU_CHECK_ONLY=gpt2, a stand-in nvidia-smi and
    a stand-in Braid program: the benchmark's rows, report section and JSON."""
    prep, out, fakebin = tmp_path / "prep", tmp_path / "out", tmp_path / "fakebin"
    for d in (prep / "bin", prep / "ref", fakebin):
        d.mkdir(parents=True)
    (prep / "manifest.txt").write_text("prepared: test\n")
    subprocess.run([sys.executable, "-m", "braid.models", "gpt", "--layers", "12", "--hidden",
                    "768", "--heads", "12", "--seq", "1024", "--vocab", "50304", "--batch", "8",
                    "-o", prep / "ref" / "gpt2.mlir"], check=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python")))
    log = braid_log([3000.0, 500.0] + [250.0] * 8).replace("\n", "\\n")
    executable(prep / "bin" / "gpt2-cuda",
               f'[ "$*" = "--steps 10 --seed 1" ] || exit 9\nprintf "{log}"\n')
    executable(fakebin / "nvidia-smi", 'echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)"\n')
    env = dict(os.environ, PATH=f"{fakebin}:{os.environ['PATH']}", GPU_CHECK_ONLY="gpt2")
    p = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "gpu-check.sh"), "run", str(prep),
                        str(out)], capture_output=True, text=True, env=env, timeout=600)
    # The PyTorch runs: no CUDA here (skip), or a GPU (pass).
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "report.json").read_text())
    rows = {c["name"]: c for c in report["checks"]}
    assert rows["gpt2-braid"]["result"] == "pass"
    assert rows["gpt2-braid"]["detail"].startswith("summary: 10 steps")
    # 8,192 tokens in 0.25 s; MFU 32,768 * 860,101,632 / 989e12 = 2.85%.
    assert rows["gpt2-speed"]["detail"].startswith("Braid 32,768 tokens/s, MFU 2.8%")
    assert rows["gpt2-eager"]["result"] in ("pass", "skip")
    assert rows["gpt2-compile"]["result"] in ("pass", "skip")
    assert "kernels" not in rows  # GPU_CHECK_ONLY=gpt2
    assert report["gpt2"]["runs"]["braid"]["tokens_per_s"] == pytest.approx(32_768)
    md = (out / "report.md").read_text()
    assert "## GPT-2 small on one GPU (issue 15)" in md
    assert "| braid | 250.0 | 32,768 | 2.8% |" in md
    assert "run took" in md

"""braidc --grad-compression: 200 training steps stay near the uncompressed run.

Compression changes numerics by design, so what is checked is the
documented band: a 2-layer GPT (hidden 32, 4 heads, sequence 8, vocabulary
64, batch 4, AdamW at lr 3e-3, the same seeded batch every step) trained
200 steps on dp=2 (2 ranks) with bf16 or fp16 gradient reductions has, at
every step, a loss within 2e-3 relative of the uncompressed run's (measured
at most 5.2e-4 for bf16 and 2.5e-4 for fp16); the curve falls (the last
loss below 1% of the first) and differs from the uncompressed one (the
reductions really were rounded).

PowerSGD (rank 4, error feedback) approximates instead of rounding, and on
this small model at this learning rate the curve lags: the band is wider,
the loss at every step at most 1.2 above the uncompressed run's (measured
0.93 on dp=2, around step 40) and the last below 0.06 (measured 0.037,
uncompressed 0.0126). The same band holds, against the uncompressed run of
the same plan, with 2 micro-batches (each micro-batch's reductions
compressed), on dp=2 x tp=2 (each tp block's reduction with its own state),
on dp=2 x pp=2 (each stage compressing its own reductions) and with ZeRO-2
(each device keeping its share of the approximation: after a step the
layers' parameters are dp=2's bit for bit). Its state
(each 2-D gradient's Q and error feedback) is in the checkpoint: 2 steps,
then 2 resumed, print the 4 uninterrupted steps' losses exactly, and
resuming from the checkpoint with that state zeroed does not (under tp a
Q shared by the tp blocks, under pp a stage saving another's stale copy,
would break the first).
"""
import re
import subprocess

import numpy as np

import pytest

from braid import models
from braid import safetensors as st
from conftest import bin_dir

GPT = dict(layers=2, hidden=32, heads=4, seq=8, vocab=64, batch=4)
STEPS = 200
BAND = 2e-3


# PowerSGD's plans: (ranks, braidc flags).
PLANS = {
    "dp2": (2, ["--mesh", "dp=2"]),
    "dp2-mb2": (2, ["--mesh", "dp=2", "--microbatches", "2"]),
    "dp2xtp2": (4, ["--mesh", "dp=2,tp=2"]),
    "dp2xpp2": (4, ["--mesh", "dp=2,pp=2", "--microbatches", "2"]),
    "dp2-zero2": (2, ["--mesh", "dp=2", "--zero", "2"]),
}


def _compile(tmp_path, name, *flags, plan="dp2"):
    model = tmp_path / "gpt.mlir"
    if not model.exists():
        model.write_text(models.gpt(**GPT))
    program = tmp_path / name
    subprocess.run([str(bin_dir() / "braidc"), str(model), *PLANS[plan][1], "--lr", "3e-3",
                    *flags, "-o", str(program)], check=True, capture_output=True, timeout=300)
    return program


def _run(program, steps, *args, plan="dp2"):
    run = subprocess.run([str(bin_dir() / "braid-run"), "-n", str(PLANS[plan][0]), str(program),
                          "--steps", str(steps), "--seed", "1", *map(str, args)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)", run.stdout, re.M)]
    assert len(losses) == steps, run.stdout[-2000:]
    return losses


def _train(tmp_path, name, *flags, plan="dp2"):
    return _run(_compile(tmp_path, name, *flags, plan=plan), STEPS, plan=plan)


@pytest.fixture(scope="module")
def uncompressed(tmp_path_factory):
    """The uncompressed curve of each plan, trained when first asked for."""
    curves = {}

    def curve(plan="dp2"):
        if plan not in curves:
            curves[plan] = _train(tmp_path_factory.mktemp("none-" + plan), "none", plan=plan)
        return curves[plan]
    return curve


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_loss_curve_stays_in_the_band(tmp_path, uncompressed, wire):
    reference = uncompressed()
    losses = _train(tmp_path, wire, "--grad-compression", wire)
    worst = max(abs(a - b) / b for a, b in zip(losses, reference))
    print(f"{wire}: worst relative loss difference over {STEPS} steps {worst:.3g}")
    assert worst <= BAND, f"{wire}: a loss {worst:.3g} (relative) off the uncompressed run"
    assert losses[-1] < 0.01 * losses[0], f"{wire}: the loss did not fall: {losses[::20]}"
    assert losses != reference, f"{wire}: identical to the uncompressed run"


@pytest.mark.parametrize("plan", list(PLANS))
def test_powersgd_loss_curve_stays_in_its_band(tmp_path, uncompressed, plan):
    reference = uncompressed(plan)
    losses = _train(tmp_path, "powersgd", "--grad-compression", "powersgd", "--powersgd-rank",
                    "4", plan=plan)
    worst = max(a - b for a, b in zip(losses, reference))
    print(f"powersgd rank 4 on {plan}: loss at most {worst:.3g} above the uncompressed run; "
          f"last {losses[-1]:.4g} (uncompressed {reference[-1]:.4g})")
    assert worst <= 1.2, f"powersgd on {plan}: a loss {worst:.3g} above the uncompressed run"
    assert losses[-1] < 0.06, f"powersgd on {plan}: the loss did not fall far enough: " \
        f"{losses[::20]}"
    assert losses != reference, f"powersgd on {plan}: identical to the uncompressed run"


def _fnv1a64(data):
    """The checkpoint's per-tensor hash of its bytes, as hex."""
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"


@pytest.mark.parametrize("plan", list(PLANS))
def test_powersgd_state_is_checkpointed(tmp_path, plan):
    program = _compile(tmp_path, "powersgd", "--grad-compression", "powersgd",
                       "--powersgd-rank", "2", plan=plan)
    straight = _run(program, 4, plan=plan)
    _run(program, 2, "--save", tmp_path / "ck", plan=plan)
    assert _run(program, 2, "--resume", tmp_path / "ck", plan=plan) == straight[2:]
    # The same checkpoint without PowerSGD's state (zeroed) resumes otherwise.
    path = tmp_path / "ck" / "checkpoint.safetensors"
    tensors, metadata = st.load_with_metadata(str(path))
    state = [name for name in tensors if ".powersgd." in name or name.startswith("powersgd.")]
    assert any(n.endswith(".q") for n in state) and any(n.endswith(".error") for n in state)
    if plan == "dp2xpp2":
        # Every stage's state was written by the stage that updates it: the
        # state of each chunk's pieces moved from its initial value.
        for name in (n for n in state if n.endswith(".error")):
            assert np.any(st.to_numpy(tensors[name]) != 0), f"{name}: still zero"
    for name in state:
        zeros = np.zeros_like(st.to_numpy(tensors[name]))
        tensors[name] = st.from_numpy(zeros)
        metadata["braid.fnv1a64." + name] = _fnv1a64(zeros.tobytes())
    st.save(str(path), tensors, metadata)
    assert _run(program, 2, "--resume", tmp_path / "ck", plan=plan) != straight[2:]


def test_powersgd_zero_keeps_its_share_of_the_approximation(tmp_path):
    """ZeRO-2 reduce_scatters each layer gradient; with PowerSGD each device
    keeps its share of the same approximation dp2 applies whole, so after a
    step the layers' parameters are dp2's bit for bit."""
    params = {}
    for plan in ("dp2", "dp2-zero2"):
        (tmp_path / plan).mkdir()
        program = _compile(tmp_path / plan, "powersgd", "--grad-compression", "powersgd",
                           "--powersgd-rank", "2", plan=plan)
        _run(program, 1, "--save", tmp_path / plan / "ck", plan=plan)
        tensors, _ = st.load_with_metadata(str(tmp_path / plan / "ck" / "checkpoint.safetensors"))
        params[plan] = {n: st.to_numpy(t) for n, t in tensors.items()
                        if n.startswith("h.") and ".powersgd." not in n and ".adamw" not in n}
    assert params["dp2"].keys() == params["dp2-zero2"].keys() and params["dp2"]
    for name, value in params["dp2"].items():
        assert np.array_equal(value, params["dp2-zero2"][name]), f"{name} differs"

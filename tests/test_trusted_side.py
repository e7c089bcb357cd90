"""The trusted side's per-step work (issue #5, env overhead): the per-call noise of inputs, the parent's torch
thread count while it holds a CPU device, the pipelined correctness check, an honest kernel's timed outputs, the
error figures, the spare worker's hand-over and the worker's warm-up."""

from __future__ import annotations

import math
import random
import threading
import time

import pytest
import torch

from kbench_env.measure import inputs as inputs_mod
from kbench_env.measure.inputs import fill_perturbed, perturb
from kbench_env.measure.compare import compare_outputs, error_figures
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import ConfigResult, config_label
from kbench_env.pipeline.seeds import stream_seeds
from kbench_env.pipeline.threads import PARENT_THREADS
from kbench_env.tasks.suite import resolve_task, solution_path
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.task import DTYPES, describe_value

from candidates import _forward
from conftest import ROOT

# ---------------------------------------------------------------------- timed-call inputs


def test_timed_call_noise_is_drawn_per_element():
    """No tiling or scaling of a smaller draw: every element has its own draw (a linear task could otherwise
    correct a cached result cheaply), and another seed gives other noise."""
    x = torch.randn(64, 4096)
    d = perturb([x], 5, 1e-2)[0] - x
    assert abs(d.mean().item()) < 1e-3 and abs(d.std().item() / x.std().item() - 1e-2) < 1e-3
    rows = d / d[:, :1]  # a row that is a scaled copy of another would show as a constant ratio
    assert len({tuple(r[:4].tolist()) for r in rows}) == 64
    corr = torch.corrcoef(torch.stack([d[0], d[1], d[:, 0].repeat(64)[:4096]]))
    assert corr[0, 1].abs() < 0.1 and corr[0, 2].abs() < 0.1
    assert torch.unique(d).numel() > 0.5 * d.numel()  # (differences are rounded to the inputs' ulps)
    assert not torch.equal(d, perturb([x], 6, 1e-2)[0] - x)


def test_a_blocks_buffers_are_filled_row_by_row_as_perturb_would(monkeypatch):
    """A GPU block's input buffers (worker/gpu_executor.py) filled at once: every row a perturbed copy of its own
    (noise at the input's scale, no row like another or like a warm-up's ``perturb``), integers copied as they are,
    the same with the noise drawn in small chunks; the same seed fills the same, another seed not."""
    x, idx, half = torch.randn(3, 50), torch.arange(6), torch.randn(7).to(torch.bfloat16)
    originals = [x, idx, half, 2.0, torch.empty(0)]

    def filled(seed):
        big = [torch.empty((40, *t.shape), dtype=t.dtype) if isinstance(t, torch.Tensor) else None
               for t in originals]
        fill_perturbed(big, originals, seed)
        return big

    big = filled(11)
    d = big[0] - x
    assert abs(d.std().item() / x.std().item() - 1e-2) < 2e-3 and abs(d.mean().item()) < 1e-3
    assert len({tuple(r.flatten()[:3].tolist()) for r in d}) == 40  # every row its own noise
    assert not any(torch.equal(big[0][b], perturb(originals, s, 1e-2)[0]) for b in range(40) for s in (-1, -2, 11))
    assert torch.equal(big[1], idx.expand(40, 6)) and big[2].dtype == torch.bfloat16
    assert (big[2].float() - half.float()).abs().max() > 0 and torch.equal(filled(11)[0], big[0])
    assert not torch.equal(filled(12)[0], big[0])
    monkeypatch.setattr(inputs_mod, "FILL_CHUNK_BYTES", 4 * 150 * 3)  # 3 rows a chunk
    chunked = filled(11)
    assert len({tuple(r.flatten()[:3].tolist()) for r in chunked[0] - x}) == 40 and torch.equal(chunked[1], big[1])


# ---------------------------------------------------------------------- the parent's thread count


def test_parent_threads_lowered_and_restored():
    before = torch.get_num_threads()
    with PARENT_THREADS.lowered(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with PARENT_THREADS.lowered(before + 8):  # never raised
        assert torch.get_num_threads() == before
    assert torch.get_num_threads() == before


def test_parent_threads_overlapping_holders_leave_the_count():
    before = torch.get_num_threads()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with PARENT_THREADS.lowered(1):
            seen["first"] = torch.get_num_threads()
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second():
        first_in.wait(10)
        with PARENT_THREADS.lowered(1):
            seen["second"] = torch.get_num_threads()
            second_in.set()
            first_out.wait(10)  # the first holder leaves while this one holds
            seen["second_after_first_left"] = torch.get_num_threads()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"first": 1, "second": 1, "second_after_first_left": 1}
    assert torch.get_num_threads() == before
    fresh = []
    t = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert fresh == [before]


def test_evaluator_lowers_threads_to_the_cores_the_worker_leaves(evaluator, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    before = torch.get_num_threads()
    with evaluator.device_hold().threads():
        assert torch.get_num_threads() == max(1, min(before, 2 - evaluator.limits.threads))
    assert torch.get_num_threads() == before


# ---------------------------------------------------------------------- the pipelined correctness check

# Right on 'small' (16 rows); wrong on 'odd' (7 rows) and 'wide' (2 rows) of level1/relu's CPU configurations.
_ROWS = {"small": 16, "odd": 7, "wide": 2}
_WRONG_ON = "        y = x.clamp(min=0)\n        if x.shape[0] in {rows}:\n            y[0, 0] += 1.0\n        return y"


def _expected_message(task, cfg_index: int, seed: int, rows: tuple) -> str:
    """The message the sequential check gave: the first failing configuration's comparison, made here."""
    cfg = task.configs_for("cpu")[cfg_index]
    in_seed, init_seed = stream_seeds(seed, cfg_index)
    mod, init_inputs, inputs = task.instantiate(cfg, in_seed, "cpu")
    ref = task.reference_output(mod, init_inputs, inputs, cfg, init_seed, "cpu")
    out = inputs[0].clamp(min=0)
    if out.shape[0] in rows:
        out[0, 0] += 1.0
    mismatch, _ = compare_outputs(out, ref, DTYPES[cfg.dtype], task.tolerance)
    cr = ConfigResult(name=cfg.name, held_out=cfg.held_out, dtype=cfg.dtype, inputs=[describe_value(inputs[0])])
    return f"configuration {config_label(cfg, cr)}: {mismatch.message}"


@pytest.mark.parametrize("rows", [(7,), (7, 2), (2,)])
def test_pipelined_check_verdicts(evaluator, rows):
    task = resolve_task("level1/relu")
    names = [c.name for c in task.configs_for("cpu")]
    assert names == ["small", "odd", "wide"]
    r = evaluator.evaluate(task, _forward(_WRONG_ON.format(rows=rows)), seed=1234)
    assert not r.correct and r.error_stage == "correctness"
    bad = [_ROWS[name] in rows for name in names]
    assert r.error == _expected_message(task, bad.index(True), 1234, rows)
    assert [c.name for c in r.configs] == names  # every configuration ran and was judged, in order
    for c, bad in zip(r.configs, bad):
        assert c.correct is (not bad)
        assert (c.error is not None) == bad and c.norm_err is not None


def test_pipelined_check_run_error_and_crash(evaluator):
    task = resolve_task("level1/relu")
    raises = _forward("        if x.shape[0] == 7:\n            raise ValueError('odd rows')\n"
                      "        return x.clamp(min=0)")
    r = evaluator.evaluate(task, raises, seed=5)
    assert r.error_stage == "run" and r.error.startswith("configuration 'odd' (held out)") and "odd rows" in r.error
    assert [c.correct for c in r.configs] == [True, False, True]
    crash = _forward("        if x.shape[0] == 7:\n            os.abort()\n        return x.clamp(min=0)")
    r = evaluator.evaluate(task, crash, seed=5)
    assert not r.correct and r.error_stage == "run"
    assert [c.name for c in r.configs] == ["small", "odd"]  # as the sequential check left them
    assert r.configs[0].correct is True and r.configs[1].correct is None


def test_pipelined_check_passes_a_correct_candidate(evaluator):
    task = resolve_task("level1/relu")
    r = evaluator.evaluate(task, solution_path(task, "cpu").read_text(), seed=9)
    assert r.correct, r.feedback()
    assert all(c.correct for c in r.configs) and r.speedup is not None
    assert {"check", "reference_timing", "timing"} <= set(r.phase_seconds)
    assert all(c.candidate_ms and c.reference_ms for c in r.configs)


# ---------------------------------------------------------------------- timed-output checks

CUMMAX_TASK = ROOT / "tests/data/kernelbench/cummax_dim1.py"
CUMMAX_SOLUTION = ROOT / "tests/data/solutions/cummax_dim1_cpu.py"


def test_an_honest_running_max_kernel_is_paid_not_flagged(evaluator):
    """Issue #18 end to end: a sequential C++ running max (exact) was paid as an exploit (timed_output_wrong,
    reward -1) on every seed."""
    r = evaluator.evaluate(load_task(CUMMAX_TASK), CUMMAX_SOLUTION.read_text(), seed=3)
    assert r.correct and r.integrity_flags == [] and r.speedup is not None, r.feedback()


# ---------------------------------------------------------------------- error figures


def test_error_figures():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    norm_err, max_err, idx = error_figures(torch.tensor([3.0, 5.0]), ref)
    assert norm_err == pytest.approx(1 / 5) and max_err == pytest.approx(1 / (5 / math.sqrt(2))) and idx == (1,)
    ref2 = torch.randn(6, 5, dtype=torch.float64)
    cand = ref2.float().clone()
    cand[4, 2] += 0.5
    n, m, idx = error_figures(cand, ref2)
    d = cand.double() - ref2
    assert n == pytest.approx((d.norm() / ref2.norm()).item(), rel=1e-12) and idx == (4, 2)
    assert m == pytest.approx((d.abs().max() / (ref2.norm() / math.sqrt(30))).item(), rel=1e-12)
    cand[1, 3] = float("nan")
    assert error_figures(cand, ref2) == (math.inf, math.inf, (1, 3))
    zero = torch.zeros(4, dtype=torch.float64)
    assert error_figures(torch.zeros(4), zero)[:2] == (0.0, 0.0)
    assert error_figures(torch.full((4,), 1e-3), zero)[:2] == (math.inf, math.inf)
    assert error_figures(torch.zeros(0), torch.zeros(0, dtype=torch.float64)) == (0.0, 0.0, ())


# ---------------------------------------------------------------------- worker side and spare hand-over


def test_worker_warm_up_on_the_cpu():
    from kbench_env.worker.loop import _warm_up

    seconds, cuda_start = _warm_up("cpu", {})
    assert seconds >= 0.0 and cuda_start == 0.0


def test_spare_is_assigned_before_its_replacement_starts():
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.sandbox.spares import SpareWorkers

    order = []

    class FakeSpare:
        _t_created = time.monotonic()

        class proc:  # a live process (no pid: nothing for idle_start.py to reach)
            exitcode = None
            pid = None

        def assign(self, source):
            order.append(("assign", source))

    spares = SpareWorkers("cpu", "cpu", str(ROOT / ".kbench-cache"), Limits())
    spares._ready.append(FakeSpare())
    spares.refill = lambda: order.append(("refill",))
    taken = spares.take("src")
    assert isinstance(taken, FakeSpare) and order == [("assign", "src"), ("refill",)] and spares.served == 1


def test_a_timing_stops_once_its_median_is_precise():
    """The GPU timing stops before its device-time target once the median's 95% interval is within the precision:
    steady blocks after 5, noisy ones not at all."""
    from kbench_env.measure import stats as timing

    rng = random.Random(0)
    steady = [0.047 * (1 + rng.gauss(0, 0.002)) for _ in range(5)]
    noisy = [0.0027 * (1 + rng.gauss(0, 0.05)) for _ in range(25)]
    assert timing.median_is_precise(steady, 0.005)
    assert not timing.median_is_precise(steady[:4], 0.005)  # at least 5 blocks
    assert not timing.median_is_precise(noisy, 0.005)
    assert timing.median_is_precise(noisy, 0.05)


def test_a_configuration_whose_gpu_draw_failed_is_drawn_on_the_cpu_without_trying_again(monkeypatch):
    """Task.instantiate tries a configuration's draw on the GPU (task._drawn_on) until it fails once; from then on
    that configuration is drawn on the CPU straight away, the others still tried on the GPU. The GPU here is a
    stand-in: ``_drawn_on`` fails for one configuration, and the inputs stay where they are drawn."""
    from kbench_env.tasks import task as task_mod

    task = resolve_task("level1/relu")
    failing, other = task.configs[0], task.configs[1]
    tried = []

    def drawn_on(mod, seed, device):
        tried.append(mod)
        return None if mod is task.module(failing) else list(mod.get_inputs())

    monkeypatch.setattr(task_mod, "_drawn_on", drawn_on)
    monkeypatch.setattr(task_mod, "cast_input", lambda x, dtype, device: x)
    for seed in (1, 2, 3):
        _, _, a = task.instantiate(failing, seed, "cuda")
        _, _, b = task.instantiate(other, seed, "cuda")
        assert a and b
    assert tried.count(task.module(failing)) == 1 and tried.count(task.module(other)) == 3
    assert "_drawn_on_cpu" not in task.__getstate__()  # another process tries for itself

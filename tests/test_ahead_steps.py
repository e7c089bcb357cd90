"""A configuration's timed block set up ahead of its timing keeps the seconds of its steps (gpu_blocks.Ahead.spent:
the block set up in the worker, the warm-up block run, its outputs judged), summed over a second warm-up where the
candidate is far slower than the reference, and the evaluation's phases get them (``ahead_*``: where a fast-format
step's ``timing_prepare`` goes). A stand-in for the worker's run and a clock that moves only when a step runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kbench_env.pipeline import gpu_blocks
from kbench_env.pipeline.result import EvalResult


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _FakeRun:
    """Each step moves the clock by its own amount: set-up 1 s, block 2 s, verdict 4 s, poison 8 s."""

    def __init__(self, clock: _Clock, wall_ms: float, wrong=None):
        self.clock, self.wall_ms, self.wrong, self.calls = clock, wall_ms, wrong, []
        self.closed = False

    def set_up(self, block, params):
        self.calls.append(("set_up", block))
        self.clock.now += 1.0
        return block, "cuda-graph"

    def block(self, b):
        self.calls.append(("block", b))
        self.clock.now += 2.0
        return self.wall_ms, 0.0, "", [], 0.0

    def verdict(self, staged, b, base):
        self.clock.now += 4.0
        return self.wrong

    def poison(self, b):
        self.clock.now += 8.0
        return None

    def reset(self):
        self.calls.append(("reset", None))

    def close(self, release):
        self.closed = True


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(gpu_blocks.time, "perf_counter", c)
    return c


def test_a_set_up_keeps_each_steps_seconds(clock):
    run, spent = _FakeRun(clock, wall_ms=1.0), {}
    b, method, wrong = gpu_blocks._set_up(run, {"block": 64, "wall_ms": 1.0}, {}, shrink=True, spent=spent)
    assert (b, method, wrong) == (64, "cuda-graph", None)
    assert spent == {"set_up": 1.0, "block": 2.0, "verdict": 12.0}  # the verdict and the poisoning both judged
    assert [c[0] for c in run.calls] == ["set_up", "block"]


def test_a_far_slower_candidates_second_warm_up_adds_to_the_first(clock):
    run, spent = _FakeRun(clock, wall_ms=10 * gpu_blocks.SLOW_BLOCKS), {}
    b, _, _ = gpu_blocks._set_up(run, {"block": 64, "wall_ms": 1.0}, {}, shrink=True, spent=spent)
    assert b < 64 and ("reset", None) in run.calls  # shrunk: set up again at the smaller block
    assert spent == {"set_up": 2.0, "block": 4.0, "verdict": 24.0}


def test_a_wrong_warm_up_is_kept_with_its_steps(clock):
    run, spent = _FakeRun(clock, wall_ms=1.0, wrong=(3, "output wrong")), {}
    _, _, wrong = gpu_blocks._set_up(run, {"block": 8, "wall_ms": 1.0}, {}, shrink=True, spent=spent)
    assert wrong == (3, "output wrong") and spent == {"set_up": 1.0, "block": 2.0, "verdict": 4.0}


def test_set_up_ahead_hands_its_steps_to_the_ahead(clock, monkeypatch):
    monkeypatch.setattr(gpu_blocks, "_Run", lambda *a, **k: _FakeRun(clock, wall_ms=1.0))
    ahead = gpu_blocks.set_up_ahead(None, "small", [], 0.01, {}, 10.0, "cuda", None, 1, {"block": 16, "wall_ms": 1.0})
    assert ahead.block == 16 and ahead.spent == {"set_up": 1.0, "block": 2.0, "verdict": 12.0}


def test_the_evaluations_phases_sum_every_configurations_set_up_steps(monkeypatch):
    """timing.set_up_ahead adds each configuration's steps to the result's phases (``ahead_set_up``, ...)."""
    from kbench_env.pipeline import timing

    steps = iter([{"set_up": 0.5, "block": 0.25, "verdict": 1.0}, {"set_up": 2.0, "block": 0.5, "verdict": 3.0}])
    monkeypatch.setattr(timing, "ahead_budget", lambda device, lock: float("inf"))
    monkeypatch.setattr(timing, "_checker", lambda ctx, cfg: None)
    monkeypatch.setattr(timing, "input_draws", lambda task, cfg: None)
    monkeypatch.setattr(timing.gpu_blocks, "set_up_ahead",
                        lambda *a, **k: gpu_blocks.Ahead(None, 16, "cuda-graph", None, {}, next(steps)))
    configs = [SimpleNamespace(name="small"), SimpleNamespace(name="large")]
    result = EvalResult(task="t", backend="cuda", device="cuda")
    ctx = SimpleNamespace(
        device="cuda", result=result, configs=configs, ahead={}, timing_params={}, worker=None,
        hold=SimpleNamespace(shared=True, lock=None, timing_waits=lambda: False),
        baselines=SimpleNamespace(known=lambda task, cfgs: {c.name: {"gpu": {"block": 16}} for c in cfgs}),
        prepared={c.name: SimpleNamespace(inputs=[]) for c in configs},
        config=SimpleNamespace(timing=SimpleNamespace(noise=0.01, check_calls=1)),
        limits=SimpleNamespace(time_timeout=10.0), task=SimpleNamespace(backward=False))
    timing.set_up_ahead(ctx)
    assert set(ctx.ahead) == {"small", "large"}
    assert {k: v for k, v in result.phase_seconds.items() if k.startswith("ahead_")} == {
        "ahead_set_up": 2.5, "ahead_block": 0.75, "ahead_verdict": 4.0}


def test_a_set_up_that_raises_unmaps_what_it_mapped(clock, monkeypatch):
    class Broken(_FakeRun):
        def block(self, b):
            raise RuntimeError("the worker broke")

    made = []
    monkeypatch.setattr(gpu_blocks, "_Run", lambda *a, **k: made.append(Broken(clock, 1.0)) or made[-1])
    with pytest.raises(RuntimeError):
        gpu_blocks.set_up_ahead(None, "small", [], 0.01, {}, 10.0, "cuda", None, 1, {"block": 16, "wall_ms": 1.0})
    assert made[0].closed

"""A configuration's timed block set up ahead of its timing keeps the seconds of its steps (gpu_blocks.Ahead.spent:
the block set up in the worker, the warm-up block run, its outputs judged), summed over a second warm-up where the
candidate is far slower than the reference, and the evaluation's phases get them (``ahead_*``: where a fast-format
step's ``timing_prepare`` goes). A stand-in for the worker's run and a clock that moves only when a step runs."""

from __future__ import annotations

import inspect
import re
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
    """Each step moves the clock by its own amount: set-up 1 s, block 2 s, verdict 4 s, poison 8 s; a set-up's
    parts: the worker's round trip 0.75 s, of it its capture 0.5 s, the mapping 0.25 s; a block's: staging 0.5 s,
    the worker 1.5 s (as ``_Run.take_parts`` gives them). It starts with parts of an earlier block left over."""

    def __init__(self, clock: _Clock, wall_ms: float, wrong=None):
        self.clock, self.wall_ms, self.wrong, self.calls = clock, wall_ms, wrong, []
        self.closed = False
        self.parts = {"block_stage": 100.0, "block_worker": 100.0}  # a timing's blocks before: not a warm-up's

    def take_parts(self):
        parts, self.parts = self.parts, {}
        return parts

    def _part(self, name, seconds):
        self.parts[name] = self.parts.get(name, 0.0) + seconds

    def set_up(self, block, params, shrink=None):
        self.calls.append(("set_up", block))
        self.clock.now += 1.0
        for name, seconds in (("set_up_worker", 0.75), ("set_up_capture", 0.5), ("set_up_map", 0.25)):
            self._part(name, seconds)
        return block, "cuda-graph"

    def block(self, b):
        self.calls.append(("block", b))
        self.clock.now += 2.0
        self._part("block_stage", 0.5)
        self._part("block_worker", 1.5)
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


#: One warm-up's parts as the stand-in gives them: its set-up's and its block's (seconds of the stand-in clock,
#: which moves only when a step runs: no figure here is a measured time).
PARTS = {"set_up_worker": 0.75, "set_up_capture": 0.5, "set_up_map": 0.25, "block_stage": 0.5, "block_worker": 1.5}


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(gpu_blocks.time, "perf_counter", c)
    return c


def test_a_set_up_keeps_each_steps_seconds(clock):
    run, spent = _FakeRun(clock, wall_ms=1.0), {}
    b, method, wrong = gpu_blocks._set_up(run, {"block": 64, "wall_ms": 1.0}, {}, shrink=True, spent=spent)
    assert (b, method, wrong) == (64, "cuda-graph", None)
    # the verdict and the poisoning both judged; a warm-up's parts, not those left over from before it
    assert spent == {"set_up": 1.0, "block": 2.0, "verdict": 12.0, **PARTS}
    assert [c[0] for c in run.calls] == ["set_up", "block"]


def test_a_far_slower_candidates_second_warm_up_adds_to_the_first(clock):
    run, spent = _FakeRun(clock, wall_ms=10 * gpu_blocks.SLOW_BLOCKS), {}
    b, _, _ = gpu_blocks._set_up(run, {"block": 64, "wall_ms": 1.0}, {}, shrink=True, spent=spent)
    assert b < 64 and ("reset", None) in run.calls  # shrunk: set up again at the smaller block
    assert spent == {"set_up": 2.0, "block": 4.0, "verdict": 24.0, **{k: 2 * v for k, v in PARTS.items()}}


def test_a_wrong_warm_up_is_kept_with_its_steps(clock):
    run, spent = _FakeRun(clock, wall_ms=1.0, wrong=(3, "output wrong")), {}
    _, _, wrong = gpu_blocks._set_up(run, {"block": 8, "wall_ms": 1.0}, {}, shrink=True, spent=spent)
    assert wrong == (3, "output wrong") and spent == {"set_up": 1.0, "block": 2.0, "verdict": 4.0, **PARTS}


def test_set_up_ahead_hands_its_steps_to_the_ahead(clock, monkeypatch):
    monkeypatch.setattr(gpu_blocks, "_Run", lambda *a, **k: _FakeRun(clock, wall_ms=1.0))
    ahead = gpu_blocks.set_up_ahead(None, "small", [], 0.01, {}, 10.0, "cuda", None, 1, {"block": 16, "wall_ms": 1.0})
    assert ahead.block == 16 and ahead.spent == {"set_up": 1.0, "block": 2.0, "verdict": 12.0, **PARTS}


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


@pytest.mark.parametrize("steps_ms, ceiling, expected", [
    ({"warmup": 10.0, "capture": 500.0, "export": 0}, 1.0, {"warmup": 0.01, "capture": 0.5, "export": 0.0}),
    ({"capture": 5000.0, "fill": -3.0}, 1.0, {"capture": 1.0, "fill": 0.0}),  # within [0, the round trip]
    ({"capture": float("nan"), "fill": float("inf"), "buffers": True, "export": "1"}, 1.0, {}),
    ({"phase_injected": 1.0, "set_up": 2.0}, 1.0, {}),  # only the worker's known steps
    ([1, 2], 1.0, {}), (None, 1.0, {}),
])
def test_the_workers_account_of_its_set_up_is_read_within_bounds(steps_ms, ceiling, expected):
    """The worker is not trusted: its ``steps_ms`` gives only known step names, finite numbers, each at most the
    round trip this side measured."""
    from kbench_env.pipeline.gpu_run import worker_steps

    assert worker_steps(steps_ms, ceiling) == pytest.approx(expected)


@pytest.mark.parametrize("usage, expected", [
    ({"capture": [300.0, 900.0, 5, 1, 18], "capture_calls": {"n": 2002, "sum_ms": 120.0}},
     {"capture": 0.5, "capture_cpu": 0.3, "capture_calls": 0.12}),  # the thread's CPU, the candidate's calls
    ({"capture": [5000.0], "capture_calls": {"sum_ms": -1.0}}, {"capture": 0.5, "capture_cpu": 1.0,
                                                                "capture_calls": 0.0}),  # within bounds
    ({"capture": [float("nan")], "export": [1.0], "injected": [1.0], "capture_calls": {"sum_ms": "9"}},
     {"capture": 0.5, "export_cpu": 0.001}),  # only finite figures of the known steps
    ({"capture": "x", "capture_calls": [1.0]}, {"capture": 0.5}), ("junk", {"capture": 0.5}),
])
def test_the_workers_usage_of_its_set_up_steps_is_read_within_bounds(usage, expected):
    """Each step's CPU seconds (the worker's thread) and the candidate's calls inside the capture, from the worker's
    ``steps_usage``: known steps only, finite, within the round trip, like its ``steps_ms``."""
    from kbench_env.pipeline.gpu_run import worker_steps

    assert worker_steps({"capture": 500.0}, 1.0, usage) == pytest.approx(expected)


def test_the_known_steps_are_the_ones_the_gpu_executor_reports():
    """``WORKER_STEPS`` names every step worker/gpu_executor.py's set-up times (a step renamed there would read as
    nothing here)."""
    from kbench_env.pipeline.gpu_run import WORKER_STEPS
    from kbench_env.worker import gpu_executor

    source = inspect.getsource(gpu_executor._gpu_slots)
    named = set(re.findall(r'step\("(\w+)"\)', source))
    assert named and named == set(WORKER_STEPS)


def test_a_timings_blocks_keep_their_parts_and_not_the_set_ups(clock, monkeypatch):
    """time_gpu's result carries its timed blocks' parts (``GpuTiming.parts``: what the phases
    ``timing_block_stage``, ``timing_block_worker``, ``timing_block_verdict`` and ``timing_close`` sum), without the
    set-up's or the warm-up block's."""
    class Sized(_FakeRun):  # (the worker's choice of block size, where none is asked: 8 calls)
        check_seconds, checks = 0.0, None

        def set_up(self, block, params, shrink=None):
            return super().set_up(block or 8, params, shrink)

        def close(self, release):
            self.clock.now += 16.0
            super().close(release)

    monkeypatch.setattr(gpu_blocks, "_Run", lambda *a, **k: Sized(clock, wall_ms=1.0))
    out = gpu_blocks.time_gpu(None, "small", [], 0.01, {"min_reps": 1, "max_reps": 1}, 10.0, "cuda")
    assert out.wrong is None and len(out.walls_ms) == 5  # five blocks: the least a timing runs
    # (each block's verdict 4 s and poisoning 8 s; the close 16 s; the warm-up's verdict not among them)
    assert out.parts == {"block_stage": 5 * 0.5, "block_worker": 5 * 1.5, "block_verdict": 5 * 12.0, "close": 16.0}

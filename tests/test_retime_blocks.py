"""A timing done again because its bound was paid runs on the blocks the timing before it set up
(gpu_blocks.time_gpu_retimed with ``keep`` and ``again``): no second set-up, warm-up or close inside the exclusive
hold; the blocks are closed once, when no timing follows (released in the worker where all went well, only unmapped
where it failed); a short timing in shrunk blocks is still set up anew at the reference's size; every timing's read
outputs are judged once. A stand-in for time_gpu and its run; the exchange itself: tests/test_gpu.py."""

from __future__ import annotations

import pytest
import torch

from kbench_env.pipeline import gpu_blocks
from kbench_env.pipeline.deferred_checks import DeferredChecks
from kbench_env.pipeline.gpu_blocks import GpuTiming


class _Run:
    """A run's close (``release``: told the worker to free its blocks) and its kept checks."""

    def __init__(self):
        self.closed = []
        self.checks = DeferredChecks(_doubles, True)

    def close(self, release: bool) -> None:
        self.closed.append(release)


def _doubles(out, inputs):
    return None if torch.equal(out[0], inputs[0] * 2) else "not twice its input"


def _fake(monkeypatch, ratios: list, shorts: list | None = None, fail_at: int | None = None):
    """time_gpu stood in: the n-th timing paid ``ratios[n]`` of its bound, ran short as ``shorts[n]`` says; with
    ``keep`` it leaves its run set up (``out.run``), else closes it, as time_gpu does; at ``fail_at`` it fails,
    closing (unreleased) the run it was given. Each timing keeps one read output into its run's checks: the second
    timing's is wrong. Returns (the ``ahead`` each call got, the runs set up anew)."""
    given, made = [], []

    def fake(*a, ahead=None, shrink=True, keep=False, **k):
        n = len(given)
        given.append(ahead)
        if n == fail_at:
            if ahead is not None:
                ahead.run.close(False)
            raise RuntimeError("the worker broke the exchange")
        run = ahead.run if ahead is not None else _Run()
        if ahead is None:
            made.append(run)
        y = torch.ones(2)
        run.checks.add(n, [y * (3 if n == 1 else 2)], [y])
        out = GpuTiming(block=8, method="cuda-graph", ratio=ratios[n], short=bool(shorts and shorts[n]),
                        set_up_seconds=0.0 if ahead is not None else 1.0, deferred=run.checks)
        out.timing = gpu_blocks.Timing(1.0, 0.1, 40, [1.0])
        if keep:
            out.run = run
        else:
            run.close(True)
        return out

    monkeypatch.setattr(gpu_blocks, "time_gpu", fake)
    return given, made




def test_a_timing_again_runs_on_the_blocks_of_the_timing_before(monkeypatch):
    given, made = _fake(monkeypatch, [3.6, 0.7])
    got = gpu_blocks.time_gpu_retimed(reference={"block": 8})
    assert got.ratio == 0.7 and len(made) == 1 and given[0] is None
    assert given[1].run is made[0] and given[1].block == 8 and given[1].method == "cuda-graph" and not given[1].wrong
    assert made[0].closed == [True] and got.run is None  # released once, after the timing that counts
    assert got.set_up_seconds == 1.0  # the first timing's set-up only


def test_three_timings_over_the_bound_set_up_once_and_close_once(monkeypatch):
    given, made = _fake(monkeypatch, [1.2, 1.1, 1.3])
    got = gpu_blocks.time_gpu_retimed(reference={"block": 8})
    assert got.ratio == 1.2 and len(given) == gpu_blocks.RETIMINGS == 3 and len(made) == 1
    assert all(g.run is made[0] for g in given[1:]) and made[0].closed == [True]


def test_within_the_bound_at_once_nothing_is_kept(monkeypatch):
    given, made = _fake(monkeypatch, [0.7])
    got = gpu_blocks.time_gpu_retimed(reference={"block": 8})
    assert given == [None] and made[0].closed == [True] and got.run is None


def test_a_short_timing_is_set_up_anew_at_the_references_size(monkeypatch):
    given, made = _fake(monkeypatch, [0.9, 0.9], shorts=[True, False])
    got = gpu_blocks.time_gpu_retimed(reference={"block": 8})
    assert given == [None, None] and len(made) == 2 and [r.closed for r in made] == [[True], [True]]
    assert not got.short


def test_a_timing_again_that_fails_leaves_its_blocks_closed_once_unreleased(monkeypatch):
    given, made = _fake(monkeypatch, [3.6, 0.7], fail_at=1)
    with pytest.raises(RuntimeError, match="broke"):
        gpu_blocks.time_gpu_retimed(reference={"block": 8})
    assert given[1].run is made[0] and made[0].closed == [False]


def test_every_timing_on_the_same_blocks_has_its_read_outputs_judged_once(monkeypatch):
    _fake(monkeypatch, [3.6, 0.7])
    got = gpu_blocks.time_gpu_retimed(reference={"block": 8})
    assert len(got.deferred) == 2  # one read output a timing, the two timings' in the run's one set of checks
    assert got.deferred.judge() == (1, "not twice its input")


class _Blocks:
    """A run set up already: each block reported 0.5 ms in 1 ms of wall time, each verdict 0.25 s of checking; it
    starts with 3 s of checks done before the timing (a set-up ahead's warm-up, or an earlier timing's blocks)."""

    def __init__(self):
        self.closed, self.check_seconds, self.checks = [], 3.0, None

    def block(self, b):
        return 1.0, 0.5, "cuda-graph", [], 0.0

    def verdict(self, staged, b, base):
        self.check_seconds += 0.25
        return None

    def poison(self, b):
        return None

    def take_parts(self):
        return {}

    def close(self, release):
        self.closed.append(release)


@pytest.mark.parametrize("keep", [True, False])
def test_time_gpu_leaves_its_blocks_set_up_only_when_kept(keep):
    run = _Blocks()
    ahead = gpu_blocks.Ahead(run, 8, "cuda-graph", None, None)
    out = gpu_blocks.time_gpu(None, "c", [], 0.01, {"min_reps": 1, "max_reps": 1}, 10.0, "cuda", ahead=ahead,
                              keep=keep)
    assert out.wrong is None and len(out.walls_ms) == 5  # five blocks: the least a timing runs
    assert (out.run is run and run.closed == []) if keep else (out.run is None and run.closed == [True])
    assert out.check_seconds == 5 * 0.25  # this timing's checks, not those made before it on the same run

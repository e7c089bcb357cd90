"""A far slower candidate's timed block is set up in fewer calls before its first capture (gpu_blocks.shrink_hint:
the worker measures one call's device time and makes the block smaller, worker/gpu_executor.shrunk_block), not
after a warm-up block at the reference's size that can hold the device for seconds. What the worker may claim is
bounded: no block larger than ``smaller_block`` itself gives, none at all without the hint, and a shrunk block that
runs short is timed again at the reference's size (gpu_blocks.time_gpu_retimed, covered in test_gpu.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from kbench_env.pipeline import gpu_blocks, gpu_run
from kbench_env.pipeline.gpu_blocks import AIM_BLOCKS, SLOW_BLOCKS, shrink_hint, smaller_block
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.worker.gpu_executor import read_shrink, shrunk_block


def test_the_hint_allows_no_block_larger_than_a_slow_warm_up_would_get():
    """For every reference block and every warm-up wall time, what ``smaller_block`` gives is within the hint's
    ``most``, and the largest it can give is ``most`` itself (the claim buys nothing a slow warm-up could not)."""
    for block in range(1, 600):
        hint = shrink_hint({"block": block, "wall_ms": 5.0})
        given = [smaller_block(block, SLOW_BLOCKS * 5.0 * f, {"wall_ms": 5.0})
                 for f in (1.0001, 1.01, 1.1, 1.5, 3.0, 100.0)]
        given = [b for b in given if b is not None]
        if hint is None:
            assert block == 1 and given == [], (block, given)
            continue
        assert hint["most"] < block and all(b <= hint["most"] for b in given), (block, hint, given)
        assert max(given) == hint["most"], (block, hint, given)
        assert hint["above_ms"] == pytest.approx(SLOW_BLOCKS * 5.0 / block)
        assert hint["aim_ms"] == pytest.approx(AIM_BLOCKS * 5.0)


@pytest.mark.parametrize("reference", [None, {}, {"block": 1, "wall_ms": 5.0}, {"block": 64, "wall_ms": 0.0}])
def test_no_hint_where_no_smaller_block_is_possible(reference):
    assert shrink_hint(reference) is None


@pytest.mark.parametrize("call_ms, expected", [
    (0.01, 256),          # under above_ms: the reference's block
    (0.0625, 256),        # at above_ms exactly: kept
    (float("nan"), 256),  # no figure: kept
    (0.1, 63),            # aim 10 ms / 0.1 ms = 100 calls, no more than most
    (1.0, 10),            # aim 10 ms / 1 ms
    (40.0, 1),            # a call longer than the aim: one call a block
])
def test_the_worker_shrinks_only_a_call_over_the_hint(call_ms, expected):
    hint = read_shrink({"shrink": {"above_ms": 8 * 2.0 / 256, "aim_ms": 10.0, "most": 63}})
    assert shrunk_block(256, call_ms, hint) == expected


@pytest.mark.parametrize("header", [{}, {"shrink": None}, {"shrink": {"above_ms": 1.0}}, {"shrink": "x"},
                                    {"shrink": {"above_ms": "a", "aim_ms": 1, "most": 2}}])
def test_a_header_without_a_whole_hint_shrinks_nothing(header):
    assert read_shrink(header) is None


class _Worker:
    """Answers GPU_SLOTS with a block of ``b`` calls, and keeps what it was sent."""

    def __init__(self, b):
        self.b, self.sent = b, []

    def send(self, header, payload=None):
        self.sent.append(header)

    def recv(self, timeout, what):
        return {"type": "GPU_BUFFERS", "block": self.b, "method": "cuda-graph", "steps_ms": {"call": 2.0}}, None


def _run(worker, monkeypatch):
    monkeypatch.setattr(gpu_run, "BlockInputs", lambda *a, **k: SimpleNamespace(originals=[]))
    monkeypatch.setattr(gpu_run, "input_views", lambda *a, **k: [])
    run = object.__new__(gpu_run._Run)
    run.worker, run.config, run.timeout, run.backward, run.parts = worker, "c", 5.0, False, {}
    run.originals, run.noise, run.device, run.draws, run.maps = [], 0.0, "cuda", None, None
    return run


HINT = {"above_ms": 0.0625, "aim_ms": 10.0, "most": 63}


@pytest.mark.parametrize("b, hint, ok", [
    (256, None, True), (256, HINT, True),   # the block asked
    (63, HINT, True), (1, HINT, True),      # shrunk within the hint
    (64, HINT, False),                      # more than the hint's most
    (63, None, False),                      # shrunk with no hint sent
    (0, HINT, False), (True, None, False),  # not a block
])
def test_the_trusted_side_takes_a_shrunk_block_only_within_the_hint(monkeypatch, b, hint, ok):
    worker = _Worker(b)
    run = _run(worker, monkeypatch)
    if ok:
        assert run.set_up(256, {}, hint) == (b, "cuda-graph")
        assert run.take_parts().get("set_up_call", 0.0) > 0.0  # the worker's measurement, in the set-up's parts
    else:
        with pytest.raises(WorkerError):
            run.set_up(256, {}, hint)
    assert worker.sent[0].get("shrink") == hint and worker.sent[0]["block"] == 256


class _Recorder:
    """A run whose set-ups are recorded; its warm-up block lasts ``wall_ms``."""

    def __init__(self, wall_ms):
        self.wall_ms, self.set_ups = wall_ms, []

    def take_parts(self):
        return {}

    def set_up(self, block, params, shrink=None):
        self.set_ups.append((block, shrink))
        return block, "cuda-graph"

    def block(self, b):
        return self.wall_ms, 0.0, "", [], 0.0

    def verdict(self, staged, b, base):
        return None

    def poison(self, b):
        return None

    def reset(self):
        pass


@pytest.mark.parametrize("shrink", [True, False])
def test_the_hint_goes_with_a_candidates_first_set_up_only_where_it_may_shrink(shrink):
    reference = {"block": 256, "wall_ms": 2.0}
    run = _Recorder(wall_ms=2.0)
    gpu_blocks._set_up(run, reference, {}, shrink)  # noqa: SLF001
    assert run.set_ups == [(256, shrink_hint(reference) if shrink else None)]
    run = _Recorder(wall_ms=2.0)
    gpu_blocks._set_up(run, None, {}, False)  # noqa: SLF001 - the reference's own: the worker's choice, no hint
    assert run.set_ups == [(0, None)]


def test_the_largest_shrunk_block_is_the_smallest_warm_up_that_shrinks():
    """``most`` is ceil(block * AIM / SLOW) - 1 (at least one call) for every block: one fewer would refuse a block
    that a slow warm-up gets, one more would grant one that no warm-up gets."""
    for block in (2, 4, 5, 8, 9, 64, 100, 4096):
        hint = shrink_hint({"block": block, "wall_ms": 1.0})
        assert hint["most"] == max(1, math.ceil(block * AIM_BLOCKS / SLOW_BLOCKS) - 1)

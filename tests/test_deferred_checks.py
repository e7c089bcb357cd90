"""Timed outputs judged after the timing (pipeline/deferred_checks.py, issue #36): the outputs read between timed
blocks are kept with copies of their calls' inputs and judged once the exclusive hold is over; nothing is checked
less (the same calls, read at the same moment), a wrong one fails the candidate as before, and past a memory budget
the checks are judged at once. The GPU exchange itself: tests/test_gpu.py."""

from __future__ import annotations

import random

import torch

from kbench_env.pipeline import gpu_blocks
from kbench_env.pipeline.deferred_checks import DeferredChecks, Pool
from kbench_env.pipeline.gpu_blocks import BlockInputs, GpuTiming
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.timing import judge_deferred
from kbench_env.tasks.task import Config


def _doubles(out, inputs):
    return None if torch.equal(out[0], inputs[0] * 2) else "not twice its input"


def test_kept_checks_are_judged_later_in_call_order_on_copies_of_their_inputs():
    checks = DeferredChecks(_doubles, defer=True)
    x = torch.arange(4.0)
    assert checks.add(5, [x * 2], [x]) is None
    x.add_(100)  # the next block's inputs overwrite the staged buffer the view came from
    assert len(checks) == 1 and checks.judge() is None and len(checks) == 0
    for call, factor in ((7, 3), (3, 3), (1, 2)):
        y = torch.ones(3)
        assert checks.add(call, [y * factor], [y]) is None  # nothing judged yet, right or wrong
    assert checks.judge() == (3, "not twice its input")  # the first wrong in call order


def test_without_defer_or_past_the_budget_checks_are_judged_at_once():
    y = torch.ones(3)
    assert DeferredChecks(_doubles, defer=False).add(2, [y * 3], [y]) == (2, "not twice its input")
    small = DeferredChecks(_doubles, defer=True, pool=Pool(16))
    assert small.add(0, [torch.ones(1) * 2], [torch.ones(1)]) is None and len(small) == 1  # 8 bytes: kept
    assert small.add(1, [torch.ones(2) * 3], [torch.ones(2)]) == (1, "not twice its input")  # past it: now
    assert len(small) == 1


def test_the_budget_is_one_pool_for_every_timing_given_back_when_judged_or_dropped():
    """Two timings on one device draw from one pool: what one keeps, the other cannot; judging gives it back, and
    so does a timing dropped unjudged (one that failed)."""
    pool = Pool(24)
    one, two = DeferredChecks(_doubles, True, pool), DeferredChecks(_doubles, True, pool)
    x = torch.ones(1)
    assert one.add(0, [x * 2], [x]) is None and pool.used == 8
    assert two.add(0, [torch.ones(2) * 2], [torch.ones(2)]) is None and pool.used == 24
    assert one.add(1, [x * 3], [x]) == (1, "not twice its input")  # the pool is full: judged at once
    assert one.judge() is None and pool.used == 16
    assert one.add(2, [x * 2], [x]) is None and pool.used == 24
    one.merge(two)  # a timing done again: its kept checks join the first's, and their bytes with them
    assert pool.used == 24 and len(one) == 2 and len(two) == 0
    del two
    assert pool.used == 24
    del one  # dropped unjudged
    assert pool.used == 0
    if torch.cuda.is_available():  # the device's pool: a share of its memory, one per device
        assert Pool.of("cuda:0") is Pool.of("cuda:0") and Pool.of("cuda:0").capacity >= 256 << 20


def _run(defer: bool, outputs: dict) -> gpu_blocks._Run:
    run = object.__new__(gpu_blocks._Run)
    run.check, run.check_calls, run.rng = _doubles, 2, random.Random(0)
    run.checks = DeferredChecks(_doubles, defer)
    run.inputs = BlockInputs([torch.ones(3)], 0.0, 4, "cpu")
    run.check_seconds = 0.0
    run.read = lambda j: outputs[j](j)
    return run


def test_a_verdict_reads_now_and_numbers_calls_from_the_block_base():
    staged = [torch.stack([torch.full((3,), float(j)) for j in range(4)])]
    good = {j: (lambda j: [staged[0][j] * 2]) for j in range(4)}
    run = _run(True, good)
    assert run.verdict(staged, 4, base=40) is None and len(run.checks) == 2
    assert all(40 <= call < 44 for call, _, _ in run.checks.kept)
    bad = {j: (lambda j: [staged[0][j] * 3]) for j in range(4)}
    run = _run(True, bad)
    assert run.verdict(staged, 4, base=8) is None  # wrong, but judged later
    call, why = run.checks.judge()
    assert 8 <= call < 12 and why == "not twice its input"
    unreadable = {j: (lambda j: (_ for _ in ()).throw(RuntimeError("no layout"))) for j in range(4)}
    call, why = _run(True, unreadable).verdict(staged, 4, base=8)  # unreadable: wrong at once, as before
    assert 8 <= call < 12 and "could not be read" in why


def _result() -> EvalResult:
    r = EvalResult("t", "cuda", "cuda:0")
    r.correct, r.stage, r.speedup, r.speedup_compile = True, "timed", 2.0, 1.5
    return r


def test_a_wrong_deferred_output_fails_the_candidate_and_a_right_one_does_not():
    cfg = Config(name="small", sizes={})
    y = torch.ones(3)
    right = GpuTiming(deferred=DeferredChecks(_doubles, True))
    right.deferred.add(0, [y * 2], [y])
    r = _result()
    judge_deferred([(cfg, right)], r)
    assert r.correct and r.speedup == 2.0 and r.stage == "timed" and not r.integrity_flags
    assert "deferred_output_checks" in r.phase_seconds
    wrong = GpuTiming(deferred=DeferredChecks(_doubles, True))
    wrong.deferred.add(6, [y * 3], [y])
    r = _result()
    judge_deferred([(cfg, right), (cfg, wrong)], r)
    assert not r.correct and r.speedup is None and r.speedup_compile is None and r.stage == "correct"
    assert len(r.integrity_flags) == 1 and r.integrity_flags[0].startswith("timed_output_wrong")
    assert "timed call 6" in r.integrity_flags[0]


def test_every_retiming_s_read_outputs_are_judged(monkeypatch):
    ratios = [3.6, 0.7]
    made = []

    def fake(*a, **k):
        out = GpuTiming(block=8, method="cuda-graph", ratio=ratios[len(made)])
        out.timing = gpu_blocks.Timing(1.0, 0.1, 40, [1.0])
        out.deferred = DeferredChecks(_doubles, True)
        y = torch.ones(2)
        out.deferred.add(len(made), [y * (2 if not made else 3)], [y])  # the first timing's output is the wrong one
        made.append(out)
        return out

    monkeypatch.setattr(gpu_blocks, "time_gpu", fake)
    got = gpu_blocks.time_gpu_retimed()
    assert got.ratio == 0.7 and len(got.deferred) == 2
    assert got.deferred.judge() == (1, "not twice its input")

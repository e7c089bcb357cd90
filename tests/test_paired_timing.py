"""Paired timing on the CPU (pipeline/paired.py, pair_stats.py, quiet.py) and a reward that knows its noise
(pipeline/reward.py): the reference and the candidate timed in alternating blocks, every other worker of the
process stopped while a block runs, so a burner candidate (tests/burner_candidate.py) cannot slow the reference;
the speedup's interval reported, shown and used by the reward."""

from __future__ import annotations

import math
import random

import pytest

from burner_candidate import burning
from conftest import ROOT, read
from kbench_env.pipeline import blocks, pair_stats
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.feedback import policy_feedback
from kbench_env.pipeline.result import ConfigResult, EvalResult
from kbench_env.pipeline.reward import paid_speedup, speedup, tiered
from kbench_env.sandbox.memory import _run_ns, _thread_states
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
HONEST = read(ROOT / "tasks/solutions/cpu/level1/relu.py")


# ---------------------------------------------------------------------- the statistics


def test_the_interval_needs_enough_pairs_and_widens_with_confidence():
    assert pair_stats.min_pairs(0.95) == 6  # [min, max] of 6 pairs: 1 - 2^-5 = 96.9 %
    assert pair_stats.min_pairs(pair_stats.config_confidence(4)) == 8  # 0.9875: 1 - 2^-7 = 99.2 %
    logs = [math.log(1 + k / 100) for k in range(20)]
    assert pair_stats.interval(logs[:5], 0.95) is None
    lo95, hi95 = pair_stats.interval(logs, 0.95)
    lo99, hi99 = pair_stats.interval(logs, 0.99)
    assert lo99 <= lo95 < hi95 <= hi99
    s, ci = pair_stats.speedup(logs, 0.95)
    assert ci[0] <= s <= ci[1] and s == pytest.approx(math.exp((logs[9] + logs[10]) / 2))


def test_a_steady_drift_cancels_in_each_pair():
    """A load that grows steadily over the session (by the same factor each block) moves each candidate block and
    the two reference blocks around it alike: every pair reads the true ratio."""
    ref = [1.0 * 1.05 ** i for i in range(0, 21, 2)]  # reference blocks at times 0, 2, 4, ...
    cand = [0.5 * 1.05 ** i for i in range(1, 21, 2)]  # candidate blocks at times 1, 3, ...
    for x in pair_stats.log_ratios(ref, cand):
        assert x == pytest.approx(math.log(2.0), abs=1e-9)
    with pytest.raises(ValueError, match="enclose"):
        pair_stats.log_ratios(ref[:-1], cand)


def _draws(rng: random.Random, ratio: float, n: int) -> list[float]:
    """Per-pair log ratios under load: a skewed spread (lognormal blocks) and one pair in ten hit by a spike."""
    out = []
    for _ in range(n):
        x = math.log(ratio) + rng.gauss(0, 0.08) + (rng.expovariate(1 / 0.4) if rng.random() < 0.1 else 0.0)
        out.append(x - (rng.expovariate(1 / 0.4) if rng.random() < 0.1 else 0.0))
    return out


def test_the_faster_tier_is_a_test_with_stated_error_rates():
    """Paying "faster" only when the interval's lower end is above 1 is a one-sided test of "not faster". Its
    false-positive rate is at most (1 - confidence) / 2 = 2.5 % whatever the pairs' distribution (the sign test,
    Bonferroni over the configurations); over 4000 seeded evaluations of a candidate exactly as fast as the
    reference (3 configurations, skewed noise of about 8 % a pair with one pair in ten hit by a spike) it was
    0 of 4000 at 12 pairs a configuration and at 8. The price is its miss rate, which falls with the pairs: a
    candidate truly 1.25x faster under that noise is paid as parity in 57 % of evaluations at 8 pairs (the
    fewest), 18 % at 12, 0.1 % at 20; paired timing adds pairs until the interval is narrow or its time is spent."""
    rng = random.Random(37)
    conf = pair_stats.config_confidence(3)

    def rate_faster(ratio: float, pairs: int, trials: int = 4000) -> float:
        hits = 0
        for _ in range(trials):
            cis = [pair_stats.interval(_draws(rng, ratio, pairs), conf) for _ in range(3)]
            hits += pair_stats.combined(cis)[0] > 1.0
        return hits / trials

    for pairs in (8, 12):
        assert rate_faster(1.0, pairs) <= 0.025
    misses = {pairs: 1 - rate_faster(1.25, pairs) for pairs in (8, 12, 20)}
    assert misses[8] == pytest.approx(0.57, abs=0.03)
    assert misses[12] == pytest.approx(0.18, abs=0.03)
    assert misses[20] < 0.01


def test_the_evaluation_interval_is_the_geometric_mean_of_the_configurations_ends():
    lo, hi = pair_stats.combined([(1.0, 4.0), (4.0, 16.0)])
    assert lo == pytest.approx(2.0) and hi == pytest.approx(8.0)
    assert pair_stats.combined([(1.0, 2.0), None]) is None


# ---------------------------------------------------------------------- the reward and the observation


def _result(s: float, ci) -> EvalResult:
    r = EvalResult("level1/relu", "cpu", "cpu", stage="timed", compiled=True, correct=True, speedup=s, speedup_ci=ci)
    r.configs = [ConfigResult("small", False, "float32", ["float32[16, 4096]"], True, speedup=s, speedup_ci=ci,
                              candidate_ms=0.1, reference_ms=0.1 * s, timed_pairs=9)]
    return r


def test_an_interval_that_reaches_one_earns_no_faster_tier():
    straddles, shown = _result(1.31, [0.97, 1.62]), _result(1.31, [1.24, 1.38])
    assert tiered(straddles) == 1.0 and speedup(straddles) == 1.0 and paid_speedup(straddles) == 1.0
    assert tiered(shown) == pytest.approx(1 + math.log(1.31) / math.log(10)) and speedup(shown) == 1.31
    slower = _result(0.8, [0.7, 1.05])  # slower is paid as measured, interval or not
    assert tiered(slower) == pytest.approx(1 + math.log(0.8) / math.log(10))
    no_interval = _result(1.31, None)  # a GPU's timing: the measured speedup, as before
    assert tiered(no_interval) == tiered(shown)
    shown.reward = tiered(shown)
    text = policy_feedback(shown)
    assert "1.31x (1.24-1.38)" in text and "Speedup 1.310x (1.24-1.38) vs eager" in text
    assert "Not shown faster" in policy_feedback(straddles) and "Not shown faster" not in text
    assert EvalResult.from_dict(shown.to_dict()).speedup_ci == [1.24, 1.38]


# ---------------------------------------------------------------------- the mechanism, on real workers


@pytest.fixture
def watched(monkeypatch):
    """Every worker started, and, for each timed block, what each other live worker did meanwhile."""
    workers, seen = [], []
    init, block = Worker.__init__, blocks._Run.block

    def init_(self, source, *args, **kwargs):
        init(self, source, *args, **kwargs)
        self.kb_test_source = source
        workers.append(self)

    def block_(run, calls, *args):
        others = [w for w in workers if w is not run.worker and not w._closed and w.proc.exitcode is None]
        before = {w: (_run_ns([w.proc.pid]), _thread_states(w.proc.pid)) for w in others}
        out = block(run, calls, *args)
        for w in others:
            if w.proc.exitcode is None:
                seen.append((run.worker, w, before[w], (_run_ns([w.proc.pid]), _thread_states(w.proc.pid))))
        return out

    monkeypatch.setattr(Worker, "__init__", init_)
    monkeypatch.setattr(blocks._Run, "block", block_)
    return workers, seen


def test_the_burners_worker_is_stopped_while_the_reference_runs(evaluator, watched):
    """While each block runs, every other worker of the process is stopped and does not run at all: the
    burner's threads while the reference's blocks run, the reference while the burner's run, and another
    evaluation's worker (here an honest one's, evaluated at the same time) while either does. Before paired
    timing the burner's threads ran through the reference's timing (and were paid for it)."""
    workers, seen = watched
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, spare_worker=False,
                   timing={"warmup": 1, "min_reps": 3, "block_seconds": 0.01, "pair_seconds": 0.2})
    try:
        burner, honest = ev.evaluate_many([(RELU, burning(HONEST)), (RELU, HONEST)], max_workers=2, seed=3)
    finally:
        ev.close()
    assert burner.correct and honest.correct, (burner.feedback(), honest.feedback())
    burner_worker = next(w for w in workers if "_kb_burn" in (w.kb_test_source or ""))
    for timed, w, (ns0, states0), (ns1, states1) in seen:
        what = "the burner" if w is burner_worker else "a worker"
        assert ns1 == ns0, f"{what} ran {(ns1 - ns0) / 1e6:.1f} ms during another's timed block"
        assert set(states0) <= set("TtZX") and set(states1) <= set("TtZX"), (states0, states1)
    during_reference = [timed for timed, w, _, _ in seen
                        if w is burner_worker and timed.kb_test_source.endswith("ModelNew = Model\n")]
    assert len(during_reference) >= 2 * 7, len(during_reference)  # every reference block of its configurations
    assert any(w is not burner_worker and timed is burner_worker for timed, w, _, _ in seen)


def test_the_interval_is_reported_and_the_burner_is_not_paid_faster(evaluator):
    """A real evaluation carries its interval (and each configuration's, with the pairs it rests on); the burner,
    slower than the reference, is not paid the faster tier (the chance that it were, were the two equally fast,
    is under 2.5 %; it is slower)."""
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=dict(evaluator.timing))
    try:
        honest = ev.evaluate(RELU, HONEST, seed=4)
        burner = ev.evaluate(RELU, burning(HONEST), seed=4)
    finally:
        ev.close()
    for r in (honest, burner):
        assert r.correct and r.speedup_ci is not None, r.feedback()
        lo, hi = r.speedup_ci
        assert lo <= r.speedup <= hi
        need = pair_stats.min_pairs(pair_stats.config_confidence(len(r.configs)))
        for c in r.configs:
            assert c.speedup_ci[0] <= c.speedup <= c.speedup_ci[1] and c.timed_pairs >= need
        assert f"({lo:.2f}-{hi:.2f})" in r.feedback()
    assert burner.reward <= 1.0, burner.feedback()


def test_each_reference_block_after_the_first_runs_on_the_candidates_inputs_before_it(evaluator, monkeypatch):
    """R C R C ... C R: every reference block but the first is given the inputs the candidate's block before it
    ran on (one making of inputs serves a pair, and a pair's sides compute on the same data); the candidate's
    blocks get inputs made afresh each time (never given any)."""
    from kbench_env.pipeline import paired

    order, real = [], blocks._Run.block

    def block_(run, calls, made=None):
        out = real(run, calls, made)
        order.append((isinstance(run, paired._Candidate), made, run.made))
        return out

    monkeypatch.setattr(blocks._Run, "block", block_)
    r = evaluator.evaluate(RELU, HONEST, seed=6)
    assert r.correct, r.feedback()
    given = 0
    for (was_cand, _, cand_made), (is_cand, made, ref_made) in zip(order, order[1:]):
        if is_cand:
            assert made is None  # the candidate's inputs are always its own, fresh
        elif was_cand and made is not None:
            assert made[0] == cand_made[0] and made[1] is cand_made[1] and ref_made[1] is cand_made[1]
            given += 1
    assert given >= sum(c.timed_pairs for c in r.configs), (given, [c.timed_pairs for c in r.configs])


def test_a_worker_start_waits_for_a_timing_and_a_timing_for_the_starts():
    """A worker's process runs from its start, before it can be registered and stopped: ``LIVE.starting`` keeps
    starts and timings apart (quiet.py). A start begun while a timing holds ``others_stopped`` goes on only once it
    ends; a timing begun while a start is under way waits for it. (Each wait is checked by a thread that would
    have got through within 0.3 s without it: on a very loaded machine a missing wait could go unseen, a present
    one never fails.)"""
    import threading
    import time

    from kbench_env.pipeline.quiet import LiveWorkers

    live = LiveWorkers()
    inside, asked = threading.Event(), threading.Event()

    def start():
        asked.set()
        with live.starting():
            inside.set()

    with live.others_stopped([]):
        t = threading.Thread(target=start, daemon=True)
        t.start()
        assert asked.wait(10)
        time.sleep(0.3)
        assert not inside.is_set()  # held back by the timing
    assert inside.wait(10)
    t.join(10)

    timed = threading.Event()

    def timing():
        with live.others_stopped([]):
            timed.set()

    with live.starting():
        t = threading.Thread(target=timing, daemon=True)
        t.start()
        time.sleep(0.3)
        assert not timed.is_set()  # held back by the start
    assert timed.wait(10)
    t.join(10)

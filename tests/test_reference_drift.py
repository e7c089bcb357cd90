"""The reference cache's drift check under a noisy calibration (issue #36): a drift is measured again before it
invalidates (reference_cache.RECHECKS, the best of the measurements compared), so a cache survives consecutive
processes whose calibrations are noisy, while a real change of the device still invalidates it.

The measurement is injected: each figure of a calibration is the device's own times 1 + N(0, 1.5 %), and with
probability 0.1 per figure and measurement also slowed by 5-20 % (another process's kernels beside it: load only
lowers a rate). Tolerance 5 % (the default). Seeded, over 400 simulated machines of 5 consecutive processes each:

- false positives (a process that invalidates although the device did not change): measured 0.44 % of processes
  (7 of 1600), 1.5 % of 5-process sequences (6 of 400); the test allows 1 % of processes. Without the re-check
  the same noise invalidated 50 % of processes (793 of 1600) and 82 % of sequences (asserted above 25 %).
- misses (a process that keeps the entries although the device changed by 2x, or by 10 %): 0 of 400 each; the
  test allows none for 2x and 1 % for 10 %.

Whether a GPU's calibration noise is within this model is for the GPU run to show: the stored calibration keeps
its rounds (backends/gpu_calibration.py), and ``bench/rl_batch.py --consecutive 5`` counts the re-timings.
"""

from __future__ import annotations

import logging
import random

from kbench_env.pipeline.reference_cache import RECHECKS, ReferenceCache, best_calibration

DEVICE = {"bandwidth": 4.0e12, "flops": {"float32": 5.0e13, "float16": 7.0e14}, "graph_gap_ms": 0.0012}
SIGMA, P_LOAD, MACHINES = 0.015, 0.1, 400


def _measure(rng: random.Random, scale: float = 1.0) -> dict:
    def figure(v: float) -> float:
        x = v * scale * (1 + rng.gauss(0, SIGMA))
        if rng.random() < P_LOAD:
            x *= 1 - rng.uniform(0.05, 0.2)
        return x

    return {"bandwidth": figure(DEVICE["bandwidth"]), "flops": {k: figure(v) for k, v in DEVICE["flops"].items()},
            "graph_gap_ms": DEVICE["graph_gap_ms"] * (1 + rng.gauss(0, 0.1))}


def _process(root, machine: int, rng: random.Random, recheck: bool, scale: float = 1.0) -> bool:
    """One process's drift check on ``machine``: True when it invalidated the entries."""
    cache = ReferenceCache(root, {"machine": machine})
    return cache.check(_measure(rng, scale), (lambda: _measure(rng, scale)) if recheck else None)


def _campaign(root, recheck: bool, scale: float | None = None, seed: int = 36) -> dict:
    """Per machine: a first process stores, four more check on the same device; then (``scale``) one on a device
    whose every rate changed by that factor."""
    rng = random.Random(seed)
    out = {"processes": 0, "invalidated": 0, "sequences_invalidated": 0, "missed": 0}
    for m in range(MACHINES):
        _process(root, m, rng, recheck)
        hits = [_process(root, m, rng, recheck) for _ in range(4)]
        out["processes"] += len(hits)
        out["invalidated"] += sum(hits)
        out["sequences_invalidated"] += any(hits)
        if scale is not None:
            out["missed"] += not _process(root, m, rng, recheck, scale)
    return out


def test_noise_does_not_invalidate_and_a_real_change_does(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="kbench.reference_cache")
    fp = _campaign(tmp_path / "noise", recheck=True, scale=0.5)
    assert fp["invalidated"] <= 0.01 * fp["processes"], fp
    assert fp["missed"] == 0, fp  # every 2x change found
    small = _campaign(tmp_path / "small", recheck=True, scale=1 / 1.1, seed=37)
    assert small["missed"] <= 0.01 * MACHINES, small
    before = _campaign(tmp_path / "before", recheck=False)  # one measurement judged alone, as before the re-check
    assert before["invalidated"] > 0.25 * before["processes"], before


def test_a_check_measures_again_only_on_drift_and_stores_the_best(tmp_path):
    calls = []

    def again(f: float):
        def measure():
            calls.append(f)
            return {"bandwidth": 1e12 * f, "flops": {"float32": 1e13 * f}}
        return measure

    first = ReferenceCache(tmp_path, {"m": 1})
    assert first.check({"bandwidth": 0.9e12, "flops": {"float32": 0.9e13}}, again(1.0)) is False
    assert len(calls) == RECHECKS  # a stored calibration is the best of RECHECKS + 1 measurements
    assert first.epoch == 0
    calls.clear()
    quiet = ReferenceCache(tmp_path, {"m": 1})
    assert quiet.check({"bandwidth": 1.01e12, "flops": {"float32": 0.99e13}}, again(1.0)) is False
    assert calls == []  # within tolerance: nothing measured again
    loaded = ReferenceCache(tmp_path, {"m": 1})
    assert loaded.check({"bandwidth": 0.8e12, "flops": {"float32": 1e13}}, again(1.0)) is False
    assert calls == [1.0] and loaded.epoch == 0  # one disturbed measurement: measured again, kept
    calls.clear()
    changed = ReferenceCache(tmp_path, {"m": 1})
    assert changed.check({"bandwidth": 0.5e12, "flops": {"float32": 0.5e13}}, again(0.5)) is True
    assert calls == [0.5] * RECHECKS and changed.epoch == 1  # every re-measurement agreed: invalidated


def test_best_calibration_takes_the_highest_rates():
    got = best_calibration([{"bandwidth": 1.0, "flops": {"a": 3.0, "b": 1.0}, "graph_gap_ms": 0.1, "x": 1},
                            {"bandwidth": 2.0, "flops": {"a": 1.0}, "graph_gap_ms": 0.3},
                            {"bandwidth": 1.5, "flops": {"a": 2.0}, "graph_gap_ms": 0.2}])
    assert got["bandwidth"] == 2.0 and got["flops"] == {"a": 3.0} and got["graph_gap_ms"] == 0.2 and got["x"] == 1

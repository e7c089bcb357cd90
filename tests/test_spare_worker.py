"""The spare worker (sandbox.SpareWorkers): a started, confined, idle worker that the next candidate gets, so a
step does not wait for a worker to start. It must serve one candidate only, give the same results as a worker
started for the candidate, and never be the reason an evaluation fails (a spare that has gone is replaced)."""

from __future__ import annotations

import io
import os
import signal
import time

import candidates as C
from kbench_env.sandbox.confine import policy
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.spares import SpareWorkers
from kbench_env.tasks.suite import resolve_task, solution_path

LIMITS = Limits(build_timeout=600, run_timeout=30, time_timeout=60)
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}


def _wait_for_spare(pool: SpareWorkers, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = list(pool._ready)  # noqa: SLF001
        if ready:
            return ready[0]
        time.sleep(0.02)
    raise AssertionError("no spare worker started")


def test_the_next_candidate_gets_the_spare_and_its_own_result():
    ev = Evaluator(device="cpu", limits=LIMITS, timing=TIMING, spare_worker=True)
    task = resolve_task("level1/relu")
    try:
        first = ev.evaluate(task, C.WRONG_SHAPE)
        assert first.error_stage == "correctness", first.feedback()
        spare = _wait_for_spare(ev._spares)  # noqa: SLF001
        second = ev.evaluate(task, C.RAISES_IN_FORWARD)
        assert ev._spares.served == 1  # noqa: SLF001
        spare.proc.join(10)  # killed when its evaluation closed it; reaped in the background
        assert spare.proc.exitcode is not None  # used once, then gone like any worker
        assert second.error_stage == "run" and "bad block size" in second.error, second.feedback()
        honest = ev.evaluate(task, solution_path(task, "cpu").read_text())
        assert ev._spares.served == 2  # noqa: SLF001
        assert honest.correct and not honest.integrity_flags and honest.speedup, honest.feedback()
    finally:
        ev.close()


def test_a_spare_that_died_is_replaced_not_blamed():
    ev = Evaluator(device="cpu", limits=LIMITS, timing=TIMING, spare_worker=True)
    task = resolve_task("level1/relu")
    try:
        ev.evaluate(task, C.WRONG_SHAPE)
        spare = _wait_for_spare(ev._spares)  # noqa: SLF001
        os.kill(spare.proc.pid, signal.SIGKILL)
        spare.proc.join(5)
        r = ev.evaluate(task, C.RAISES_IN_FORWARD)
        assert ev._spares.served == 0  # noqa: SLF001
        assert r.error_stage == "run" and "bad block size" in r.error, r.feedback()
    finally:
        ev.close()


def test_an_idle_spare_leaves_by_itself(monkeypatch, tmp_path):
    monkeypatch.setattr(policy, "SPARE_IDLE_S", 0.5)
    (tmp_path / "builds").mkdir()
    pool = SpareWorkers("cpu", "cpu", str(tmp_path / "builds"), LIMITS)
    try:
        pool.refill()
        spare = _wait_for_spare(pool)
        spare.proc.join(15)
        assert spare.proc.exitcode == 0
        with pool.take(C.WRONG_SHAPE) as worker:  # a worker of its own, which loads the candidate
            assert worker is not spare and pool.served == 0
            header, _ = worker.recv(60.0, "build and load")
            assert header["type"] == "loaded", header
    finally:
        pool.close()


def test_without_spares_every_candidate_starts_its_own_worker():
    ev = Evaluator(device="cpu", limits=LIMITS, timing=TIMING, spare_worker=False)
    task = resolve_task("level1/relu")
    assert ev._spares is None  # noqa: SLF001
    r = ev.evaluate(task, C.RAISES_IN_FORWARD)
    assert r.error_stage == "run", r.feedback()


def _wait_for_ready(pool: SpareWorkers, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while pool.ready < n or pool._starting:  # noqa: SLF001
        assert time.monotonic() < deadline, f"{pool.ready} spares ready, {n} wanted"
        time.sleep(0.02)


def test_the_pool_keeps_a_spare_per_evaluation_in_flight_each_serving_once(tmp_path):
    (tmp_path / "builds").mkdir()
    pool = SpareWorkers("cpu", "cpu", str(tmp_path / "builds"), LIMITS, cap=3)
    taken = []
    try:
        for _ in range(4):  # four evaluations in flight: the pool wants three (its cap)
            taken.append(pool.take(C.WRONG_SHAPE))
        assert pool.active == 4 and pool.wanted() == 3
        _wait_for_ready(pool, 3)
        assert pool.ready == 3  # no more than the cap, however many are in flight
        spares = list(pool._ready)  # noqa: SLF001
        served0 = pool.served
        for w in taken:
            w.close()
            pool.evaluation_over()
        assert pool.active == 0
        again = [pool.take(C.RAISES_IN_FORWARD) for _ in range(3)]
        assert pool.served == served0 + 3 and again == spares  # the ready ones, oldest first
        assert not set(map(id, again)) & set(map(id, taken))  # a worker that ran a candidate is never handed out
        for w in again:
            header, _ = w.recv(60.0, "build and load")
            assert header["type"] == "loaded", header
            w.close()
            pool.evaluation_over()
        for w in taken + again:
            w.proc.join(10)
            assert w.proc.exitcode is not None  # every worker ends with its evaluation
    finally:
        pool.close()


def test_the_pool_cap_has_a_default_and_a_setting(monkeypatch):
    from kbench_env.sandbox import spares

    monkeypatch.setenv("KBENCH_SPARE_WORKERS", "5")
    assert spares.default_cap("cpu") == 5
    monkeypatch.delenv("KBENCH_SPARE_WORKERS")
    cap = spares.default_cap("cpu")
    assert 1 <= cap <= min(spares.MAX_SPARES, os.cpu_count() or 1)


def test_a_gpu_pool_is_bound_by_memory_not_by_the_cores(monkeypatch):
    """A trainer's batch on a GPU host is larger than its cores: the GPU pool's cap follows device and host memory
    (a batch whose candidates found no spare started their workers beside its compilers), the CPU's stays at the
    cores."""
    from types import SimpleNamespace

    from kbench_env.sandbox import spares

    monkeypatch.delenv("KBENCH_SPARE_WORKERS", raising=False)
    monkeypatch.setattr(spares.os, "cpu_count", lambda: 4)
    gib = 1 << 30
    monkeypatch.setattr(spares.torch.cuda, "get_device_properties",
                        lambda idx: SimpleNamespace(total_memory=140 * gib))

    def meminfo(gib):  # (default_cap opens /proc/meminfo only)
        return lambda path, *a, **k: io.StringIO(f"MemAvailable: {gib * 1024 * 1024} kB\n")

    monkeypatch.setattr(spares, "open", meminfo(120), raising=False)  # (the module's own name)
    assert spares.default_cap("cuda:0") == 140 // 4  # the device's memory, not the host's 4 cores
    assert spares.default_cap("cpu") == 4  # the CPU's pool: the cores
    monkeypatch.setattr(spares, "open", meminfo(20))
    assert spares.default_cap("cuda:0") == 10  # the host's memory, 2 GiB a spare
    monkeypatch.setattr(spares.torch.cuda, "get_device_properties",
                        lambda idx: SimpleNamespace(total_memory=1024 * gib))
    monkeypatch.setattr(spares, "open", meminfo(1024))
    assert spares.default_cap("cuda:0") == spares.MAX_GPU_SPARES

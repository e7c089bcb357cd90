"""Spare workers started at the idle scheduling class (sandbox/idle_start.py): a spare's threads are at SCHED_IDLE
while it waits, back at the default policy before its candidate loads, and the candidate then runs as in any worker;
where this process could not raise them again, or the setting is off, spares start as before."""

from __future__ import annotations

import os
import time

import pytest

import candidates as C
from kbench_env.sandbox import idle_start
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.spares import SpareWorkers

LIMITS = Limits(build_timeout=600, run_timeout=30, time_timeout=60)
needs_nice = pytest.mark.skipif(not (hasattr(os, "SCHED_IDLE") and idle_start.may_raise()),
                                reason="this process may not take a thread out of SCHED_IDLE (no CAP_SYS_NICE)")


def _policies(pid: int) -> set[int]:
    return {os.sched_getscheduler(int(t)) for t in os.listdir(f"/proc/{pid}/task")}


def _ready_spare(pool: SpareWorkers, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not pool.ready or pool._starting:  # noqa: SLF001
        assert time.monotonic() < deadline, "no spare worker started"
        time.sleep(0.02)
    return pool._ready[0]  # noqa: SLF001


@needs_nice
def test_a_spare_waits_at_the_idle_class_and_its_candidate_runs_at_the_default(tmp_path):
    (tmp_path / "builds").mkdir()
    pool = SpareWorkers("cpu", "cpu", str(tmp_path / "builds"), LIMITS, cap=1)
    try:
        assert pool._idle  # noqa: SLF001
        pool.refill()
        spare = _ready_spare(pool)
        assert _policies(spare.proc.pid) == {os.SCHED_IDLE}
        with pool.take(C.RAISES_IN_FORWARD) as worker:
            assert worker is spare and pool.served == 1
            assert _policies(worker.proc.pid) == {os.SCHED_OTHER}
            header, _ = worker.recv(60.0, "build and load")
            assert header["type"] == "loaded", header
            assert _policies(worker.proc.pid) == {os.SCHED_OTHER}  # (threads started while it loaded: inherited)
            pool.evaluation_over()
    finally:
        pool.close()


def test_the_setting_off_or_no_way_back_leaves_spares_at_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv("KBENCH_SPARE_IDLE_START", "0")
    assert not idle_start.enabled()
    monkeypatch.delenv("KBENCH_SPARE_IDLE_START")
    monkeypatch.setattr(idle_start, "may_raise", lambda: False)
    assert not idle_start.enabled()
    (tmp_path / "builds").mkdir()
    pool = SpareWorkers("cpu", "cpu", str(tmp_path / "builds"), LIMITS, cap=1)
    try:
        assert not pool._idle  # noqa: SLF001
        pool.refill()
        spare = _ready_spare(pool)
        assert _policies(spare.proc.pid) == {os.SCHED_OTHER}
    finally:
        pool.close()


@needs_nice
def test_lower_and_restore_reach_every_thread_of_a_process():
    """This test's own process stands in for a worker: a thread started before ``lower`` and one started after it
    (which inherits the idle class) both go back with ``restore``."""
    import threading

    stop = threading.Event()
    before = threading.Thread(target=stop.wait, daemon=True)
    before.start()
    pid = os.getpid()
    main_before = os.sched_getscheduler(0)
    try:
        assert idle_start.lower(pid) >= 2
        after = threading.Thread(target=stop.wait, daemon=True)
        after.start()
        assert _policies(pid) == {os.SCHED_IDLE}
        assert idle_start.restore(pid) >= 3
        assert _policies(pid) == {os.SCHED_OTHER}
    finally:
        idle_start.restore(pid)
        stop.set()
    assert os.sched_getscheduler(0) == main_before

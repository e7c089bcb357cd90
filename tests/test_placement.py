"""sandbox/placement.py: where the trusted thread that runs a CPU pairing's clock runs, and at what priority."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from kbench_env.sandbox import placement
from kbench_env.sandbox.placement import Placement, timing_cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this system")


def _may_be_realtime() -> bool:
    tid = threading.get_native_id()
    if not placement._realtime(tid):  # noqa: SLF001
        return False
    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
    return True


def test_the_clock_thread_is_on_the_timing_cores_and_ahead_of_other_work_for_the_pairing_only():
    allowed, nice = os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    cores, rt = timing_cores(1), _may_be_realtime()
    with Placement(cores).boosted_here():
        assert os.sched_getaffinity(0) == cores
        if rt:  # real-time, its children not
            assert os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0) == os.SCHED_FIFO
            assert os.sched_getparam(0).sched_priority == placement.REALTIME_PRIORITY
    assert os.sched_getaffinity(0) == allowed
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == nice
    with pytest.raises(RuntimeError):
        with Placement(cores).boosted_here():
            raise RuntimeError("a failed block")
    assert os.sched_getaffinity(0) == allowed and os.sched_getscheduler(0) == os.SCHED_OTHER  # back after it too


def test_without_the_boost_the_thread_is_pinned_only():
    cores = timing_cores(1)
    with Placement(cores, boost=False).boosted_here():
        assert os.sched_getaffinity(0) == cores
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_placed_workers_threads_are_below_the_clock_thread_and_back_to_the_default_after():

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        cores, rt = timing_cores(1), _may_be_realtime()
        p = Placement(cores)
        p.workers_rt = True  # (as boosted_here sets it where its clock thread is real-time)
        p.apply([child.pid])
        for tid in (int(t) for t in os.listdir(f"/proc/{child.pid}/task")):
            assert os.sched_getaffinity(tid) == cores
            if rt and placement.WORKERS_REALTIME:
                assert os.sched_getscheduler(tid) & ~getattr(os, "SCHED_RESET_ON_FORK", 0) == os.SCHED_FIFO
                assert os.sched_getparam(tid).sched_priority == placement.WORKER_PRIORITY < placement.REALTIME_PRIORITY
        p.restore([child.pid])
        for tid in (int(t) for t in os.listdir(f"/proc/{child.pid}/task")):
            assert os.sched_getscheduler(tid) == os.SCHED_OTHER and os.getpriority(os.PRIO_PROCESS, tid) == 0
    finally:
        child.kill()
        child.wait(10)


def test_the_workers_are_real_time_wherever_the_clock_thread_is():
    """On an idle timing core as on a busy one, the workers' blocks are real-time exactly when the clock thread is
    (where this process may make it so), and never without the boost: a worker placed inside the pairing is then
    under SCHED_FIFO below the clock, and back at the default policy after."""

    cores = timing_cores(1)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        p = Placement(cores)
        with p.boosted_here():
            rt = os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0) == os.SCHED_FIFO
            assert p.workers_rt == (rt and placement.WORKERS_REALTIME)
            assert rt == _may_be_realtime_elsewhere()
            p.apply([child.pid])
            policies = {os.sched_getscheduler(t) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)
                        for t in (int(t) for t in os.listdir(f"/proc/{child.pid}/task"))}
            assert policies == ({os.SCHED_FIFO} if p.workers_rt else {os.SCHED_OTHER})
            p.restore([child.pid])
        assert not p.workers_rt or os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        q = Placement(cores, boost=False)
        with q.boosted_here():
            assert not q.workers_rt
    finally:
        child.kill()
        child.wait(10)


def _may_be_realtime_elsewhere() -> bool:
    """Whether a thread other than a real-time one may be made real-time (asked from a fresh thread)."""
    out = []
    t = threading.Thread(target=lambda: out.append(_may_be_realtime()))
    t.start()
    t.join(10)
    return bool(out and out[0])

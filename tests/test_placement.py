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
        p.workers_rt = True  # (as boosted_here sets it where the timing cores carry other work)
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


def test_the_workers_are_real_time_only_where_the_timing_core_carries_other_work():
    """A spinner pinned to the timing core makes it busy for all of the look (a core cannot be idle while a
    runnable thread is on it), so the workers go real-time where the clock thread may; without the boost never."""

    cores = timing_cores(1)
    spin = subprocess.Popen([sys.executable, "-c", "import os, time\nos.sched_setaffinity(0, %r)\n"
                             "end = time.monotonic() + 30\nwhile time.monotonic() < end:\n    pass\n" % (cores,)])
    try:
        time.sleep(0.3)  # (its interpreter started and spinning)
        assert placement._busy(cores) > placement.LOADED_SHARE  # noqa: SLF001
        p = Placement(cores)
        with p.boosted_here():
            assert p.workers_rt == (_may_be_realtime_elsewhere() and placement.WORKERS_REALTIME)
        q = Placement(cores, boost=False)
        with q.boosted_here():
            assert not q.workers_rt
    finally:
        spin.kill()
        spin.wait(10)


def _may_be_realtime_elsewhere() -> bool:
    """Whether a thread other than a real-time one may be made real-time (asked from a fresh thread)."""
    out = []
    t = threading.Thread(target=lambda: out.append(_may_be_realtime()))
    t.start()
    t.join(10)
    return bool(out and out[0])

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


#: A worker stand-in: its main thread answers each line it reads; another thread hashes a large buffer without end
#: (hashlib lets go of the interpreter's lock while it hashes: a thread that never blocks, as a candidate's native
#: threads can be).
SPINNING_WORKER = """
import hashlib, sys, threading
buf = bytes(32 << 20)
def spin():
    while True:
        hashlib.sha256(buf).digest()
threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    print("got " + line.strip(), flush=True)
"""


ANYWHERE = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()


def _answer(child, text: str | None, timeout: float) -> str | None:
    """``child``'s answer to ``text`` (None: its next line) within ``timeout`` seconds, or None."""
    out = []

    def read():  # (off the timing core this thread may be pinned to: there the spinning thread would hold it back)
        os.sched_setaffinity(0, ANYWHERE)
        out.append(child.stdout.readline())

    reader = threading.Thread(target=read, daemon=True)
    if text is not None:
        child.stdin.write(text + "\n")
        child.stdin.flush()
    reader.start()
    reader.join(timeout)
    return out[0].strip() if out else None


@pytest.mark.skipif(not _may_be_realtime(), reason="real-time scheduling not allowed here")
@pytest.mark.parametrize("lifted", [True, False])
def test_a_workers_thread_that_never_blocks_cannot_keep_its_main_thread_off_the_core(lifted):
    """Placed for a block, real-time on one core with a thread of its own that never blocks, the worker's main
    thread still answers at once: it is a step above its other threads. At one priority (``lifted`` False, the
    placement before) real-time threads do not preempt each other and the answer never comes."""
    cores = timing_cores(1)
    child = subprocess.Popen([sys.executable, "-c", SPINNING_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert _answer(child, None, 60) == "ready"  # (its threads started, before they are made real-time)
        p = Placement(cores)
        with p.boosted_here():
            assert p.workers_rt
            p.apply([child.pid], main=child.pid if lifted else None)
            tids = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
            priorities = {t: os.sched_getparam(t).sched_priority for t in tids}
            answers = [_answer(child, str(i), 10) for i in range(3 if lifted else 1)]
            p.restore([child.pid])
        assert sorted(priorities.values()).count(placement.WORKER_MAIN_PRIORITY) == (1 if lifted else 0)
        assert priorities[child.pid] == (placement.WORKER_MAIN_PRIORITY if lifted else placement.WORKER_PRIORITY)
        if lifted:
            assert answers == ["got 0", "got 1", "got 2"]
        else:
            assert answers[0] is None  # starved for 10 s behind its own spinning thread
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

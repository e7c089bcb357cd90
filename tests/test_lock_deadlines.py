"""Every wait for a device lock has a deadline: SharedDeviceLock and DeviceLock give up within ``timeout`` (a holder
of this process or another process's file lock), leave nothing behind when they do, and the evaluation and the
trusted side's holds turn a wait past it into an error or a task left for later, never a hang."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from kbench_env.machine import device_lock as device_lock_mod
from kbench_env.machine.device_lock import DeviceLock
from kbench_env.machine.shared_device_lock import SharedDeviceLock
from kbench_env.pipeline.trusted_hold import HoldNotHad, TrustedHold

HOLD_FILE = ("import fcntl, sys, time\n"
             "f = open(sys.argv[1], 'a+')\n"
             "fcntl.flock(f, fcntl.LOCK_EX)\n"
             "print('held', flush=True)\n"
             "sys.stdin.readline()\n")  # (held until the test closes its stdin)


def _in_thread(fn, join_s: float = 30.0):
    """``fn()``'s value from another thread, or AssertionError if it has not returned in ``join_s``: a wait with
    no deadline fails the test here instead of hanging it."""
    out, raised = [], []

    def run():
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            raised.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(join_s)
    assert not t.is_alive(), "the wait did not end by its deadline"
    if raised:
        raise raised[0]
    return out[0]


@pytest.fixture
def other_process_holds(tmp_path):
    """A lock file that another process holds (LOCK_EX) until the test ends."""
    path = tmp_path / "gpu-other.lock"
    path.touch()
    p = subprocess.Popen([sys.executable, "-c", HOLD_FILE, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        yield path
    finally:
        p.stdin.close()
        p.wait(30)


@pytest.mark.parametrize("shared", [False, True])
def test_a_wait_behind_a_holder_of_this_process_ends_at_its_deadline_and_leaves_the_lock_as_it_was(tmp_path, shared):
    lock = SharedDeviceLock(str(tmp_path / "gpu-test.lock"))
    assert lock.acquire()  # this thread holds it alone
    t0 = time.monotonic()
    got = _in_thread(lambda: lock.acquire(shared=shared, timeout=0.3))
    waited = time.monotonic() - t0
    assert got is False and waited >= 0.3
    assert not lock.waited_for()  # the given-up waiter is not counted as waiting any more
    lock.release()
    assert _in_thread(lambda: lock.acquire(shared=shared, timeout=5.0)) is True  # nothing left in the way
    lock.release()


@pytest.mark.parametrize("shared", [False, True])
def test_a_wait_for_another_processs_file_lock_ends_at_its_deadline(other_process_holds, shared):
    lock = SharedDeviceLock(str(other_process_holds))
    got = _in_thread(lambda: lock.acquire(shared=shared, timeout=0.3))
    assert got is False
    # this process's own state let go: another of its threads may try again, and a non-blocking try says held
    assert lock.acquire(blocking=False) is False
    assert not lock.waited_for()  # no waiter of its own left counted, its gate not left closed


def test_a_plain_device_lock_gives_up_at_its_deadline_behind_another_process(other_process_holds):
    lock = DeviceLock(str(other_process_holds))
    assert _in_thread(lambda: lock.acquire(timeout=0.3)) is False
    assert lock._thread.acquire(blocking=False)  # noqa: SLF001 - the thread lock was let go with the wait
    lock._thread.release()  # noqa: SLF001


def test_a_plain_device_lock_entered_past_its_deadline_raises(other_process_holds, monkeypatch):
    monkeypatch.setattr(device_lock_mod, "WAIT_S", 0.3)
    lock = DeviceLock(str(other_process_holds))

    def enter():
        try:
            with lock:
                return "held"
        except device_lock_mod.DeviceWaitTimeout as exc:
            return str(exc)

    assert "was not free within" in _in_thread(enter)


def test_a_wait_with_a_deadline_takes_the_lock_once_it_is_let_go(tmp_path):
    lock = SharedDeviceLock(str(tmp_path / "gpu-test.lock"))
    assert lock.acquire()
    threading.Timer(0.2, lock.release).start()
    assert _in_thread(lambda: lock.acquire(timeout=10.0)) is True
    lock.release()


def test_a_trusted_hold_not_had_in_time_is_hold_not_had_and_holds_nothing(tmp_path):
    device, task_lock = SharedDeviceLock(str(tmp_path / "gpu-test.lock")), threading.Lock()
    assert device.acquire()  # a timing holds the device
    hold = TrustedHold(device, 0.3, task_lock=task_lock)
    with pytest.raises(HoldNotHad):
        _in_thread(lambda: hold.acquire())
    assert not hold.held
    device.release()
    # the device free and the task's lock taken by a timing of the task: not had either, and the device let go
    assert task_lock.acquire()
    with pytest.raises(HoldNotHad):
        _in_thread(lambda: hold.acquire())
    assert not hold.held and _in_thread(lambda: device.acquire(timeout=1.0)) is True
    device.release()
    task_lock.release()
    _in_thread(lambda: hold.acquire())
    assert hold.held and not task_lock.acquire(blocking=False)
    hold.release()
    assert task_lock.acquire(blocking=False)
    task_lock.release()


def test_a_trusted_hold_with_a_stop_gives_up_as_soon_as_it_is_stopped(tmp_path):
    device = SharedDeviceLock(str(tmp_path / "gpu-test.lock"))
    assert device.acquire()
    stop = threading.Event()
    hold = TrustedHold(device, 600.0, stopped=stop.is_set)
    threading.Timer(0.2, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(HoldNotHad):
        _in_thread(lambda: hold.acquire())
    assert time.monotonic() - t0 < 300  # (stopped, not the 600 s deadline: _in_thread would have failed first)
    device.release()


def test_an_evaluation_whose_device_is_never_free_ends_with_the_evaluators_error(tmp_path, monkeypatch):
    from conftest import ROOT, cpu_evaluator
    from kbench_env.pipeline import device_hold
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    monkeypatch.setattr(device_hold, "WAIT_S", 0.5)
    like = cpu_evaluator()
    like.close()
    task = resolve_task("level1/relu")
    good = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
    ev = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, shared_checks=True,
                   time_candidates=False, cache_dir=tmp_path)
    never = SharedDeviceLock(None)
    ev._device_lock = never  # noqa: SLF001 - a device some hold never lets go
    assert never.acquire()
    try:
        r = _in_thread(lambda: ev.evaluate(task, good, seed=2), join_s=300)
    finally:
        never.release()
        ev.close()
    assert not r.correct
    assert "was not free within" in r.error and "not the candidate's" in r.error, r.feedback()


def test_a_step_aside_whose_wait_ends_in_an_error_leaves_the_other_holders_shares_alone(monkeypatch):
    """A check that stepped aside for a waiting timing and could not hold the device again within the deadline
    ends with the evaluator's error holding nothing: the checks' hold does not release again at its end, which
    would end another check's share of the lock in its place and let the timing start beside that check."""
    from kbench_env.pipeline import device_hold
    from kbench_env.pipeline.result import EvalResult

    monkeypatch.setattr(device_hold, "WAIT_S", 0.5)
    lock = SharedDeviceLock(None)
    a = device_hold.DeviceHold(lock, threading.BoundedSemaphore(4), "cpu", 1)
    b = device_hold.DeviceHold(lock, threading.BoundedSemaphore(4), "cpu", 1)
    result = EvalResult(task="t", backend="cpu", device="cpu")
    timing_had = threading.Event()

    def timing():
        assert lock.acquire(timeout=60)  # waits for both checks; new shared holders wait behind it
        timing_had.set()
        lock.release()

    with b, b.checks(result):
        with pytest.raises(Exception) as raised:
            with a, a.checks(result):
                t = threading.Thread(target=timing, daemon=True)
                t.start()
                deadline = time.monotonic() + 30
                while not a.timing_waits() and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert a.timing_waits()
                a.step_aside(result)  # the timing still waits for b: a cannot hold it again within 0.5 s
        assert "was not free within" in str(raised.value)
        assert lock._shared == 1  # noqa: SLF001 - b's share, still counted
        assert not timing_had.wait(0.3)  # the timing still waits for b
    t.join(30)
    assert timing_had.is_set() and not t.is_alive()

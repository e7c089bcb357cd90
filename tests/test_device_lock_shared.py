"""The shared/exclusive device lock (kbench_env/machine/shared_device_lock.py) and the Evaluator's ``shared_checks``: shared
holders overlap each other, an exclusive holder overlaps nobody (threads and processes), a waiting exclusive
holder stops new shared ones, the shared holders are capped; evaluations give the same results either way."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import pytest

import candidates as C
from conftest import ROOT, read
from kbench_env.machine.shared_device_lock import SharedDeviceLock

TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}


def _paths(tmp_path):
    return [str(tmp_path / "locks" / "gpu-test.lock"), None]  # with a lock file (a GPU), and threads only (the CPU)


def _wait_until(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the condition never came"
        time.sleep(0.001)


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("which", [0, 1], ids=["file", "threads-only"])
def test_shared_holders_overlap(tmp_path, which):
    lock = SharedDeviceLock(_paths(tmp_path)[which], max_shared=3)
    inside = threading.Barrier(3, timeout=30)  # passes only when all three hold the lock at once
    errors = []

    def hold():
        lock.acquire(shared=True)
        try:
            inside.wait()
        except threading.BrokenBarrierError as exc:
            errors.append(exc)
        finally:
            lock.release()

    threads = [threading.Thread(target=hold, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert lock.acquire(blocking=False)  # free again once every holder is done
    lock.release()


@pytest.mark.parametrize("which", [0, 1], ids=["file", "threads-only"])
def test_an_exclusive_holder_overlaps_nobody(tmp_path, which):
    path = _paths(tmp_path)[which]
    locks = [SharedDeviceLock(path)] * 2 + ([SharedDeviceLock(path)] if path else [])  # another instance on the file
    intervals: list = []
    guard = threading.Lock()

    def work(lock, i):
        for k in range(6):
            exclusive = (i + k) % 3 == 0
            lock.acquire(shared=not exclusive)
            t0 = time.monotonic()
            time.sleep(0.005)
            t1 = time.monotonic()
            lock.release()
            with guard:
                intervals.append((exclusive, (t0, t1)))

    threads = [threading.Thread(target=work, args=(locks[i % len(locks)], i), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(intervals) == 36
    exclusive = [iv for ex, iv in intervals if ex]
    assert exclusive and len(exclusive) < len(intervals)
    for e in exclusive:
        others = [iv for _, iv in intervals if iv is not e]
        assert not any(_overlap(e, o) for o in others), (e, sorted(intervals))


def test_a_waiting_exclusive_holder_stops_new_shared_ones(tmp_path):
    lock = SharedDeviceLock(str(tmp_path / "gpu-test.lock"))
    order: list = []
    lock.acquire(shared=True)

    def exclusive():
        with lock:
            order.append("exclusive")

    def shared():
        lock.acquire(shared=True)
        order.append("shared")
        lock.release()

    writer = threading.Thread(target=exclusive, daemon=True)
    writer.start()
    try:
        _wait_until(lambda: lock._writers_waiting == 1)  # noqa: SLF001 - the writer waits for the shared holder
        let_in = lock.acquire(blocking=False, shared=True)  # a shared holder would be let in beside the first
        if let_in:
            lock.release()
        reader = threading.Thread(target=shared, daemon=True)
        reader.start()
    finally:
        lock.release()
    assert not let_in
    writer.join(30)
    reader.join(30)
    assert order == ["exclusive", "shared"]


@pytest.mark.parametrize("which", [0, 1], ids=["file", "threads-only"])
def test_a_hold_taken_when_idle_waits_for_everyone_and_holds_nobody_back(tmp_path, which):
    """``acquire_idle`` (a reference timed ahead): while a check holds the device, new checks still come in and a
    waiting timing goes first; it takes the device only once nobody holds or waits, overlaps nobody then, and
    gives up by its timeout."""
    lock = SharedDeviceLock(_paths(tmp_path)[which])
    order, got = [], []
    lock.acquire(shared=True)
    idle = threading.Thread(target=lambda: got.append(lock.acquire_idle(30)) or order.append("idle"), daemon=True)
    idle.start()
    try:
        time.sleep(0.05)  # the idle waiter is in its wait
        assert not got and not lock._writers_waiting  # noqa: SLF001 - it does not count as a waiting timing
        second = lock.acquire(blocking=False, shared=True)  # a new check is let in beside the first
        assert second
        lock.release()

        def timing():
            with lock:
                order.append("timing")

        writer = threading.Thread(target=timing, daemon=True)
        writer.start()
        _wait_until(lambda: lock._writers_waiting == 1)  # noqa: SLF001
    finally:
        lock.release()
    writer.join(30)
    idle.join(30)
    assert order == ["timing", "idle"] and got == [True]
    assert not lock.acquire(blocking=False, shared=True)  # the idle holder holds it exclusively
    assert not lock.acquire_idle(0.05)  # and a second one gives up by its timeout
    lock.release()
    assert lock.acquire(blocking=False, shared=True)
    lock.release()


@pytest.mark.parametrize("which", [0, 1], ids=["file", "threads-only"])
def test_a_hold_taken_before_the_trusted_side_waits_out_only_its_holders_and_steps_back_for_candidates(tmp_path,
                                                                                                      which):
    """``acquire_idle(before_trusted=True)`` (a reference timed ahead while other references run ahead): the trusted
    side's shared holders are waited out as a waiting writer would (a new trusted holder waits), and it holds the
    device once they are gone; a candidate's check or timing that comes while it waits goes first (it steps back)."""
    lock = SharedDeviceLock(_paths(tmp_path)[which])
    got = []

    def ahead():
        got.append(lock.acquire_idle(30, before_trusted=True))

    # 1. only the trusted side holds: it queues, a new trusted holder waits, it holds once the first has gone
    assert lock.acquire(shared=True, trusted=True)
    t = threading.Thread(target=ahead, daemon=True)
    t.start()
    _wait_until(lambda: lock._writers_waiting == 1)  # noqa: SLF001 - it waits as a writer
    assert not lock.acquire(blocking=False, shared=True, trusted=True)
    lock.release(trusted=True)
    t.join(30)
    assert got == [True]
    assert not lock.acquire(blocking=False, shared=True, trusted=True)  # held exclusively
    lock.release()

    # 2. a candidate's check comes while it waits: it steps back, the check is let in beside the trusted holder
    got.clear()
    assert lock.acquire(shared=True, trusted=True)
    t = threading.Thread(target=ahead, daemon=True)
    t.start()
    _wait_until(lambda: lock._writers_waiting == 1)  # noqa: SLF001
    checked = threading.Event()
    check = threading.Thread(target=lambda: lock.acquire(shared=True) and checked.set(), daemon=True)
    check.start()
    assert checked.wait(30), "a candidate's check waited behind a reference timed ahead"
    assert not got  # still waiting: the check holds the device now
    lock.release(trusted=True)
    time.sleep(0.2)
    assert not got  # the check still holds: a candidate's holder is waited out as it comes, not queued against
    lock.release()  # the check's
    t.join(30)
    assert got == [True]
    lock.release()

    # 3. a candidate's timing comes while it waits: the timing goes first
    got.clear()
    order = []
    assert lock.acquire(shared=True, trusted=True)
    t = threading.Thread(target=lambda: ahead() or order.append("ahead"), daemon=True)
    t.start()
    _wait_until(lambda: lock._writers_waiting == 1)  # noqa: SLF001

    def timing():
        with lock:
            order.append("timing")
            time.sleep(0.1)

    writer = threading.Thread(target=timing, daemon=True)
    writer.start()
    time.sleep(0.2)  # both wait for the trusted holder; the reference's steps back for the timing
    lock.release(trusted=True)
    writer.join(30)
    t.join(30)
    assert order == ["timing", "ahead"] and got == [True]
    lock.release()
    assert lock.acquire(blocking=False, shared=True)
    lock.release()

    # 4. the trusted holder stays: it gives up by its timeout, and holds nothing back after
    assert lock.acquire(shared=True, trusted=True)
    gave_up = []
    t = threading.Thread(target=lambda: gave_up.append(lock.acquire_idle(0.2, before_trusted=True)), daemon=True)
    t.start()
    t.join(30)
    assert gave_up == [False], "it did not give up by its timeout"
    assert lock.acquire(blocking=False, shared=True, trusted=True) and lock.acquire(blocking=False, shared=True)
    lock.release()
    lock.release(trusted=True)
    lock.release(trusted=True)


def test_shared_holders_are_capped():
    lock = SharedDeviceLock(None, max_shared=2)
    assert lock.acquire(blocking=False, shared=True)
    assert lock.acquire(blocking=False, shared=True)
    assert not lock.acquire(blocking=False, shared=True)
    peak, now, guard = [0], [0], threading.Lock()

    def hold():
        lock.acquire(shared=True)
        with guard:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.002)
        with guard:
            now[0] -= 1
        lock.release()

    threads = [threading.Thread(target=hold, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    lock.release()
    lock.release()
    for t in threads:
        t.join(30)
    assert 1 <= peak[0] <= 2
    assert lock.acquire(blocking=False)
    lock.release()


def _shared_at_barrier(path: str, barrier) -> None:
    lock = SharedDeviceLock(path)
    lock.acquire(shared=True)
    try:
        barrier.wait(30)  # raises BrokenBarrierError (exit code 1) unless both processes hold it at once
    finally:
        lock.release()


def _try(path: str, shared: bool, out) -> None:
    lock = SharedDeviceLock(path)
    got = lock.acquire(blocking=False, shared=shared)
    if got:
        lock.release()
    out.put(got)


def test_processes_share_shared_holds_and_not_exclusive_ones(tmp_path):
    ctx = mp.get_context("spawn")
    path = str(tmp_path / "locks" / "gpu-test.lock")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_shared_at_barrier, args=(path, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]

    mine = SharedDeviceLock(path)
    q = ctx.Queue()

    def other(shared: bool) -> bool:
        p = ctx.Process(target=_try, args=(path, shared, q))
        p.start()
        got = q.get(timeout=60)
        p.join(30)
        return got

    with mine:  # exclusive here: the other process gets neither kind
        assert other(shared=True) is False
        assert other(shared=False) is False
    mine.acquire(shared=True)  # shared here: the other process gets a shared hold, not an exclusive one
    try:
        assert other(shared=True) is True
        assert other(shared=False) is False
    finally:
        mine.release()
    assert other(shared=False) is True


def _outcome(r):
    return r.correct, r.integrity_flags, r.error_stage, r.stage


def test_evaluator_with_shared_checks_gives_the_same_results(evaluator):
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    relu = resolve_task("level1/relu")
    good = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
    items = [(relu, good), (relu, C.WRONG_SHAPE), (relu, good), (relu, C.RAISES_IN_FORWARD), (relu, "garbage (")]
    out = {}
    for shared in (False, True):
        ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=dict(TIMING), spare_worker=False,
                       shared_checks=shared)
        try:
            out[shared] = ev.evaluate_many(items, max_workers=len(items), seed=5)
            held = getattr(ev._device_lock, "held_seconds", None)  # noqa: SLF001
        finally:
            ev.close()
    assert [_outcome(r) for r in out[True]] == [_outcome(r) for r in out[False]]
    assert [r.correct for r in out[True]] == [True, False, True, False, False]
    for r in out[True]:
        assert ("check_wait" in r.phase_seconds) == r.compiled, r.phase_seconds
        assert ("device_wait" in r.phase_seconds) == r.correct  # only what is timed waits for the device alone
    assert all(r.speedup is not None for r in out[True] if r.correct)
    assert not any("check_wait" in r.phase_seconds for r in out[False])
    assert held and held > 0


def test_shared_checks_are_off_unless_asked(monkeypatch):
    from kbench_env.pipeline.evaluator import Evaluator

    monkeypatch.delenv("KBENCH_SHARED_CHECKS", raising=False)
    ev = Evaluator(device="cpu", spare_worker=False)
    # The CPU's lock is one SharedDeviceLock per process (device_hold.CPU_LOCK): without shared checks it is only
    # ever held exclusively, and no slots bound the checks in flight.
    assert not ev.shared_checks and ev._device_slots is None  # noqa: SLF001
    ev.close()
    monkeypatch.setenv("KBENCH_SHARED_CHECKS", "1")
    ev = Evaluator(device="cpu", spare_worker=False)
    assert ev.shared_checks and isinstance(ev._device_lock, SharedDeviceLock)  # noqa: SLF001
    ev.close()

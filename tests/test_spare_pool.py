"""The spare pool's size over time (sandbox.SpareWorkers), with fake workers and the pool's clock given: a trainer's
batches arrive in bursts after quiet gaps (its policy generating), and each burst should find as many started
workers as the last one had in flight (up to the pool's cap); a pool that saw no work for a spare's idle time
shrinks back to one; on a GPU no spare starts while an evaluation is in flight (the driver's lock)."""

from __future__ import annotations

import threading
import time

import pytest

from kbench_env.sandbox import spares as spares_mod
from kbench_env.sandbox.confine import policy
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.spares import SpareWorkers

IDLE = policy.SPARE_IDLE_S


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeProc:
    exitcode = None
    pid = None  # (no process: idle_start.py has nothing to lower or restore)


class FakeWorker:
    """What the pool uses of a Worker: its start time, its process's exit code and pid (none here: no process for
    idle_start.py to reach), assign and close."""

    def __init__(self, source, *args, builder=None, log=None, clock=None, pool=None):
        self.source, self.closed = source, False
        self.proc = FakeProc()
        if source is None:
            log.append(pool[0].active)  # evaluations in flight when this spare started
            assert pool[0].gate.wait(10), "the test never let the spares' start finish"
        self._t_created = clock()

    def assign(self, source):
        self.source = source

    def close(self):
        if not self.closed:
            self.closed, self.proc.exitcode = True, -9


@pytest.fixture
def make_pool(monkeypatch):
    made = []

    def make(device="cuda:0", cap=6, clock=None, room=None):
        clock, log, holder = clock or Clock(), [], []
        monkeypatch.setattr(spares_mod, "Worker",
                            lambda *a, **k: FakeWorker(*a, **k, log=log, clock=clock, pool=holder))
        pool = SpareWorkers("cuda" if device != "cpu" else "cpu", device, "/nonexistent", Limits(), cap=cap,
                            clock=clock, room=room)
        pool.gate = threading.Event()  # a spare's start ends when it is set (seconds, on a GPU)
        pool.gate.set()
        holder.append(pool)
        made.append(pool)
        return pool, clock, log

    yield make
    for pool in made:
        pool.close()


def settle(pool: SpareWorkers, timeout: float = 10.0) -> None:
    """Wait (with a deadline) until the spares being started are in the pool."""
    deadline = time.monotonic() + timeout
    while pool._starting:  # noqa: SLF001
        assert time.monotonic() < deadline, "spares still starting"
        time.sleep(0.005)


def fire_timer(pool: SpareWorkers) -> None:
    """Run the pool's timer now, as it would at its deadline (the given clock is past it)."""
    timer = getattr(pool, "_timer", None)
    if timer is not None:
        timer.cancel()
        timer.function(*timer.args)
    settle(pool)


def burst(pool: SpareWorkers, n: int) -> list:
    """``n`` candidates at once: spares started meanwhile are not ready before the burst's last take."""
    pool.gate.clear()
    try:
        return [pool.take("candidate") for _ in range(n)]
    finally:
        pool.gate.set()
        settle(pool)


def end(pool: SpareWorkers, taken: list) -> None:
    for worker in taken:
        worker.close()
        pool.evaluation_over()
        settle(pool)


def test_a_burst_after_a_quiet_gap_finds_the_last_bursts_peak_of_spares(make_pool):
    pool, clock, _ = make_pool(cap=6)
    first = burst(pool, 8)  # eight in flight: the pool wants six, its cap
    clock.now += 60  # the batch builds, checks and times
    end(pool, first)
    assert pool.active == 0 and pool.wanted() == 6
    assert pool.ready == 6
    # The policy generates for longer than a spare waits: those started with the first burst leave (the pool
    # replaces them, the window still holding the first burst's peak) ...
    clock.now += IDLE - 60
    fire_timer(pool)
    clock.now += 30
    served0 = pool.served
    second = burst(pool, 8)
    assert pool.served - served0 == 6, "the second burst should find the first burst's peak of spares (capped)"
    assert all(not w.closed for w in second)
    end(pool, second)


def test_the_pool_keeps_the_peak_between_bursts_without_starting_more(make_pool):
    pool, clock, _ = make_pool(device="cpu", cap=4)
    first = burst(pool, 3)
    end(pool, first)
    started = pool.started
    clock.now += 10
    fire_timer(pool)  # nothing about to leave: nothing closed, nothing started
    assert pool.ready == 3 and pool.started == started
    served0 = pool.served
    end(pool, burst(pool, 3))
    assert pool.served - served0 == 3


def test_a_pool_that_saw_no_work_for_the_window_shrinks_back_to_one(make_pool):
    pool, clock, _ = make_pool(cap=6)
    first = burst(pool, 6)
    end(pool, first)
    kept = list(pool._ready)  # noqa: SLF001
    assert len(kept) == 6 and pool.wanted() == 6
    clock.now += IDLE + 1  # a window with no evaluation in flight
    assert pool.wanted() == 1
    fire_timer(pool)
    assert pool.ready == 1 and sum(w.closed for w in kept) == 5
    assert getattr(pool, "_timer", None) is None  # no work in the window: no timer waits
    started = pool.started
    clock.now += IDLE  # the last one leaves by itself: not replaced until work comes
    kept[-1].proc.exitcode = 0
    fire_timer(pool)
    assert pool.started == started
    served0 = pool.served
    end(pool, burst(pool, 1))
    assert pool.served == served0  # the one left had gone


def test_on_a_gpu_no_spare_starts_while_any_evaluation_is_in_flight(make_pool):
    """A CUDA context's start holds the driver's lock that every evaluation in flight needs: a GPU pool starts its
    spares only between batches, neither at the takes nor when some of the batch's evaluations end."""
    pool, clock, log = make_pool(cap=6)
    end(pool, burst(pool, 6))  # (the pool had none: every candidate started its own worker; none started besides)
    assert log == [0] * 6 and pool.ready == 6
    second = burst(pool, 6)  # six takes, each served by a spare: none replaced while the batch runs
    assert pool.served == 6 and log == [0] * 6
    end(pool, second[:5])  # five over, one still in flight: still none
    clock.now += 60
    fire_timer(pool)
    assert log == [0] * 6 and pool.ready == 0
    end(pool, second[5:])  # the batch is over: the pool refills to its peak
    assert log == [0] * 12 and pool.ready == 6


def test_with_spares_in_flight_a_gpu_pool_starts_one_per_evaluation_but_none_beside_a_single_one(make_pool,
                                                                                                 monkeypatch):
    monkeypatch.setenv("KBENCH_GPU_SPARES_IN_FLIGHT", "1")
    pool, clock, log = make_pool(cap=6)
    first = burst(pool, 6)
    assert 1 not in log  # the first take (one in flight) started none
    assert max(log) > 1  # the later takes started spares with the batch in flight
    for w in pool._ready:  # noqa: SLF001 - every spare gone: the pool lacks its peak of six
        w.proc.exitcode = 0
    end(pool, first[:4])
    clock.now += 60
    fire_timer(pool)  # two in flight: the gone ones are replaced up to one per evaluation, not to the peak
    assert pool.active == 2 and pool.wanted() == 6 and pool.ready == 2
    for w in pool._ready:  # noqa: SLF001
        w.proc.exitcode = 0
    end(pool, first[4:5])  # one left in flight, its timed runs under way
    clock.now += IDLE - 70  # the timer fires meanwhile: spares that left are not replaced during those runs
    fire_timer(pool)
    assert 1 not in log, f"spares started with a single evaluation in flight: {log}"
    assert pool.ready == 0
    end(pool, first[5:])  # over: the pool refills to the peak, with nothing in flight
    assert log.count(0) == 6 and pool.ready == 6
    # a single evaluation on its own: its take starts nothing, its end replaces what it took
    n = len(log)
    one = pool.take("candidate")
    settle(pool)
    assert len(log) == n
    end(pool, [one])
    assert log[n:] == [0]
    assert 1 not in log


def test_a_cpu_pool_starts_spares_with_evaluations_in_flight(make_pool):
    pool, _, log = make_pool(device="cpu", cap=4)
    first = burst(pool, 3)
    assert log and min(log) >= 1  # started at the takes, the batch in flight
    end(pool, first)


def test_a_gpu_pool_starts_no_more_spares_than_the_devices_memory_takes(make_pool):
    """The driver's room (how many more processes fit with the reserve free) bounds the spares started, those still
    starting counted against it; shed gives the ready ones back, and they come back as memory allows."""
    fits = [3]  # processes the memory left takes besides the ready spares (which the driver sees using theirs)
    holder = []
    pool, _, log = make_pool(cap=6, room=lambda: fits[0] - holder[0].ready)
    holder.append(pool)
    end(pool, burst(pool, 6))  # six in flight: the peak is six, the room three
    assert pool.ready == 3 and pool.started == 3
    fits[0] = 0  # the others' evaluations filled the device meanwhile
    assert pool.shed() == 3 and pool.ready == 0
    taken = burst(pool, 2)
    assert pool.started == 3  # none started while there is no room
    fits[0] = 1
    end(pool, taken)
    assert pool.started == 4 and pool.ready == 1


def test_a_gpu_pool_without_the_drivers_figure_is_bound_by_its_cap_alone(make_pool):
    pool, _, _ = make_pool(cap=4, room=lambda: None)
    end(pool, burst(pool, 6))
    assert pool.ready == 4


def test_on_the_cpu_a_take_starts_a_replacement_at_once(make_pool):
    pool, _, log = make_pool(device="cpu", cap=2)
    one = pool.take("candidate")
    settle(pool)
    assert log == [1] and pool.ready == 1
    end(pool, [one])


def test_the_timer_replaces_a_spare_about_to_leave_by_itself(make_pool, monkeypatch):
    monkeypatch.setattr(policy, "SPARE_IDLE_S", spares_mod.LEAVING_MARGIN_S + 0.3)  # a spare lasts 0.3 s here
    pool, _, _ = make_pool(device="cpu", cap=2, clock=time.monotonic)
    end(pool, [pool.take("candidate")])
    deadline = time.monotonic() + 30
    first, started = [], 0
    while not first:  # (under load the timer may be replacing it already)
        assert time.monotonic() < deadline, "no spare"
        first, started = list(pool._ready)[:1], pool.started  # noqa: SLF001
        time.sleep(0.01)
    while not (first[0].closed and pool.started > started):
        assert time.monotonic() < deadline, "the timer did not replace the spare"
        time.sleep(0.02)

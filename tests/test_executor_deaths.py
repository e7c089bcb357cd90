"""A device process of the process executor (kbench_env/executors/processes.py) killed at each point of its life:
before it has taken the work sent to it, while a candidate is in flight in it, after it answered (idle), and one
stuck with a candidate. Each batch must end with one result for every item, none lost or duplicated, the items the
dead process held sent to the other one (RetriedResult says why). Issue #34: a process killed at the wrong moment
left ``evaluate_iter`` waiting 31 minutes in a queue read without a deadline.

Every wait here has a deadline (``no_hang``, thread joins with a timeout): a hang fails the test."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import candidates as C
from conftest import ROOT, no_hang, read
from kbench_env.executors import ProcessExecutor
from kbench_env.executors.processes import STUCK_AFTER_S
from kbench_env.executors.retried import RetriedResult
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
GOOD = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
#: A candidate that spends seconds in the worker (at import), so that it is in flight when the process dies.
SLOW = C._forward("        return torch.relu(x)", at_import="time.sleep(4)\n")
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}
#: Far above what any of these batches takes: a guard against a hang, not a timing assertion.
GUARD_S = 900


@pytest.fixture()
def executor(tmp_path):
    ex = ProcessExecutor(device=["cpu", "cpu"], cache_dir=tmp_path / "cache", timing=TIMING)
    try:
        yield ex
    finally:
        ex.close()


def _all_once(got: list, n: int) -> dict:
    """{index: result} of ``got`` (pairs), asserting every index of ``n`` items came exactly once."""
    indexes = [i for i, _ in got]
    assert sorted(indexes) == list(range(n)), f"results for items {sorted(indexes)}, expected each of 0..{n - 1} once"
    return dict(got)


def _in_background(ex, items: list) -> tuple[threading.Thread, list, list]:
    got, errors = [], []

    def run():
        try:
            got.extend(ex.evaluate_iter(items, seed=3))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got, errors


def _wait_until(condition, what: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds:.0f} s"
        time.sleep(0.05)


def _started_on(ex, device: int) -> bool:
    with ex._lock:
        return any(j.device == device and j.started is not None for j in ex._pending.values())


def test_killed_before_it_took_its_work(executor):
    """Process 0 is stopped, work is sent to both, then process 0 is killed without having taken any: its
    candidates are run by process 1 and say they were sent again ("not yet taken")."""
    items = [(RELU, "garbage (")] * 4 + [(RELU, GOOD)] * 2
    with no_hang(GUARD_S):
        os.kill(executor._procs[0].pid, signal.SIGSTOP)
        it = executor.evaluate_iter(items, seed=3)
        got = [next(it)]  # sent (to both), and a first answer (from process 1)
        held = executor.sent[0]
        assert held > 0, "nothing was sent to process 0: the test shows nothing"
        os.kill(executor._procs[0].pid, signal.SIGKILL)
        got += list(it)
    results = _all_once(got, len(items))
    retried = [r for r in results.values() if isinstance(r, RetriedResult)]
    assert len(retried) == held
    assert all(r.retries == 1 and "not yet taken" in r.retried_because[0] for r in retried)
    assert [results[i].correct for i in range(len(items))] == [False] * 4 + [True] * 2


def test_killed_with_a_candidate_in_flight(executor):
    """The slow candidate goes to process 0 (the first item goes to the first of two idle processes); once
    process 0 has started it, process 0 is killed: the candidate is run again by process 1."""
    items = [(RELU, SLOW), (RELU, "garbage ("), (RELU, GOOD)]
    t, got, errors = _in_background(executor, items)
    _wait_until(lambda: _started_on(executor, 0), "process 0 starting a candidate")
    os.kill(executor._procs[0].pid, signal.SIGKILL)
    t.join(timeout=GUARD_S)
    assert not t.is_alive(), "the batch did not end"
    assert not errors, errors
    results = _all_once(got, len(items))
    assert isinstance(results[0], RetriedResult) and "in flight" in results[0].retried_because[0], results[0]
    assert results[0].compiled and results[2].correct


def test_killed_while_idle_after_answering(executor):
    """Process 0 answered its share of a batch and idles; killed, the next batch is answered in full."""
    items = [(RELU, "garbage (")] * 2 + [(RELU, GOOD)] * 2
    with no_hang(GUARD_S):
        first = _all_once(list(executor.evaluate_iter(items, seed=3)), len(items))
        assert executor.sent[0] > 0 and executor.sent[1] > 0
        os.kill(executor._procs[0].pid, signal.SIGKILL)
        executor._procs[0].join(timeout=30)
        second = _all_once(list(executor.evaluate_iter(items, seed=3)), len(items))
    assert [first[i].correct for i in range(4)] == [second[i].correct for i in range(4)] == [False, False, True, True]


def test_a_stuck_process_is_killed_and_its_candidate_goes_elsewhere(executor):
    """Process 0 stops (SIGSTOP) with a candidate in flight: past ``stuck_after`` it is killed and the candidate
    runs in process 1."""
    items = [(RELU, SLOW), (RELU, "garbage (")]
    t, got, errors = _in_background(executor, items)
    _wait_until(lambda: _started_on(executor, 0), "process 0 starting a candidate")
    executor.stuck_after = 2.0  # (for process 0's candidate only: set back once process 0 is out)
    os.kill(executor._procs[0].pid, signal.SIGSTOP)
    _wait_until(lambda: 0 in executor._dead, "process 0 found stuck")
    executor.stuck_after = STUCK_AFTER_S
    t.join(timeout=GUARD_S)
    assert not t.is_alive(), "the batch did not end"
    assert not errors, errors
    results = _all_once(got, len(items))
    assert isinstance(results[0], RetriedResult) and "stuck" in results[0].retried_because[0], results[0]
    assert not executor._procs[0].is_alive()


def test_with_no_process_left_the_batch_ends_with_an_error(executor):
    """Both processes stop before taking their work: past ``stuck_after`` both are killed, and the candidates fail
    with an error that says so instead of waiting."""
    executor.stuck_after = 2.0
    with no_hang(GUARD_S):
        for p in executor._procs:
            os.kill(p.pid, signal.SIGSTOP)
        with pytest.raises(RuntimeError, match="no evaluator process is left"):
            list(executor.evaluate_iter([(RELU, "garbage (")] * 2, seed=3))
    for p in executor._procs:  # killed as stuck
        p.join(timeout=30)
        assert not p.is_alive()

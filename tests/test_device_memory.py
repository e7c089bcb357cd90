"""A GPU's memory shared by the host's evaluations (machine/device_memory.py): what counts as the device running
out, how many more processes fit while a reserve stays free, the wait for memory, and the Evaluator's second run of
an evaluation that met the device exhausted outside the candidate (the trusted side, a reference's timed call),
with its first run dropped (pipeline/attempts.py). The driver's figures are made up here (a CPU machine has none)."""

from __future__ import annotations

import pytest
import torch

from kbench_env.machine import device_memory
from kbench_env.pipeline import attempts
from kbench_env.pipeline.blocks import TimedCallFailed
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

GIB = 1 << 30


def test_what_counts_as_the_device_running_out():
    assert device_memory.is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.75 GiB"))
    # a reference's timed call that ran out in its own process, reported by its message
    assert device_memory.is_out_of_memory(TimedCallFailed("OutOfMemoryError: CUDA out of memory. Tried to allocate"))
    assert not device_memory.is_out_of_memory(RuntimeError("shape mismatch: [4, 8] against [4, 9]"))
    assert not device_memory.is_out_of_memory(TimedCallFailed("ZeroDivisionError: division by zero"))


def test_no_figure_no_bound_on_the_cpu():
    assert device_memory.free_and_total("cpu") is None
    assert device_memory.room_for_processes("cpu") is None
    assert device_memory.wait_for_free("cpu", 0.0)
    device_memory.give_back_cached("cpu")  # nothing to give back, and no error


@pytest.mark.parametrize("free_gib, rooms", [(140, 105), (36, 1), (35.9, 0), (3, 0)])
def test_room_for_processes_leaves_the_reserve_free(monkeypatch, free_gib, rooms):
    monkeypatch.setattr(device_memory, "free_and_total", lambda device: (int(free_gib * GIB), 140 * GIB))
    assert device_memory.room_for_processes("cuda:0") == rooms  # a quarter of 140 GiB kept, 1 GiB a process


def test_the_wait_ends_when_the_reserve_is_free_or_at_its_deadline(monkeypatch):
    now = [0.0]
    frees = iter([10, 20, 30, 40])  # GiB free at each look, of 100: the reserve (25) is free at the third
    monkeypatch.setattr(device_memory, "free_and_total", lambda device: (next(frees) * GIB, 100 * GIB))

    def sleep(s):
        now[0] += s
    assert device_memory.wait_for_free("cuda:0", 5.0, clock=lambda: now[0], sleep=sleep)
    assert now[0] == pytest.approx(2 * device_memory.POLL_S)
    monkeypatch.setattr(device_memory, "free_and_total", lambda device: (GIB, 100 * GIB))  # never frees
    now[0] = 0.0
    assert not device_memory.wait_for_free("cuda:0", 2.0, clock=lambda: now[0], sleep=sleep)
    assert now[0] == pytest.approx(2.0)


@pytest.fixture(scope="module")
def ev(evaluator):
    return Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False, spare_worker=False,
                     limits=Limits(build_timeout=300, run_timeout=20))


def _runs(monkeypatch, ev, outcomes):
    """``ev._evaluate`` replaced by one that raises or marks each run as ``outcomes`` say; the runs made."""
    runs = []

    def fake(task, action, seed, result):
        outcome = outcomes[len(runs)]
        result.seed = seed  # (noted on the result for the test to compare)
        runs.append(result)
        if isinstance(outcome, list):  # flags raised before the error
            result.integrity_flags.extend(outcome[0])
            outcome = outcome[1]
        if isinstance(outcome, BaseException):
            raise outcome
        result.stage, result.compiled, result.correct = "correct", True, True
    monkeypatch.setattr(ev, "_evaluate", fake)
    waits = []
    monkeypatch.setattr(device_memory, "wait_for_free", lambda device, timeout: waits.append(timeout))
    return runs, waits


def test_an_evaluation_that_met_the_device_exhausted_runs_once_more(monkeypatch, ev):
    task = resolve_task("level1/relu")
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 256.00 MiB")
    runs, waits = _runs(monkeypatch, ev, [oom, None])
    result = ev.evaluate(task, "source")
    assert len(runs) == 2 and waits == [attempts.MEMORY_WAIT_S]
    assert result is runs[1] and result.correct and result.error is None  # the second run's result, nothing kept
    assert "device_memory_wait" in result.phase_seconds
    assert result.reward == ev.reward_fn(result)
    assert runs[0].seed is not None and runs[0].seed == runs[1].seed  # the second run checks on the same inputs


def test_a_second_exhaustion_stands_and_other_errors_are_not_run_again(monkeypatch, ev):
    task = resolve_task("level1/relu")
    failed = TimedCallFailed("OutOfMemoryError: CUDA out of memory. Tried to allocate 7.75 GiB")
    runs, _ = _runs(monkeypatch, ev, [failed, failed])
    result = ev.evaluate(task, "source")
    assert len(runs) == 2 and not result.correct
    assert result.error.startswith("internal evaluator error: TimedCallFailed: OutOfMemoryError")
    runs, waits = _runs(monkeypatch, ev, [KeyError("a bug")])
    result = ev.evaluate(task, "source")
    assert len(runs) == 1 and waits == [] and "KeyError" in result.error
    assert "device_memory_wait" not in result.phase_seconds


def test_a_flagged_evaluation_is_never_run_again(monkeypatch, ev):
    """A candidate flagged before the device ran out keeps its flag: a second run would be a second draw of the
    checks for it."""
    task = resolve_task("level1/relu")
    runs, _ = _runs(monkeypatch, ev, [[["timed_output_wrong: a timed call returned another output"],
                                      torch.OutOfMemoryError("CUDA out of memory")], None])
    result = ev.evaluate(task, "source")
    assert len(runs) == 1 and result.integrity_flags and not result.correct

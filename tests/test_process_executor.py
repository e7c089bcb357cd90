"""The process executor (kbench_env/executors/processes.py): one process per device, each with its own Evaluator;
the same results as the local executor, candidates spread over the processes, a process that cannot make its
Evaluator or that died said so and avoided."""

from __future__ import annotations

import inspect

import pytest

import candidates as C
from conftest import ROOT, read
from kbench_env.executors import LocalExecutor, ProcessExecutor, make_executor
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
GOOD = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
ITEMS = [(RELU, GOOD), (RELU, "garbage ("), (RELU, C.WRONG_SHAPE), (RELU, GOOD)]
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}


@pytest.fixture(scope="module")
def executor(tmp_path_factory):
    ex = make_executor("processes", device=["cpu", "cpu"], cache_dir=tmp_path_factory.mktemp("cache"),
                       timing=TIMING)
    yield ex
    ex.close()


def test_two_processes_give_the_local_executors_results(executor):
    results = executor.evaluate_many(ITEMS, seed=5)
    assert [r.correct for r in results] == [True, False, False, True]
    assert results[1].error_stage == "screen" and results[2].error_stage == "correctness"
    assert executor.sent == [2, 2]  # spread over both processes
    got = dict(executor.evaluate_iter(ITEMS[:2], seed=5))
    assert sorted(got) == [0, 1] and got[0].correct and not got[1].correct


def test_a_dead_process_is_avoided(executor):
    before = list(executor.sent)
    executor._procs[0].terminate()
    executor._procs[0].join(timeout=30)
    results = executor.evaluate_many([(RELU, GOOD), (RELU, "garbage (")], seed=1)
    assert [r.correct for r in results] == [True, False]
    assert executor.sent[0] == before[0] and executor.sent[1] == before[1] + 2


def test_an_evaluator_that_cannot_be_made_is_said_with_its_device():
    with pytest.raises(RuntimeError, match="cpu: .*rules"):
        ProcessExecutor(device=["cpu"], rules="no-such-rules")


def test_it_takes_the_local_executors_arguments():
    def params(cls):
        return {n: p.default for n, p in inspect.signature(cls).parameters.items() if p.kind != p.KEYWORD_ONLY}
    assert params(ProcessExecutor) == params(LocalExecutor)
    with pytest.raises(TypeError, match="Ray executor only"):
        make_executor("processes", device="cpu", address="auto")


def test_what_cannot_be_sent_is_refused_at_once(executor):
    with pytest.raises(Exception, match="pickle"):
        executor.evaluate_many([(RELU, lambda: None)])

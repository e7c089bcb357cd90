"""The five evaluators (Evaluator, the local, process and Ray executors, the server's RemoteEvaluator) have the
``Evaluates`` protocol (kbench_env/executors/evaluates.py) with its exact signatures: names, kinds, defaults and
annotations of every parameter, and the return annotation. A runtime isinstance check sees only that the methods
exist, so the signatures are compared too; Ray's executor and the process executor are checked by class (no Ray
cluster, no device processes started)."""

from __future__ import annotations

import inspect

import pytest

from kbench_env.executors import Evaluates, LocalExecutor, ProcessExecutor, RayExecutor
from kbench_env.executors.evaluates import in_order
from kbench_env.pipeline.evaluator import Evaluator

pytest.importorskip("httpx")
from kbench_env.serving.remote import RemoteEvaluator  # noqa: E402  (the [serve] extra)

IMPLEMENTATIONS = (Evaluator, LocalExecutor, ProcessExecutor, RayExecutor, RemoteEvaluator)
METHODS = ("evaluate", "evaluate_many", "close")


def _drift(cls) -> list[str]:
    """How ``cls``'s methods differ from the protocol's: "name: theirs != the protocol's" for each."""
    out = []
    for name in METHODS:
        want = inspect.signature(getattr(Evaluates, name), eval_str=True)
        got = inspect.signature(getattr(cls, name), eval_str=True) if hasattr(cls, name) else None
        if got != want:
            out.append(f"{cls.__name__}.{name}{got} != {want}")
    return out


def test_the_protocol_declares_the_methods_callers_use():
    assert all(callable(getattr(Evaluates, m)) for m in METHODS)
    params = list(inspect.signature(Evaluates.evaluate_many).parameters)
    assert params == ["self", "items", "max_workers", "seed", "progress"]


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_each_implementation_has_the_protocols_exact_signatures(cls):
    assert issubclass(cls, Evaluates)
    assert _drift(cls) == []


def test_a_drifted_signature_is_caught_though_isinstance_passes():
    class Drifted:
        def evaluate(self, task, action, seed=None):
            return None

        def evaluate_many(self, items: list, seed: int | None = None) -> list:
            return []

        def close(self) -> None:
            pass

    assert isinstance(Drifted(), Evaluates)  # names only: why the signatures are compared
    assert [d.split("(")[0] for d in _drift(Drifted)] == ["Drifted.evaluate", "Drifted.evaluate_many"]

    class Missing:
        def evaluate(self, task, action, seed=None):
            return None

    assert not isinstance(Missing(), Evaluates)


def test_a_cpu_evaluator_and_a_local_executor_are_instances():
    ev = Evaluator(device="cpu")
    ex = LocalExecutor(device="cpu")
    try:
        assert isinstance(ev, Evaluates) and isinstance(ex, Evaluates)
    finally:
        ev.close()
        ex.close()


def test_in_order_orders_arrivals_and_reports_progress():
    seen = []
    out = in_order(iter([(2, "c"), (0, "a"), (1, "b")]), 3, lambda done, total, r: seen.append((done, total, r)))
    assert out == ["a", "b", "c"]
    assert seen == [(1, 3, "c"), (2, 3, "a"), (3, 3, "b")]
    assert in_order(iter([]), 0) == []


def test_the_local_executor_takes_the_protocols_max_workers_and_progress():
    from kbench_env.tasks.suite import resolve_task

    relu = resolve_task("level1/relu")
    ex = LocalExecutor(device="cpu")
    seen = []
    try:  # sources the screen refuses: no worker starts
        out = ex.evaluate_many([(relu, "garbage ("), (relu, "x = 1")], max_workers=1, seed=0,
                               progress=lambda done, total, r: seen.append((done, total, r.stage)))
    finally:
        ex.close()
    assert [r.stage for r in out] == ["none", "none"] and "not valid Python" in out[0].error
    assert sorted(d for d, _, _ in seen) == [1, 2] and {t for _, t, _ in seen} == {2}

"""``Evaluates``: what a caller may ask of anything that evaluates candidates.

Five classes implement it: the ``Evaluator`` (pipeline/evaluator.py, one device in this process), the local,
process and Ray executors of this package (many devices, one Evaluator each) and ``RemoteEvaluator``
(serving/remote.py: a ``kbench serve`` server's). The env, the agents, the training code and the server take any of
them. The protocol is structural: none of the five inherits it, and tests/test_evaluates_protocol.py holds their
signatures equal to it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol, runtime_checkable

from kbench_env.pipeline.result import EvalResult
from kbench_env.tasks.task import Task


@runtime_checkable
class Evaluates(Protocol):
    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        """One action (source text, or an LLM reply with a code block) evaluated on ``task``."""

    def evaluate_many(self, items: list, max_workers: int | None = None, seed: int | None = None,
                      progress=None) -> list[EvalResult]:
        """``[(task, action), ...]`` evaluated, results in the same order; at most ``max_workers`` in flight where
        the implementation chooses that here (None: its own default); ``progress(done, total, result)`` called as
        each result arrives."""

    def close(self) -> None:
        """Release what it holds (workers, processes, actors, connections)."""


def in_order(arrivals: Iterable, total: int, progress: Callable | None = None) -> list:
    """The results of ``arrivals`` (``(index, result)`` pairs as they finish) in index order, with
    ``progress(done, total, result)`` called as each arrives (``Evaluates.evaluate_many``)."""
    out: list = [None] * total
    for done, (i, result) in enumerate(arrivals, 1):
        out[i] = result
        if progress is not None:
            progress(done, total, result)
    return out

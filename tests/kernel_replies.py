"""What a fake model answers in the framework adapters' tests: level1/relu's shipped CPU solution, and the same
kernel with a bug (negative inputs give 1, not 0: it builds, runs its own kernel, and is wrong), each in a fenced
code block inside a chatty reply, as an LLM writes it."""

from __future__ import annotations

from kbench_env.tasks.suite import resolve_task, solution_path
from tests.conftest import read

TASK = "level1/relu"
#: A short timing: the tests look at rewards' signs and the episode's flow, not at speed.
QUICK = {"warmup": 1, "min_reps": 3, "max_reps": 20, "min_seconds": 0.02}


def solution() -> str:
    return read(solution_path(resolve_task(TASK), "cpu"))


def correct_reply() -> str:
    return f"Here is my kernel:\n```python\n{solution()}\n```\n"


def wrong_reply() -> str:
    source = solution().replace("in[i] : 0.f", "in[i] : 1.f")
    assert source != solution(), "the shipped ReLU changed: pick another bug"
    return f"```python\n{source}\n```"

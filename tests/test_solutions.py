"""Every shipped CPU solution is correct with a positive reward; every wrong variant fails with a mismatch
message that names the configuration. All are evaluated once per session (two at a time: builds dominate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from kbench_env.tasks.suite import resolve_task

SOLUTIONS = sorted((ROOT / "tasks/solutions/cpu").glob("*/*.py"))
WRONG = sorted((ROOT / "tests/data/wrong_solutions/cpu").glob("*/*.py"))


def _task_name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.fixture(scope="module")
def results(evaluator):
    items = [(resolve_task(_task_name(p)), p.read_text()) for p in SOLUTIONS + WRONG]
    out = evaluator.evaluate_many(items, max_workers=2, seed=1234)
    return {p: r for p, r in zip(SOLUTIONS + WRONG, out)}


@pytest.mark.parametrize("path", SOLUTIONS, ids=[_task_name(p) for p in SOLUTIONS])
def test_shipped_solution_is_correct(results, path):
    r = results[path]
    assert r.correct and not r.integrity_flags, r.feedback()
    assert r.reward > 0 and r.speedup and r.speedup > 0
    assert len(r.configs) >= 2 and any(c.held_out for c in r.configs)


@pytest.mark.parametrize("path", WRONG, ids=[_task_name(p) for p in WRONG])
def test_wrong_solution_is_named(results, path):
    r = results[path]
    assert not r.correct, f"{path} passed but is meant to be wrong"
    assert r.compiled and r.error_stage == "correctness", r.feedback()
    failing = [c for c in r.configs if c.correct is False]
    assert failing and f"configuration '{failing[0].name}'" in r.error, r.error
    assert r.reward == pytest.approx(-0.2)


def test_every_shipped_solution_marks_tunables():
    for p in SOLUTIONS:
        assert "kbench-tune:" in p.read_text(), f"{p} has no `// kbench-tune:` marker"

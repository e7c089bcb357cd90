"""kbench's Python parses and tree compiles go one thread at a time, and a conversion that CPython 3.11 fails with
its shared recursion count (``SystemError: AST constructor recursion depth mismatch``, seen as an internal
evaluator error when an evaluator screened candidates in threads at once) is tried once more (tasks/pysource.py)."""

from __future__ import annotations

import ast
import re
import threading
import time

import pytest

from conftest import ROOT
from kbench_env.tasks import pysource

MISMATCH = "AST constructor recursion depth mismatch (before=39, after=37)"


def test_parses_go_one_thread_at_a_time(monkeypatch):
    real, inside, most, lock = ast.parse, [0], [0], threading.Lock()

    def slow_parse(*args, **kwargs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # long enough for the other threads to try to enter
        with lock:
            inside[0] -= 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", slow_parse)
    trees = []
    threads = [threading.Thread(target=lambda: trees.append(pysource.parse("x = 1"))) for _ in range(6)]
    [t.start() for t in threads]
    [t.join(30) for t in threads]
    assert len(trees) == 6 and most[0] == 1


def test_the_mismatch_is_tried_once_more_and_other_errors_are_not(monkeypatch):
    real, calls = ast.parse, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise SystemError(MISMATCH)
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", flaky)
    assert isinstance(pysource.parse("y = 2"), ast.Module) and len(calls) == 2

    def always(*args, **kwargs):
        calls.append(1)
        raise SystemError(MISMATCH)

    calls.clear()
    monkeypatch.setattr(ast, "parse", always)
    with pytest.raises(SystemError, match="recursion depth mismatch"):
        pysource.parse("y = 2")
    assert len(calls) == pysource.TRIES

    def other(*args, **kwargs):
        calls.append(1)
        raise SystemError("something else")

    calls.clear()
    monkeypatch.setattr(ast, "parse", other)
    with pytest.raises(SystemError, match="something else"):
        pysource.parse("y = 2")
    assert len(calls) == 1


def test_a_tree_compiles_to_the_code_compile_gives():
    tree = pysource.parse("def f(a):\n    return a * 3\n", filename="<t>")
    ns = {}
    exec(pysource.compile_tree(tree, "<t>"), ns)
    assert ns["f"](4) == 12
    assert pysource.parse("[1, 2]", mode="eval").body.elts[1].value == 2
    with pytest.raises(SyntaxError):
        pysource.parse("def (")


def test_threads_parsing_and_compiling_task_sources_at_once_all_get_their_trees():
    sources = [p.read_text() for p in sorted((ROOT / "tasks").glob("level*/*.py"))[:24]]
    expected = [ast.dump(ast.parse(s)) for s in sources]
    errors, got = [], {}

    def work(i):
        try:
            for _ in range(5):
                tree = pysource.parse(sources[i])
                pysource.compile_tree(tree, f"<task {i}>")
            got[i] = ast.dump(tree)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(sources))]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert not errors and [got[i] for i in range(len(sources))] == expected


def test_kbench_parses_and_compiles_trees_only_through_pysource():
    direct = re.compile(r"\bast\.parse\(|\bcompile\(\s*tree\b")
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "kbench_env").rglob("*.py"))
           if p.name != "pysource.py"
           for i, line in enumerate(p.read_text().splitlines(), 1) if direct.search(line)]
    assert not bad, f"parse through kbench_env.tasks.pysource (one thread at a time): {bad}"

"""The CLI's machine-readable outputs, and KernelBench-format files loaded unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT
from kbench_env.tasks.suite import resolve_task
from kbench_env.tasks.loading import load_task

KB_FILE = ROOT / "tests/data/kernelbench/19_ReLU.py"
RELU_SOLUTION = ROOT / "tasks/solutions/cpu/level1/relu.py"


def kbench(*args, timeout=600):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "kbench_apps.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def test_tasks_json():
    p = kbench("tasks", "--json")
    assert p.returncode == 0, p.stderr
    tasks = [json.loads(line) for line in p.stdout.splitlines()]  # JSON Lines
    assert len(tasks) >= 6
    for t in tasks:
        assert {"name", "level", "backward", "configs"} <= set(t)
        assert isinstance(t["backward"], bool)
        for c in t["configs"]:
            assert {"name", "dtype", "held_out", "inputs"} <= set(c)


def test_eval_json_fields():
    p = kbench("eval", "--task", "level1/relu", "--solution", str(RELU_SOLUTION), "--device", "cpu", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["correct"] is True and isinstance(r["speedup"], float) and isinstance(r["reward"], float)
    assert r["error"] is None and r["integrity_flags"] == []


def test_eval_json_failure(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("this is not python (")
    p = kbench("eval", "--task", "level1/relu", "--solution", str(bad), "--json")
    r = json.loads(p.stdout)
    assert p.returncode == 1 and r["correct"] is False and r["speedup"] is None
    assert "not valid Python" in r["error"] and r["integrity_flags"] == []


def test_kernelbench_file_loads_unchanged():
    t = load_task(KB_FILE)
    names = [c.name for c in t.configs]
    # on a GPU the file's own sizes are shown and odd ones held out; the CPU gets a small pair of its own
    assert names[:2] == ["original", "original-odd"] and not t.configs[0].held_out and t.configs[1].held_out
    assert t.configs[0].devices == t.configs[1].devices == ("cuda",)
    cpu = t.configs_for("cpu")
    assert len(cpu) == 2 and not cpu[0].held_out and cpu[1].held_out
    assert resolve_task(str(KB_FILE)).name == t.name


def test_kernelbench_file_evaluates(evaluator):
    r = evaluator.evaluate(load_task(KB_FILE), RELU_SOLUTION.read_text())
    assert r.correct and r.reward > 0, r.feedback()
    assert [c.name for c in r.configs] == ["small", "small-odd"]


def test_eval_cli_takes_a_path():
    p = kbench("eval", "--task", str(KB_FILE), "--solution", str(RELU_SOLUTION), "--device", "cpu")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Correct on all configurations" in p.stdout

"""The ``kbench`` command as a script sees it: piped output whole and parseable, a closed pipe quiet, bad arguments
refused in one line (exit 2) before anything is evaluated, help with defaults, and the README's command table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from kbench_apps.cli import build_parser
from kbench_apps.cli_output import CLOSED_PIPE_EXIT, plural

RELU_SOLUTION = ROOT / "tasks/solutions/cpu/level1/relu.py"


def kbench(*args, timeout=600, **kwargs):
    return subprocess.run([sys.executable, "-m", "kbench_apps.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(os.environ), **kwargs)


def _refused(p) -> str:
    """A refusal: exit 2, one line on stderr, no traceback, nothing on stdout."""
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbench: "), p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def json_tasks():
    p = kbench("tasks", "--suite", "all", "--json")
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]  # JSON Lines: each line one whole object


def test_tasks_json_is_json_lines(json_tasks):
    assert len(json_tasks) >= 100
    assert len({t["name"] for t in json_tasks}) == len(json_tasks)
    for t in json_tasks:
        assert {"name", "level", "backward", "configs"} <= set(t)


def test_tasks_piped_is_whole(json_tasks):
    p = kbench("tasks", "--suite", "all")
    assert p.returncode == 0, p.stderr
    header, *rows = p.stdout.splitlines()
    assert header.split("\t")[0] == "task"
    cells = [r.split("\t") for r in rows]
    assert all(len(c) == 5 for c in cells)
    assert [c[0] for c in cells] == [t["name"] for t in json_tasks]  # every name whole, none cut with an ellipsis
    assert "…" not in p.stdout
    relu = next(c for c in cells if c[0] == "level1/relu")
    # each configuration with its devices (not eaten as markup) and the held-out mark
    assert "small[cpu/cuda]" in relu[3] and "odd*[cpu/cuda]" in relu[3]


def test_closed_pipe_is_quiet():
    proc = subprocess.Popen([sys.executable, "-m", "kbench_apps.cli", "tasks", "--suite", "all", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    head = proc.stdout.read(100)
    proc.stdout.close()  # what `| head -c 100` does: the reader goes away with most of the output unread
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=300)
    assert head.startswith(b'{"name": ')
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc in (0, CLOSED_PIPE_EXIT)


def test_unknown_suite_names_the_suites():
    line = _refused(kbench("tasks", "--suite", "nope"))
    assert "no suite named 'nope'" in line
    for name in ("all", "level1", "robust", "default"):
        assert name in line


def test_eval_solution_folder_is_refused(tmp_path):
    line = _refused(kbench("eval", "--task", "level1/relu", "--solution", str(tmp_path), "--device", "cpu"))
    assert str(tmp_path) in line and "folder" in line
    line = _refused(kbench("eval", "--task", "level1/relu", "--solution", str(tmp_path / "none.py")))
    assert "no such file" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without a GPU")
@pytest.mark.parametrize("command", ["eval", "run"])
def test_cuda_without_a_gpu_is_refused(command, tmp_path):
    args = (["--task", "level1/relu", "--solution", str(RELU_SOLUTION)] if command == "eval"
            else ["--suite", "level1/relu", "--out", str(tmp_path / "run.jsonl")])
    line = _refused(kbench(command, *args, "--device", "cuda", "--json" if command == "eval" else "--fresh"))
    assert "no CUDA device" in line
    assert not (tmp_path / "run.jsonl").exists()  # nothing run, nothing recorded


def test_counts_in_words():
    assert plural(1, "task") == "1 task" and plural(0, "task") == "0 tasks" and plural(3, "attempt") == "3 attempts"


def _subparsers():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and a.dest == "command")
    return sub.choices


def test_every_option_has_help_and_shows_its_default():
    for name, sp in _subparsers().items():
        for action in sp._actions:
            if action.dest == "help":
                continue
            assert action.help, f"kbench {name} {'/'.join(action.option_strings) or action.dest} has no help"
        options = sp.format_help().split("\noptions:", 1)[1]
        entries = {e.split()[0].rstrip(","): e for e in re.split(r"\n  (?=-)", options) if e.startswith("-")}
        for action in sp._actions:
            if action.option_strings and action.default not in (None, False) and action.dest != "help":
                flag = action.option_strings[0]
                assert "default" in entries[flag], f"kbench {name} {flag}: default not shown"
    run_help = kbench("run", "--help").stdout
    assert "(default: tiered)" in run_help and "(default: 0)" in run_help


def test_readme_lists_every_command():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The command line"):]
    section = section[:section.index("\n## ", 1)]
    listed = set(re.findall(r"^\| `kbench (\w+)", section, re.MULTILINE))
    assert listed == set(_subparsers()), listed


def test_run_writes_a_line_per_attempt_and_task_when_piped(tmp_path):
    out = tmp_path / "run.jsonl"
    p = kbench("run", "--suite", "level1/relu", "--agent", "shipped", "--device", "cpu", "--budget", "1",
               "--timing", "quick", "--out", str(out), "--fresh")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 task on cpu" in p.stdout
    lines = p.stdout.splitlines()
    attempt = [ln for ln in lines if ln.startswith("level1/relu: attempt 1/1: ")]
    done = [ln for ln in lines if ln.startswith("level1/relu: done (1/1): ")]
    assert len(attempt) == 1 and len(done) == 1, p.stdout
    records = [json.loads(x) for x in out.read_text().splitlines()]
    ev = next(r["eval"] for r in records if r["kind"] == "attempt")
    assert f"{ev['speedup']:.2f}x" in attempt[0] and "correct" in attempt[0]

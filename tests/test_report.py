"""``kbench report``: fast_p (KernelBench's definition), correctness, geometric means per level and per agent,
soft-verifier accuracy, PNG plots and the Markdown report, from recorded run results (records as ``kbench run``
writes them)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from kbench_apps.report import write_report
from kbench_apps.results import P_VALUES, load_records, summarize


def attempt(agent, task, speedup=None, correct=True, flags=(), level=None, verifier=None, t=0.0, **ev):
    e = {"correct": correct, "speedup": speedup if correct else None, "integrity_flags": list(flags),
         "stage": "timed" if correct else "ran", "compiled": True, "configs": [], "reward": 1.0,
         "error": None if correct else "configuration small: mismatch",
         "error_stage": None if correct else "correctness", **ev}
    r = {"kind": "attempt", "agent": agent, "task": task, "level": level, "eval": e, "time": t}
    if verifier is not None:
        r["verifier"] = verifier
    return r


def done(agent, task, level, best, t=0.0):
    return {"kind": "task_done", "agent": agent, "task": task, "level": level, "attempts": 0,
            "correct": best is not None, "best_speedup": best, "time": t}


def pred(**kw):
    return {"compile_error": False, "memory_error": False, "numerics_error": False, "parsed": True, **kw}


def run_a():
    return [
        attempt("A", "level1/a", 0.5, level=1, t=1), attempt("A", "level1/a", 2.0, level=1, t=2),
        done("A", "level1/a", 1, 2.0, t=3),
        attempt("A", "level1/b", 0.9, level=1, t=4), attempt("A", "level1/b", correct=False, level=1, t=5),
        done("A", "level1/b", 1, 0.9, t=6),
        attempt("A", "level2/c", correct=False, level=2, t=7), done("A", "level2/c", 2, None, t=8),
    ]


def run_b():
    return [
        attempt("B", "level1/a", 1.2, level=1, t=1, verifier=pred()), done("B", "level1/a", 1, 1.2, t=2),
        attempt("B", "level1/b", correct=False, level=1, t=3, verifier=pred(numerics_error=True)),
        {"kind": "filtered", "agent": "B", "task": "level1/b", "verifier": pred(compile_error=True), "time": 3.5},
        done("B", "level1/b", 1, None, t=4),
        attempt("B", "level2/c", 5.0, flags=["timed_output_wrong: cached"], level=2, t=5),  # an exploit never counts
        attempt("B", "level2/c", 3.0, level=2, t=6, verifier=pred(memory_error=True)),
        done("B", "level2/c", 2, 3.0, t=7),
        attempt("B", "level1/d", 1.1, t=8),  # killed before task_done: counted, marked unfinished; level from name
    ]


def write(path, records, cut_last_line=False):
    text = "".join(json.dumps(r) + "\n" for r in records)
    if cut_last_line:
        text += '{"kind": "attempt", "agent": "A", "ta'  # a line cut by a kill
    path.write_text(text)
    return path


def test_metrics_per_agent_and_level(tmp_path):
    records = load_records([write(tmp_path / "a.jsonl", run_a(), cut_last_line=True), write(tmp_path / "b.jsonl", run_b())])
    s = summarize(records)
    a, b = s["agents"]["A"], s["agents"]["B"]
    # fast_p = fraction of ALL tasks correct with speedup > p (strictly)
    assert a["tasks"] == 3 and a["correct_rate"] == pytest.approx(2 / 3)
    assert [a["fast_p"][f"{p:g}"] for p in P_VALUES] == pytest.approx([2 / 3, 2 / 3, 2 / 3, 1 / 3, 1 / 3, 0.0])
    assert a["geomean_speedup"] == pytest.approx(math.sqrt(2.0 * 0.9)) and a["max_speedup"] == 2.0
    assert a["attempts"] == 5 and a["unfinished"] == 0
    assert b["tasks"] == 4 and b["unfinished"] == 1 and b["filtered"] == 1 and b["correct"] == 3
    assert [b["fast_p"][f"{p:g}"] for p in P_VALUES] == pytest.approx([0.75, 0.75, 0.75, 0.75, 0.25, 0.25])
    assert b["max_speedup"] == 3.0  # the flagged 5.0x attempt is not a result
    assert b["geomean_speedup"] == pytest.approx((1.2 * 3.0 * 1.1) ** (1 / 3))
    assert s["levels"]["2"]["A"]["correct_rate"] == 0 and s["levels"]["2"]["B"]["fast_p"]["2"] == 1.0
    assert s["levels"]["1"]["B"]["tasks"] == 3  # level1/d's level read from its name
    assert s["tasks"]["level2/c"] == {"A": {"correct": False, "best_speedup": None, "attempts": 1, "finished": True,
                                            "coverage": None},
                                      "B": {"correct": True, "best_speedup": 3.0, "attempts": 2, "finished": True,
                                            "coverage": None}}
    v = s["verifier"]["B"]
    assert set(s["verifier"]) == {"B"} and v["numerics_error"]["tp"] == 1 and v["memory_error"]["fp"] == 1
    assert v["any"]["n"] == 3 and v["any"]["recall"] == 1.0 and v["any"]["precision"] == 0.5


def test_same_agent_in_two_files_is_kept_apart(tmp_path):
    records = load_records([write(tmp_path / "seed0.jsonl", run_a()), write(tmp_path / "seed1.jsonl", run_a())])
    assert set(summarize(records)["agents"]) == {"A (seed0)", "A (seed1)"}


def test_report_cli_writes_tables_plots_and_markdown(tmp_path):
    fa, fb = write(tmp_path / "a.jsonl", run_a()), write(tmp_path / "b.jsonl", run_b())
    out = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "report", str(fa), str(fb), "--out-dir", str(out)],
                       capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, COLUMNS="160"), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    for word in ("fast_0.5", "fast_1.5", "fast_2", "geomean speedup", "soft verifiers", "report.md"):
        assert word in p.stdout, word
    for name in ("fast_p.png", "speedup_distribution.png", "best_over_evaluations.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| agent | tasks | attempts | correct | fast_0 | fast_0.5 | fast_0.8 | fast_1 | fast_1.5 | fast_2 |" in md
    assert "| A | 3 | 5 | 0.67 | 0.67 | 0.67 | 0.67 | 0.33 | 0.33 | 0.00 |" in md
    assert "### level 2" in md and "## Soft verifiers" in md and "| level1/d | not run | 1.100x (unfinished) |" in md
    for name in ("fast_p", "speedup_distribution", "best_over_evaluations"):
        assert f"![{name}]({name}.png)" in md
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["agents"]["B"]["fast_p"]["1"] == 0.75

    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "report", str(fa), "--out-dir", str(tmp_path / "r2"),
                        "--no-plots", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["agents"]["A"]["fast_p"]["1"] == pytest.approx(1 / 3)
    assert not list((tmp_path / "r2").glob("*.png"))


def test_report_of_missing_or_empty_results(tmp_path):
    with pytest.raises(ValueError):
        write_report([write(tmp_path / "empty.jsonl", [])], tmp_path / "r")
    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "report", str(tmp_path / "nope.jsonl")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "no results file" in p.stderr

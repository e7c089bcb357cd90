"""The false-positive campaign (bench/false_positives.py): which solutions it evaluates, how it counts and reports
flagged or incorrect evaluations, its exit status, and its resume from the JSONL file. The orchestration tests use
an evaluator that returns prepared results (no build); the slow test runs one real solution end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from kbench_env.pipeline.result import ConfigResult, EvalResult
from kbench_env.tasks.suite import named_suites, resolve_task

sys.path.insert(0, str(ROOT / "bench"))
import false_positives as fp  # noqa: E402

FLAG = ("timed_output_wrong: the output of timed call 0 on configuration 'large' does not match the reference for "
        "its inputs, although the correctness run passed (cached, stale or deferred results)")


def test_selection_holds_every_shipped_solution_and_variant():
    sols = fp.honest_solutions(("cpu",))
    shipped = {s.path for s in sols if s.kind == "shipped"}
    variants = [s for s in sols if s.kind == "variant"]
    assert shipped == set((ROOT / "tasks/solutions/cpu").glob("*/*.py"))
    assert {s.path for s in variants} == set((ROOT / "tests/data/honest_variants/cpu").glob("*/*__*.py"))
    assert len(variants) >= 10
    for s in variants:
        assert resolve_task(s.task).name == s.task, s.path  # a variant names a real task
        assert "tasks/solutions" not in s.label  # so tests/test_solutions.py never takes it for the shipped one
    kinds = {s.name.split("__", 1)[1] for s in variants}
    assert {"sequential", "pairwise", "kahan", "unfused"} <= kinds


def test_select_by_suite_substring_and_sample():
    sols = fp.honest_solutions(("cpu",))
    large = fp.select(sols, "large_mean")
    assert {s.task for s in large} == set(named_suites()["large_mean"])
    assert any(s.kind == "variant" for s in large) and any(s.kind == "shipped" for s in large)
    assert [s.name for s in fp.select(sols, "level1/sum_dim1__kahan")] == ["level1/sum_dim1__kahan"]
    sampled = fp.select(sols, "large_mean", sample=3, seed=5)
    assert len(sampled) == len(large) + 3 and set(large) <= set(sampled)
    assert sampled == fp.select(sols, "large_mean", sample=3, seed=5)  # the same draw for the same seed
    assert fp.select(sols, None) == sols


def _result(task: str, correct: bool, flags=(), error=None) -> EvalResult:
    r = EvalResult(task=task, backend="cpu", device="cpu", stage="timed" if correct else "correct",
                   correct=correct, integrity_flags=list(flags), error=error, reward=1.0 if correct else -1.0,
                   speedup=1.5 if correct else None, cached_build=True, eval_seconds=2.0,
                   phase_seconds={"check": 0.5, "timing": 1.0})
    r.configs = [ConfigResult(name="small", held_out=False, dtype="float32", correct=True, norm_err=3e-8)]
    return r


class _PreparedEvaluator:
    """Stands in for the Evaluator: ``outcome(task_name)`` decides each result; counts what it was asked."""

    def __init__(self, outcome):
        self.outcome, self.calls = outcome, []

    def evaluate_iter(self, items, max_workers=None, seed=None):
        for i, (task, _source) in enumerate(items):
            self.calls.append((task.name, seed))
            yield i, self.outcome(task.name)

    def close(self):
        pass


def _run(monkeypatch, tmp_path, outcome, *extra):
    ev = _PreparedEvaluator(outcome)
    monkeypatch.setattr(fp, "_evaluators", lambda device, backends, args: {"cpu": ev})
    rc = fp.main(["--solutions", "level1/relu,level1/exp_offset", "--seeds", "2", "--jsonl",
                  str(tmp_path / "fp.jsonl"), "--record", str(tmp_path / "fp.md"), *extra])
    return rc, ev


def test_flagged_and_incorrect_evaluations_are_counted_listed_and_fail_the_run(monkeypatch, tmp_path):
    def outcome(task):
        return _result(task, False, [FLAG]) if task == "level1/exp_offset" else _result(task, True)

    rc, ev = _run(monkeypatch, tmp_path, outcome)
    assert rc == 1
    records = fp.load_records(tmp_path / "fp.jsonl")
    assert len(records) == 6 == len(ev.calls)  # relu, exp_offset, exp_offset__libm x seeds 1 and 2
    assert {(r["name"], r["seed"]) for r in records if r["flagged"]} == {
        ("level1/exp_offset", 1), ("level1/exp_offset", 2), ("level1/exp_offset__libm", 1),
        ("level1/exp_offset__libm", 2)}
    for r in records:
        assert {"task", "solution", "seed", "correct", "speedup", "reward", "integrity_flags", "error",
                "phase_seconds"} <= set(r)
    text = (tmp_path / "fp.md").read_text()
    assert "FALSE POSITIVES FOUND" in text and "4 flagged and 0 incorrect of 6" in text
    assert text.count("timed_output_wrong: the output of timed call 0") == 4  # each listed with its flag text
    assert "| level1/relu | shipped | cpu | 2 | 2 | 0 | 0 |" in text

    s = fp.summarise([dict(records[0], flagged=False, integrity_flags=[], correct=False, error="mismatch on 'odd'",
                           error_stage="correctness")])
    assert s["incorrect"] == 1 and s["flagged"] == 0 and "mismatch on 'odd'" in fp.problem_text(s["problems"][0])


def test_a_clean_run_exits_zero_and_a_rerun_resumes(monkeypatch, tmp_path):
    rc, ev = _run(monkeypatch, tmp_path, lambda task: _result(task, True))
    assert rc == 0 and len(ev.calls) == 6
    assert "no false positives" in (tmp_path / "fp.md").read_text()
    rc, ev = _run(monkeypatch, tmp_path, lambda task: _result(task, False, [FLAG]))
    assert rc == 0 and ev.calls == []  # everything was in the JSONL file already: nothing re-run
    rc, ev = _run(monkeypatch, tmp_path, lambda task: _result(task, True), "--seeds", "3")
    assert rc == 0 and [s for _, s in ev.calls] == [3, 3, 3]  # only the new seed
    with open(tmp_path / "fp.jsonl", "a") as f:
        f.write('{"harness": "cut short by a ki')  # a line cut short by a kill is skipped, not fatal
    monkeypatch.setattr(fp, "harness_hash", lambda: "other-code")
    rc, ev = _run(monkeypatch, tmp_path, lambda task: _result(task, True))
    assert rc == 0 and len(ev.calls) == 6  # records of other harness code are not reused


def test_estimate_uses_measured_times_and_medians():
    sols = fp.select(fp.honest_solutions(("cpu",)), "level1/relu,level1/gelu")
    relu, gelu = sols[0].label, sols[1].label
    recs = [{"solution": relu, "cached_build": False, "eval_seconds": 20.0},
            {"solution": relu, "cached_build": True, "eval_seconds": 2.0},
            {"solution": relu, "cached_build": True, "eval_seconds": 4.0}]
    # relu: 20 + 4 * 3; gelu (not measured): the medians, 20 + 4 * 3
    assert fp.estimate_seconds(recs, sols, 5) == pytest.approx(2 * (20 + 4 * 3))
    assert fp.estimate_seconds([], sols, 5) is None


@pytest.mark.slow
def test_campaign_runs_one_solution_end_to_end(evaluator, tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench/false_positives.py"), "--solutions", "level1/relu",
                        "--seeds", "2", "--cache-dir", str(evaluator.cache_dir), "--jsonl", str(tmp_path / "r.jsonl"),
                        "--record", str(tmp_path / "r.md")], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(r["name"], r["seed"], r["correct"], r["flagged"]) for r in lines] == [
        ("level1/relu", 1, True, False), ("level1/relu", 2, True, False)]
    assert all(r["speedup"] and r["phase_seconds"].get("timing") for r in lines)
    assert "no false positives" in (tmp_path / "r.md").read_text()

"""Reference agents: tunables, the evolutionary agent (offline and LLM proposers), baselines, LLM clients, soft
verifiers, and a killed ``kbench run`` resuming from its JSONL.

Builds are kept cheap: the candidates here use the fast path (``kbench_env.fastpath.cpp_kernel``, ~0.3 s builds),
through a private tasks folder (``KBENCH_TASKS``) whose shipped ReLU solution has a clearly slow tunable value
(BLOCK=1: a function call per element, ~10x slower than the others), so improvements stand out of timing noise.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT
from fake_openai import fake_openai

from kbench_agents import tunables
from kbench_agents.baselines import BestOfNAgent, IterativeRefinementAgent, SingleShotAgent
from kbench_agents.evolutionary import EvolutionaryAgent, LLMProposer, OfflineProposer, default_agent
from kbench_agents.llm import LLMError, OfflineClient, OpenAIClient
from kbench_agents.soft_verify import CHECKS, SoftVerifier, parse_verdict
from kbench_apps.verifier_metrics import CHECKS as SCORED_CHECKS, actual_outcome, verifier_accuracy

TUNABLE = (ROOT / "tests/data/agents/relu_tunable_fast.py").read_text()
QUICK = {"warmup": 1, "min_reps": 5, "max_reps": 30, "min_seconds": 0.05}


def make_tasks_root(dst: Path, names=("relu",)) -> Path:
    """A tasks folder with copies of level1/relu (under ``names``) whose cpu solution is the tunable fast one."""
    (dst / "level1").mkdir(parents=True)
    (dst / "solutions/cpu/level1").mkdir(parents=True)
    for n in names:
        shutil.copy(ROOT / "tasks/level1/relu.py", dst / f"level1/{n}.py")
        (dst / f"solutions/cpu/level1/{n}.py").write_text(TUNABLE)
    (dst / "suites.json").write_text(json.dumps({"default": [f"level1/{n}" for n in names]}))
    return dst


@pytest.fixture
def tasks_root(tmp_path, monkeypatch):
    root = make_tasks_root(tmp_path / "tasks")
    monkeypatch.setenv("KBENCH_TASKS", str(root))
    return root


@pytest.fixture(scope="module")
def quick_evaluator():
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    return Evaluator(device="cpu", timing=QUICK, limits=Limits(build_timeout=600, run_timeout=60, time_timeout=120))


def make_env(evaluator, task="level1/relu", max_turns=8):
    from kbench_env.env.env import KBenchEnv

    return KBenchEnv(task=task, evaluator=evaluator, max_turns=max_turns)


def block_of(source: str) -> str:
    return re.search(r"BLOCK = (\w+);", source).group(1)


# ====================================================================== tunables
def test_tunables_parse_render_mutate_crossover():
    src = ("constexpr int BLOCK = 64;  // kbench-tune: 16 32 64 128\n"
           "constexpr int64_t UNROLL = 4;  // kbench-tune: 1, 2, 4, 8\n"
           "static const int WARPS = 2; // kbench-tune: 2 4\n"
           "int untouched = 7;  // not tunable\n")
    ts = tunables.parse_tunables(src)
    assert [(t.name, t.value, t.choices) for t in ts] == [
        ("BLOCK", "64", ("16", "32", "64", "128")), ("UNROLL", "4", ("1", "2", "4", "8")), ("WARPS", "2", ("2", "4"))]
    out = tunables.render(src, {"BLOCK": "128", "WARPS": "4"})
    assert tunables.genome(out) == {"BLOCK": "128", "UNROLL": "4", "WARPS": "4"}
    assert "int untouched = 7;  // not tunable" in out and "// kbench-tune: 16 32 64 128" in out
    assert tunables.space_size(src) == 32
    rng, seen = random.Random(0), {tunables.key_of(src)}
    for _ in range(31):  # exhausts the space without repeating a genome
        child = tunables.mutate(src, rng, seen)
        key = tunables.key_of(child)
        assert key not in seen
        seen.add(key)
        for k, v in key:
            assert v in dict((t.name, t.choices) for t in ts)[k]
    assert tunables.mutate(src, rng, seen) is None
    a = tunables.render(src, {"BLOCK": "16", "UNROLL": "1", "WARPS": "2"})
    b = tunables.render(src, {"BLOCK": "128", "UNROLL": "8", "WARPS": "4"})
    kids = {tunables.key_of(tunables.crossover(a, b, random.Random(i))) for i in range(20)}
    assert kids and all(dict(k)[n] in (dict(tunables.key_of(a))[n], dict(tunables.key_of(b))[n])
                        for k in kids for n in ("BLOCK", "UNROLL", "WARPS"))
    assert tunables.key_of(a) not in kids and tunables.key_of(b) not in kids
    assert tunables.crossover(a, a, random.Random(0)) is None


def test_python_tunables_of_triton_solutions_parse_and_render():
    src = "BLOCK = 1024  # kbench-tune: 256 512 1024\nnum_warps = 4  # a comment\nGROUP = 8 # kbench-tune: 4, 8\n"
    assert tunables.genome(src) == {"BLOCK": "1024", "GROUP": "8"}
    out = tunables.render(src, {"BLOCK": "256"})
    assert out.splitlines()[0] == "BLOCK = 256  # kbench-tune: 256 512 1024" and "num_warps = 4  # a comment" in out


def test_shipped_solutions_tunables_parse():
    """Every ``kbench-tune`` mark in the shipped solutions parses, with the current value among the choices."""
    for path in (ROOT / "tasks/solutions").rglob("*.py"):
        text = path.read_text()
        marked = len(re.findall(r"(//|#)\s*kbench-tune:", text))
        ts = tunables.parse_tunables(text)
        assert len(ts) == marked, f"{path}: {marked} marks, {len(ts)} parsed"
        for t in ts:
            assert t.value in t.choices, f"{path}: {t.name} = {t.value} not in {t.choices}"


# ====================================================================== evolutionary agent, offline proposer
def test_offline_evolutionary_improves_best_speedup(tasks_root, quick_evaluator):
    env = make_env(quick_evaluator)
    agent = default_agent("cpu", budget=3, batch_size=1, seed=1)
    assert agent.name == "evolutionary-offline" and agent.has_solution(env.fixed_task)
    steps = list(agent.run_episode(env, env.fixed_task, seed=0))
    assert [t for t, _ in steps] == list(range(1, len(steps) + 1)) and 2 <= len(steps) <= 3
    first = steps[0][1]
    assert first["origin"] == "start" and block_of(first["source"]) == "1" and first["eval"]["correct"]
    assert all(info["origin"] in ("mutate", "crossover") and info["parents"] for _, info in steps[1:])
    assert len({info["eval"]["source_hash"] for _, info in steps}) == len(steps)  # no candidate evaluated twice
    best = max(info["eval"]["speedup"] for _, info in steps if info["eval"]["correct"])
    assert best > 2.0 * first["eval"]["speedup"], [(block_of(i["source"]), i["eval"]["speedup"]) for _, i in steps]
    assert steps[-1][1]["best_speedup"] == pytest.approx(best)
    assert agent.archive.best["level1/relu"].speedup == pytest.approx(best)


def test_offline_proposer_without_tunables_stops_early(tmp_path, quick_evaluator):
    plain = re.sub(r"\s*// kbench-tune:[^\n]*", "", TUNABLE)
    agent = EvolutionaryAgent(OfflineProposer("cpu", solutions={"level1/relu": plain}), budget=5)
    steps = list(agent.run_episode(make_env(quick_evaluator), "level1/relu", seed=0))
    assert len(steps) == 1 and steps[0][1]["eval"]["correct"]  # nothing to mutate: the budget is not wasted


# ====================================================================== LLM proposer and baselines, offline client
def test_offline_client_drives_llm_proposer_with_soft_verifier(tasks_root, quick_evaluator):
    client = OfflineClient(seed=3)
    verifier = SoftVerifier(OfflineClient(), audit_rate=0.0)
    # max_stalls: the offline "model" repeats itself at times (as models do); duplicates are dropped, not evaluated
    agent = EvolutionaryAgent(LLMProposer(client), budget=3, batch_size=2, verifier=verifier, seed=2, max_stalls=20)
    steps = list(agent.run_episode(make_env(quick_evaluator), "level1/relu", seed=0))
    evaluated = [i for _, i in steps if i["eval"] is not None]
    assert len(evaluated) == 3
    assert evaluated[0]["origin"] == "translate" and evaluated[0]["eval"]["correct"]
    assert {i["origin"] for i in evaluated[1:]} <= {"mutate", "crossover"}
    assert all(i["verifier"] and i["verifier"]["parsed"] for i in evaluated)
    # Duplicates are dropped by source; which parents the "model" edits depends on measured speedups, so it may
    # return to a block value it proposed before in new text, but it did change the tunable.
    assert len({i["source"] for i in evaluated}) == 3
    assert len({block_of(i["source"]) for i in evaluated}) >= 2
    u = client.usage
    assert u.calls >= 3 and u.prompt_tokens > 0 and u.completion_tokens > 0 and u.failed_calls == 0
    assert verifier.client.usage.calls >= 3
    assert agent.name == "evolutionary-llm"


def test_soft_verifier_filters_before_evaluation(tasks_root, quick_evaluator):
    broken = "```python\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n```"
    client = OfflineClient(replies=[broken])
    agent = EvolutionaryAgent(LLMProposer(client), budget=2, translate_retries=1,
                              verifier=SoftVerifier(OfflineClient(), audit_rate=0.0))
    steps = list(agent.run_episode(make_env(quick_evaluator), "level1/relu", seed=0))
    assert steps and all(i["eval"] is None and i["filtered"] for _, i in steps)  # never reached the evaluator
    assert all(i["verifier"]["compile_error"] for _, i in steps)


def test_offline_client_drives_baselines(tasks_root, quick_evaluator):
    env = make_env(quick_evaluator)
    single = list(SingleShotAgent(OfflineClient()).run_episode(env, "level1/relu", seed=0))
    assert len(single) == 1 and single[0][1]["eval"]["correct"]
    best_of = list(BestOfNAgent(OfflineClient(), n=2).run_episode(env, "level1/relu", seed=0))
    assert [t for t, _ in best_of] == [1, 2] and all(i["eval"]["correct"] for _, i in best_of)
    client = OfflineClient()
    refine = list(IterativeRefinementAgent(client, turns=3).run_episode(env, "level1/relu", seed=0))
    assert [t for t, _ in refine] == [1, 2, 3] and all(i["eval"]["correct"] for _, i in refine)
    blocks = [block_of(i["source"]) for _, i in refine]
    assert all(a != b for a, b in zip(blocks, blocks[1:])), blocks  # each turn changed the previous answer
    assert client.usage.calls == 3
    # resumed refinement continues the conversation without redoing the recorded turns
    rest = list(IterativeRefinementAgent(OfflineClient(), turns=3).run_episode(
        env, "level1/relu", seed=0, resume=[{"source": i["source"], "eval": i["eval"]} for _, i in refine[:2]]))
    assert [t for t, _ in rest] == [3]


# ====================================================================== LLM clients
def test_client_retries_timeouts_and_concurrency():
    calls = {"n": 0}

    def flaky(messages, i):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("slow server")
        return "ok"

    c = OfflineClient(responder=flaky, max_retries=2, retry_backoff=0.0)
    assert c.complete([{"role": "user", "content": "hi"}]) == "ok"
    assert c.usage.retries == 1 and c.usage.calls == 1 and c.usage.failed_calls == 0

    dead = OfflineClient(responder=lambda m, i: (_ for _ in ()).throw(RuntimeError("down")), max_retries=1,
                         retry_backoff=0.0)
    with pytest.raises(LLMError):
        dead.complete([{"role": "user", "content": "hi"}])
    assert dead.usage.failed_calls == 1 and dead.complete_many([[{"role": "user", "content": "x"}]]) == [None]

    live, peak, lock = [0], [0], threading.Lock()

    def slow(messages, i):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.05)
        with lock:
            live[0] -= 1
        return messages[-1]["content"]

    c = OfflineClient(responder=slow, max_concurrency=2)
    out = c.complete_many([[{"role": "user", "content": str(i)}] for i in range(6)])
    assert out == [str(i) for i in range(6)] and peak[0] == 2


def test_openai_client_against_a_local_endpoint(monkeypatch):
    pytest.importorskip("openai")
    with fake_openai() as server:
        monkeypatch.setenv("KBENCH_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("KBENCH_LLM_MODEL", "tiny-coder")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        c = OpenAIClient(price_input_per_mtok=1.0, price_output_per_mtok=2.0, max_retries=0)
        text = c.complete([{"role": "user", "content": "write a kernel"}], temperature=0.2, max_tokens=64)
        assert "ModelNew" in text
        path, auth, body = server.requests[-1]
        assert path == "/v1/chat/completions" and auth == "Bearer EMPTY"
        assert body["model"] == "tiny-coder" and body["max_tokens"] == 64 and body["temperature"] == 0.2
        u = c.usage
        assert (u.calls, u.prompt_tokens, u.completion_tokens) == (1, 1000, 500)
        assert u.cost_usd == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)


# ====================================================================== soft verifiers: parsing and accuracy
def test_parse_verdict_forms():
    v = parse_verdict('Looks risky.\n{"compile_error": false, "memory_error": true, "numerics_error": "no", '
                      '"reason": "reads past the end"}')
    assert v["parsed"] and v["memory_error"] and not v["compile_error"] and not v["numerics_error"]
    assert v["reason"] == "reads past the end"
    v = parse_verdict("compile_error: yes\nmemory_error: no")
    assert v["parsed"] and v["compile_error"] and not v["memory_error"]
    v = parse_verdict("I cannot tell.")
    assert not v["parsed"] and not any(v[c] for c in ("compile_error", "memory_error", "numerics_error"))


def _ev(stage, error_stage=None, error=None, correct=False, compiled=True):
    return {"stage": stage, "error_stage": error_stage, "error": error, "correct": correct, "compiled": compiled,
            "configs": [], "speedup": 1.0 if correct else None, "integrity_flags": []}


def test_the_report_scores_every_check_the_verifier_predicts():
    assert SCORED_CHECKS == CHECKS


def test_soft_verifier_precision_recall_on_synthetic_records():
    outcomes = {
        "ok": _ev("timed", correct=True),
        "compile": _ev("screened", "build", "error: expected ';' before '}' token", compiled=False),
        "segv": _ev("built", "run", "the worker died with SIGSEGV (segmentation fault)"),
        "wrong": _ev("ran", "correctness", "configuration small: mismatch"),
        "screen": _ev("none", "screen", "not valid Python", compiled=False),
    }
    assert actual_outcome(outcomes["compile"]) == {"compile_error": True, "memory_error": False,
                                                   "numerics_error": False}
    assert actual_outcome(outcomes["segv"])["memory_error"] and actual_outcome(outcomes["wrong"])["numerics_error"]
    assert not any(actual_outcome(outcomes["ok"]).values())

    def pred(c=False, m=False, n=False):
        return {"compile_error": c, "memory_error": m, "numerics_error": n, "parsed": True}

    records = [
        {"kind": "attempt", "eval": outcomes["compile"], "verifier": pred(c=True)},   # compile TP
        {"kind": "attempt", "eval": outcomes["compile"], "verifier": pred()},         # compile FN
        {"kind": "attempt", "eval": outcomes["ok"], "verifier": pred(c=True)},        # compile FP
        {"kind": "attempt", "eval": outcomes["ok"], "verifier": pred()},              # TN everywhere
        {"kind": "attempt", "eval": outcomes["segv"], "verifier": pred(m=True)},      # memory TP
        {"kind": "attempt", "eval": outcomes["wrong"], "verifier": pred(m=True)},     # memory FP, numerics FN
        {"kind": "attempt", "eval": outcomes["wrong"], "verifier": pred(n=True)},     # numerics TP
        {"kind": "attempt", "eval": outcomes["screen"], "verifier": pred(c=True)},    # ignored: the free screen
        {"kind": "filtered", "verifier": pred(c=True)},                               # ignored: no outcome
        {"kind": "attempt", "eval": outcomes["ok"]},                                  # ignored: no prediction
    ]
    acc = verifier_accuracy(records)
    c, m, n, a = acc["compile_error"], acc["memory_error"], acc["numerics_error"], acc["any"]
    assert (c["tp"], c["fp"], c["fn"], c["tn"], c["n"]) == (1, 1, 1, 4, 7)
    assert c["precision"] == pytest.approx(0.5) and c["recall"] == pytest.approx(0.5)
    assert (m["tp"], m["fp"], m["fn"]) == (1, 1, 0) and m["recall"] == 1.0 and m["precision"] == 0.5
    assert (n["tp"], n["fp"], n["fn"]) == (1, 0, 1) and n["precision"] == 1.0 and n["recall"] == 0.5
    # the filter as a whole: 5 failing candidates, 4 caught; 1 of 5 flagged was correct
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (4, 1, 1, 1)
    assert verifier_accuracy([{"kind": "attempt", "eval": outcomes["ok"]}]) == {}


# ====================================================================== kbench run: kill and resume
def _records(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def test_killed_run_resumes_without_reevaluating(tmp_path):
    root = make_tasks_root(tmp_path / "tasks", names=("relu", "relu_copy"))
    out = tmp_path / "run.jsonl"
    env = dict(os.environ, KBENCH_TASKS=str(root))
    cmd = [sys.executable, "-m", "kbench_apps.cli", "run", "--device", "cpu", "--budget", "4", "--batch-size", "1",
           "--timing", "quick", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.time() + 300
    try:  # kill it once the second task has started: one task finished, one partly done
        while time.time() < deadline and proc.poll() is None:
            if any(r.get("task") == "level1/relu_copy" and r.get("kind") == "attempt" for r in _records(out)):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = _records(out)
    done_before = [r for r in before if r["kind"] == "task_done"]
    assert [r["task"] for r in done_before] == ["level1/relu"]
    partial = [r for r in before if r["kind"] == "attempt" and r["task"] == "level1/relu_copy"]
    assert 1 <= len(partial) < 4

    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 already done, 1 partly done" in " ".join(p.stdout.split())
    after = _records(out)
    assert after[:len(before)] == before  # append-only
    new = after[len(before):]
    assert not any(r["task"] == "level1/relu" for r in new)  # the finished task was not touched
    attempts = [r for r in after if r["kind"] == "attempt" and r["task"] == "level1/relu_copy"]
    assert len(attempts) == 4  # the budget, counting the attempts made before the kill
    hashes = [r["eval"]["source_hash"] for r in attempts]
    assert len(set(hashes)) == 4  # nothing evaluated twice
    done = [r for r in after if r["kind"] == "task_done"]
    assert [r["task"] for r in done] == ["level1/relu", "level1/relu_copy"] and done[1]["attempts"] == 4
    assert all(r["correct"] for r in done)
    # a third run has nothing left to do
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and len(_records(out)) == len(after)

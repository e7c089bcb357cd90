"""KBench-v0 as an Inspect task (kbench_apps/integrations/inspect_task.py), end to end on the CPU backend: Inspect's
mock model answers with the shipped ReLU solution (scored correct, with a speedup) or with garbage (incorrect,
fast_p 0); the prompt the model saw is the env's reset observation and holds no held-out configuration; the same
over a ``kbench serve`` server; and ``inspect eval FILE --model hf/<local folder>`` from the command line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage  # noqa: E402

from kbench_apps.integrations.inspect_task import kbench  # noqa: E402
from kbench_env.config import EvaluatorConfig  # noqa: E402
from kbench_env.env.env import KBenchEnv  # noqa: E402
from kbench_env.pipeline.reward import INVALID  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402
from kbench_training.tiny import build_model, build_tokenizer  # noqa: E402
from tests.conftest import ROOT, read  # noqa: E402
from tests.serving_server import TOKEN, ServerProcess  # noqa: E402
from tests.test_serve_client_view import secrets_of  # noqa: E402

TASK = "level1/relu"
#: the test evaluator's short timing (tests/conftest.py); no spare workers left behind by the test process
OPTIONS = {"timing": {"warmup": 1, "min_reps": 3, "max_reps": 20, "min_seconds": 0.02}, "spare_worker": False}
GARBAGE = "I would rather not write a kernel today."


def _output(text: str) -> ModelOutput:
    # Usage given: without it the mock model counts tokens with tiktoken, which downloads its encoding.
    out = ModelOutput.from_content("mockllm/model", text)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


class Model:
    """The mock model's replies: garbage to the task prompt, the shipped solution to any feedback (or garbage
    throughout); keeps every conversation it was sent."""

    def __init__(self, solve_after_feedback: bool):
        self.solve = solve_after_feedback
        self.seen: list[list[str]] = []

    def __call__(self, messages, tools, tool_choice, config) -> ModelOutput:
        self.seen.append([m.text for m in messages])
        if self.solve and sum(m.role == "user" for m in messages) > 1:
            return _output("Here it is:\n```python\n" + read(solution_path(resolve_task(TASK), "cpu")) + "```\n")
        return _output(GARBAGE)


def _run(task, model: Model, log_dir):
    (log,) = inspect_eval(task, model="mockllm/model", model_args={"custom_outputs": model}, log_dir=str(log_dir),
                          display="none")
    assert log.status == "success", log.error
    assert list(log_dir.glob("*.eval")), "Inspect wrote no log under the given folder"
    (sample,) = log.samples
    return log, sample, sample.scores["kbench_scorer"]


def _metrics(log) -> dict:
    return {(s.name, m.name): m.value for s in log.results.scores for m in s.metrics.values()}


def _reset_prompt() -> str:
    env = KBenchEnv(task=TASK, device="cpu", config=EvaluatorConfig.from_options(spare_worker=False))
    try:
        return env.reset(seed=0)[0]
    finally:
        env.close()


def _assert_no_held_out(texts: list[str]) -> None:
    secrets = secrets_of(resolve_task(TASK))
    assert secrets
    for text in texts:
        for secret in secrets:
            assert secret not in text, f"held-out {secret!r} reached the model:\n{text}"


def test_a_correct_reply_after_feedback_scores_correct_with_a_speedup(tmp_path):
    model = Model(solve_after_feedback=True)
    log, sample, score = _run(kbench(suite=TASK, device="cpu", max_turns=2, env_options=OPTIONS), model, tmp_path)
    value, turns = score.value, score.metadata["turns"]
    assert value["correct"] == 1.0 and value["speedup"] > 0, (value, turns)
    assert value["fast_p"] == float(value["speedup"] > 1.0)  # KernelBench's fast_1
    assert [t["correct"] for t in turns] == [False, True] and turns[0]["error_stage"] == "screen", turns
    assert turns[1]["speedup"] == value["speedup"] and turns[1]["reward"] > 0  # the env's tiered reward
    assert value["reward"] == pytest.approx(turns[1]["reward"] - 0.02)  # the best turn's, less a turn's cost
    metrics = _metrics(log)
    assert metrics[("correct", "mean")] == 1.0 and metrics[("speedup", "geomean_speedup")] == pytest.approx(
        value["speedup"]) and metrics[("fast_p", "mean")] == value["fast_p"]
    # the conversation: the env's prompt, a reply, the env's feedback on it as the next user message, a reply
    assert [m.role for m in sample.messages] == ["system", "user", "assistant", "user", "assistant"]
    prompt = _reset_prompt()
    assert sample.input == prompt and model.seen[0][-1] == prompt and len(model.seen) == 2
    assert model.seen[1][1] == prompt and model.seen[1][2] == GARBAGE
    assert "stage reached: none" in model.seen[1][3] and "Attempt 1 of 2" in model.seen[1][3]
    assert "held-out configuration 1 of 2" in score.explanation  # the last feedback: held-out ones by number only
    _assert_no_held_out([t for conversation in model.seen for t in conversation] + [score.explanation])


def test_a_garbage_reply_scores_incorrect(tmp_path):
    model = Model(solve_after_feedback=False)
    log, sample, score = _run(kbench(suite=TASK, device="cpu", max_turns=1, env_options=OPTIONS), model, tmp_path)
    assert score.value == {"correct": 0.0, "fast_p": 0.0, "speedup": 0.0, "reward": INVALID}
    assert [m.role for m in sample.messages] == ["system", "user", "assistant"] and len(model.seen) == 1
    metrics = _metrics(log)
    assert metrics[("correct", "mean")] == 0.0 and metrics[("fast_p", "mean")] == 0.0
    assert metrics[("speedup", "geomean_speedup")] == 0.0 and metrics[("reward", "mean")] == INVALID
    _assert_no_held_out(model.seen[0])


def test_the_task_refuses_what_it_would_not_use():
    with pytest.raises(ValueError, match="presets"):
        kbench(suite=TASK, reward="made-up")
    with pytest.raises(ValueError, match="episode reward"):
        kbench(suite=TASK, episode_reward="mean")
    with pytest.raises(ValueError, match="set by kbench serve.*reward"):  # the server's reward, not the client's
        kbench(suite=TASK, url="http://127.0.0.1:9", reward="binary")


def test_episodes_on_a_kbench_serve_server(tmp_path, monkeypatch):
    """With url=, the episodes run on the server; its researcher's record (--expose-info) says the answer is
    correct; timing is off there, so no speedup and fast_p 0."""
    server = ServerProcess("--suite", TASK, "--expose-info")
    try:
        monkeypatch.setenv("KBENCH_TOKEN", TOKEN)
        model = Model(solve_after_feedback=True)
        log, sample, score = _run(kbench(suite=TASK, device="cpu", max_turns=2, url=server.url), model, tmp_path)
    finally:
        server.stop()
    assert score.value["correct"] == 1.0 and score.value["speedup"] == 0.0 and score.value["fast_p"] == 0.0
    assert [t["correct"] for t in score.metadata["turns"]] == [False, True]
    assert sample.input == _reset_prompt() and model.seen[0][-1] == sample.input
    assert TOKEN not in str(log.eval.task_args)
    _assert_no_held_out([t for conversation in model.seen for t in conversation])


@pytest.mark.slow
def test_inspect_eval_from_the_command_line_with_a_local_model(tmp_path):
    """``inspect eval FILE --model hf/<folder>``: a tiny random Qwen2 (training/tiny.py) answers; nothing is
    downloaded (the hub is switched off)."""
    tok = build_tokenizer(vocab_size=400, files=[str(ROOT / "tasks" / "level1" / "relu.py")])
    build_model(tok, hidden=16, layers=1, heads=2, kv_heads=1).save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    logs = tmp_path / "logs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "KBENCH_SPARE_WORKER": "0"}
    p = subprocess.run([sys.executable, "-m", "inspect_ai", "eval", "kbench_apps/integrations/inspect_task.py",
                        "--model", f"hf/{tmp_path / 'tiny'}", "-T", f"suite={TASK}", "-T", "max_turns=1",
                        "--max-tokens", "8", "--log-dir", str(logs), "--display", "none"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (path,) = logs.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success" and log.eval.task == "kbench"
    (sample,) = log.samples
    assert sample.scores["kbench_scorer"].value["correct"] == 0.0  # a random model writes no kernel
    assert sample.input == _reset_prompt()

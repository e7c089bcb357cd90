"""Action formats (pipeline/formats.py): the prompt states each format with its rules and a complete example, the
evaluation holds candidates to it (screen and builder), the env, CLI, agents and training pass it through."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import gymnasium as gym
import pytest

import kbench_env  # noqa: F401 - registers KBench-v0
from conftest import ROOT
from kbench_env.backends import get_backend
from kbench_env.config import EvaluatorConfig
from kbench_env.env.prompt import build_prompt
from kbench_env.pipeline import formats
from kbench_env.pipeline.format_examples import FAST_CPU_EXAMPLE, FAST_CUDA_EXAMPLE
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.suite import resolve_task

ADD = load_task(ROOT / "tests/data/formats_add.py")
RELU = resolve_task("level1/relu")
KB_RELU = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
FAST_RELU = ROOT / "tasks/solutions/fast_cpu/level1/relu.py"


def _example_code(prompt: str) -> str:
    """The one-shot example's code block of a prompt (the only fenced python block after "Example:")."""
    return re.search(r"```python\n(.*?)```", prompt[prompt.index("Example:"):], re.S).group(1)


@pytest.fixture(scope="module")
def fast_evaluator(evaluator):
    from kbench_env.pipeline.evaluator import Evaluator

    ev = Evaluator(device="cpu", format="fast", cache_dir=evaluator.cache_dir, limits=evaluator.limits,
                   timing=dict(evaluator.timing), spare_worker=False)
    yield ev
    ev.close()


# ---------------------------------------------------------------------- prompts
def test_kernelbench_prompt_is_the_backends_own():
    p = build_prompt(ADD, get_backend("cpu"), "cpu")
    assert "Answer format: kernelbench" in p and get_backend("cpu").example() in p and "load_inline" in p


def test_fast_cpu_prompt_holds_its_rules_and_example():
    p = build_prompt(ADD, get_backend("cpu"), "cpu", format="fast")
    assert "Answer format: fast" in p and FAST_CPU_EXAMPLE in p
    assert "cpp_kernel(source, name, flags)" in p and "not allowed in this format" in p
    assert get_backend("cpu").example() not in p  # the load_inline example is not shown


def test_fast_cuda_prompt_holds_its_rules_and_example():
    p = build_prompt(ADD, get_backend("cuda"), "cuda", format="fast")
    assert FAST_CUDA_EXAMPLE in p and "cuda_kernel(source, name" in p and "launch(grid, block" in p


def test_triton_prompt_holds_its_rules_and_example():
    triton = get_backend("triton")
    p = build_prompt(ADD, triton, "cuda", format="triton")
    assert "Answer format: triton" in p and triton.example() in p and "@triton.jit" in p


def test_kernelbench_rules_apply_to_the_fast_rules():
    p = build_prompt(ADD, get_backend("cpu"), "cpu", format="fast", rules="kernelbench")
    assert "Rules: kernelbench" in p and "calls into PyTorch compute operators in place" not in p


# ---------------------------------------------------------------------- construction
def test_triton_format_on_the_cpu_is_refused_with_one_line():
    with pytest.raises(ValueError) as exc:
        gym.make("KBench-v0", task="level1/relu", device="cpu", format="triton")
    assert "format='triton' needs a CUDA device" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("fmt,backend,device", [("fast", "triton", "cpu"), ("fast", "cuda", "cpu"),
                                                ("triton", "cuda", "cuda")])
def test_a_backend_the_format_cannot_use_is_refused(fmt, backend, device):
    with pytest.raises(ValueError, match=f"format='{fmt}'"):
        formats.resolve_backend(fmt, backend, device)


def test_format_fixes_the_backend():
    assert formats.resolve_backend("fast", None, "cpu") == "cpu"
    assert formats.resolve_backend("fast", None, "cuda") == "cuda"
    assert formats.resolve_backend("triton", None, "cuda:1") == "triton"
    assert formats.resolve_backend("kernelbench", "triton", "cpu") == "triton"  # as today


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown format 'cuda'"):
        formats.check_format("cuda")


def test_shared_evaluator_with_another_format_is_refused(evaluator):
    with pytest.raises(ValueError, match="format='fast'"):
        gym.make("KBench-v0", task="level1/relu", evaluator=evaluator, format="fast")


def test_env_prompt_and_info_state_the_format(fast_evaluator):
    env = gym.make("KBench-v0", task="level1/relu", evaluator=fast_evaluator, format="fast")
    prompt, info = env.reset(seed=0)
    assert info["format"] == "fast" and FAST_CPU_EXAMPLE in prompt
    env2 = gym.make("KBench-v0", task="level1/relu", device="cpu", config=EvaluatorConfig.from_options(spare_worker=False))
    try:
        assert env2.unwrapped.evaluator.format == "kernelbench"  # the default: today's behaviour
        assert env2.reset(seed=0)[1]["format"] == "kernelbench"
    finally:
        env2.close()


# ---------------------------------------------------------------------- evaluation
def test_the_fast_prompts_example_answer_is_correct(fast_evaluator):
    prompt = build_prompt(ADD, fast_evaluator.backend, "cpu", format="fast")
    r = fast_evaluator.evaluate(ADD, _example_code(prompt), seed=3)
    assert r.correct and not r.integrity_flags, r.feedback()
    assert r.format == "fast" and r.to_dict()["format"] == "fast"
    assert any(c.held_out for c in r.configs)


def test_shipped_fast_solution_is_correct(fast_evaluator):
    r = fast_evaluator.evaluate(RELU, FAST_RELU.read_text(), seed=3)
    assert r.correct and not r.integrity_flags, r.feedback()


def test_fast_format_screens_out_load_inline(fast_evaluator):
    r = fast_evaluator.evaluate(RELU, KB_RELU, seed=3)
    assert r.error_stage == "screen" and "not torch.utils.cpp_extension" in r.error, r.feedback()


def test_fast_format_needs_a_fast_path_kernel(fast_evaluator):
    src = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    r = fast_evaluator.evaluate(RELU, src, seed=3)
    assert r.error_stage == "screen" and "cpp_kernel(source, name" in r.error


def test_fast_format_refuses_a_hidden_load_inline_at_build(fast_evaluator):
    """A cpp_extension build the screen cannot see (imported by a computed name) is refused by the builder."""
    src = FAST_RELU.read_text().replace("class ModelNew", '''import importlib
_ext = importlib.import_module("torch.utils." + "cpp_" + "extension")
_mod = getattr(_ext, "load_" + "inline")(name="hidden", cpp_sources="int f() { return 1; }", functions=["f"])


class ModelNew''')
    r = fast_evaluator.evaluate(RELU, src, seed=3)
    assert not r.correct and r.error_stage in ("build", "load"), r.feedback()
    assert "not allowed in this evaluation's action format" in (r.error or "") + (r.log_tail or ""), r.feedback()


def test_builder_refuses_kinds_outside_the_format(tmp_path):
    from kbench_env.builder.client import Builder

    b = Builder("cpu", "cpu", str(tmp_path), kinds=formats.builder_kinds("fast"))
    reply = b.submit({"kind": "inline", "name": "x", "cpp_sources": ["int f();"]}, timeout=5).result(timeout=1)
    assert reply["ok"] is False and reply["refused"] and b.pid is None  # refused without starting the builder
    b.close()


def test_kernelbench_format_still_accepts_the_fast_path(evaluator):
    assert evaluator.format == "kernelbench"
    r = evaluator.evaluate(RELU, FAST_RELU.read_text(), seed=3)
    assert r.correct, r.feedback()


# ---------------------------------------------------------------------- agents, training, CLI
def test_agents_pick_solutions_of_the_format():
    from kbench_agents.factories import evolutionary, shipped

    class Opts:
        format = "fast"

    assert shipped("cpu", Opts()).has_solution(RELU)
    assert "cpp_kernel" in evolutionary("cpu", Opts()).proposer.start_source(RELU)
    assert "load_inline" in evolutionary("cpu", None).proposer.start_source(RELU)


def test_offline_client_answers_in_the_prompts_format():
    from kbench_agents.llm import default_offline_reply

    prompt = build_prompt(RELU, get_backend("cpu"), "cpu", format="fast")
    reply = default_offline_reply([{"role": "user", "content": prompt}])
    assert "cpp_kernel(" in reply and "load_inline(" not in reply


def test_training_prompts_and_rollout_index_carry_the_format(fast_evaluator):
    from kbench_training.data import prompt_index, task_messages
    from kbench_training.rollout import MultiTurnRollout

    user = task_messages(RELU, "cpu", "cpu", format="fast")[-1]["content"]
    assert "Answer format: fast" in user
    rollout = MultiTurnRollout(fast_evaluator, [RELU], "cpu", "cpu")
    assert user in rollout.index and user in prompt_index([RELU], "cpu", "cpu", "fast")


def _kbench(*args):
    return subprocess.run([sys.executable, "-m", "kbench_apps.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=dict(os.environ))


def test_cli_format_help_shows_the_default():
    from kbench_apps.cli import build_parser

    for cmd, default in (("eval", "kernelbench"), ("run", "auto"), ("serve", "kernelbench")):
        sub = build_parser()._subparsers._group_actions[0].choices[cmd]
        assert "--format" in sub.format_help() and f"(default: {default})" in " ".join(sub.format_help().split())


def test_cli_eval_passes_the_format_through():
    p = _kbench("eval", "--task", "level1/relu", "--solution", str(ROOT / "tasks/solutions/cpu/level1/relu.py"),
                "--device", "cpu", "--format", "fast", "--json")
    assert p.returncode == 1, p.stderr
    assert '"format": "fast"' in p.stdout and "not torch.utils.cpp_extension" in p.stdout
    p = _kbench("eval", "--task", "level1/relu", "--solution", str(FAST_RELU), "--device", "cpu", "--format", "triton")
    assert p.returncode == 2 and "format='triton' needs a CUDA device" in p.stderr


def test_cli_run_passes_the_format_through(tmp_path, evaluator):
    out = tmp_path / "run.jsonl"
    p = _kbench("run", "--suite", "level1/relu", "--agent", "shipped", "--device", "cpu", "--format", "fast",
                "--timing", "quick", "--out", str(out))
    assert p.returncode == 0, p.stderr + p.stdout
    assert "fast format" in p.stdout
    import json

    recs = [json.loads(line) for line in out.read_text().splitlines()]
    attempt = next(r for r in recs if r["kind"] == "attempt")
    done = next(r for r in recs if r["kind"] == "task_done")
    assert attempt["eval"]["format"] == "fast" and attempt["eval"]["correct"] and done["format"] == "fast"

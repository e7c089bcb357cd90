"""What a policy reads: the step observation hides held-out configurations (only "held-out configuration k of
n", whether it passed and how it failed), lays its table out whole, and keeps the characters it prints."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import candidates
import kbench_env  # noqa: F401  (registers KBench-v0)
from conftest import ROOT, read
from kbench_env.config import EvaluatorConfig
from kbench_env.env.env import KBenchEnv, sanitize
from kbench_env.pipeline.feedback import full_feedback, policy_feedback
from kbench_env.pipeline.result import ConfigResult, EvalResult
from kbench_env.tasks.suite import load_suite, solution_path

SUITE = "default"

# A forward taking any inputs, so one candidate fits every task of the suite.
WRONG = candidates._HEADER + '''
class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *xs):
        return xs[0].detach().clone()
'''
CRASH = candidates._HEADER + '''
class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *xs):
        raise RuntimeError("unsupported input " + ", ".join(f"float32{list(x.shape)}" for x in xs))
'''


def _only_on_shown(solution: str, shown: list, how: str) -> str:
    """The task's correct solution, made wrong (``how="wrong"``) or crashing (``"crash"``) on every input shape but
    the shown configuration's; the crash message spells the input shapes as the feedback table does."""
    bad = ("return out + 1.0" if how == "wrong" else
           "raise RuntimeError('unsupported input ' + ', '.join(f'float32{list(x.shape)}' for x in xs))")
    return solution + f'''

_Correct = ModelNew


class ModelNew(_Correct):
    def forward(self, *xs):
        out = super().forward(*xs)
        if [tuple(x.shape) for x in xs] == {shown!r}:
            return out
        {bad}
'''


def _held_out_secrets(task) -> list[str]:
    """What must never reach a policy about the task's held-out configurations on the CPU."""
    configs = task.configs_for("cpu")
    shown = {s for c in configs if not c.held_out for s in task.input_shapes(c)}
    out = []
    for c in configs:
        if c.held_out:
            shapes = task.input_shapes(c)
            out += [s for s in shapes if s not in shown] + [", ".join(shapes), repr(c.name), f"{c.name} (held out)"]
    return out


@pytest.fixture(scope="module")
def stepped(evaluator):
    """Every task of the suite stepped with a wrong, a crashing and a correct candidate, and with its correct
    solution made wrong or crashing on the held-out shapes only: ``{(task, candidate): (observation, info)}``."""
    out = {}
    for task in load_suite(SUITE):
        shown_cfg = task.shown_configs("cpu")[0]
        shown = [tuple(int(d) for d in s.split("[", 1)[1].rstrip("]").split(", "))
                 for s in task.input_shapes(shown_cfg)]
        solution = read(solution_path(task, "cpu"))
        actions = {"wrong": WRONG, "crash": CRASH, "correct": solution,
                   "wrong_held_out": _only_on_shown(solution, shown, "wrong"),
                   "crash_held_out": _only_on_shown(solution, shown, "crash")}
        env = KBenchEnv(task=task, evaluator=evaluator, max_turns=len(actions) + 1)
        env.reset(seed=0)
        for name, action in actions.items():
            obs, _, _, _, info = env.step(action)
            assert env.observation_space.contains(obs), (task.name, name)
            out[(task.name, name)] = (obs, info)
    return out


def test_no_held_out_configuration_reaches_the_observation(stepped):
    tasks = {t.name: t for t in load_suite(SUITE)}
    for (name, cand), (obs, info) in stepped.items():
        for secret in _held_out_secrets(tasks[name]):
            assert secret not in obs, f"{name}, {cand} candidate: {secret!r} in the observation:\n{obs}"
        # the researcher's record keeps them
        assert any(c["held_out"] and c["inputs"] for c in info["eval"]["configs"]), (name, cand)


def test_a_held_out_failure_says_which_and_how(stepped):
    for name in {n for n, _ in stepped}:
        obs, info = stepped[(name, "wrong_held_out")]
        ev = info["eval"]
        assert ev["error_stage"] == "correctness", obs
        assert "held-out configuration 1 of" in obs and "wrong values" in obs, obs
        assert "norm err 1" not in obs and "max err" not in obs, obs  # a verdict, no error figures
        obs, info = stepped[(name, "crash_held_out")]
        assert info["eval"]["error_stage"] == "run" and "unsupported input" in info["eval"]["error"]
        assert "held-out configuration 1 of" in obs and "crashed" in obs and "unsupported input" not in obs, obs


def test_the_table_is_whole_and_keeps_plus_minus(stepped, evaluator):
    """A multi-input task: every shown input shape whole in the observation, the spread's ± kept."""
    obs, info = stepped[("level1/matmul_square", "correct")]
    assert info["eval"]["correct"], obs
    shown = [c for c in info["eval"]["configs"] if not c["held_out"]]
    assert shown and len(shown[0]["inputs"]) == 2
    for c in shown:
        assert ", ".join(c["inputs"]) in obs, obs
    assert "±" in obs and "?" not in obs.split("Reward")[0], obs
    env = gym.make("KBench-v0", task="level1/matmul_square", evaluator=evaluator)  # its spec: nondeterministic
    check_env(env.unwrapped)
    env.close()


def _result(**kw) -> EvalResult:
    shown = ConfigResult(name="small", held_out=False, dtype="float32", inputs=["float32[256, 256]"] * 2,
                         correct=True, norm_err=1e-7, candidate_ms=1.5, candidate_spread_ms=0.25, reference_ms=3.0,
                         speedup=2.0, kernel_coverage=1.0)
    held = ConfigResult(name="m199_n3001", held_out=True, dtype="bfloat16",
                        inputs=["bfloat16[199, 3001]", "bfloat16[3001, 7]"], correct=False, norm_err=0.5,
                        max_err=2.0, candidate_ms=0.75, reference_ms=9.25, speedup=12.33, kernel_coverage=0.5)
    base = dict(task="t", backend="cpu", device="cpu", stage="ran", configs=[shown, held], held_out_count=2,
                kernel_coverage=0.75)
    return EvalResult(**{**base, **kw})


SECRETS = ["m199_n3001", "bfloat16[199, 3001]", "bfloat16[3001, 7]", "bfloat16", "0.750", "9.250", "12.33",
           "5.00e-01", "2.00e+00"]  # its error figures too: a verdict only


@pytest.mark.parametrize("error_stage, error, flag, how", [
    ("correctness", "configuration 'm199_n3001' (held out) with inputs bfloat16[199, 3001], bfloat16[3001, 7]: "
                    "values differ", None, "wrong values (its message is not shown"),
    ("run", "configuration 'm199_n3001' (held out) with inputs bfloat16[199, 3001], bfloat16[3001, 7]: "
            "shape (199, 3001) is not supported", None, "crashed"),
    ("run", "forward on configuration 'm199_n3001' timed out after 30 s", None, "timed out"),
    ("timing", "configuration 'm199_n3001' (held out) with inputs bfloat16[199, 3001], bfloat16[3001, 7] failed "
               "while being timed: boom", None, "crashed while being timed"),
    (None, None, "below_roofline: 0.7500 ms on configuration 'm199_n3001' is below bfloat16[199, 3001]'s floor",
     "below_roofline: on held-out configuration 1 of 2"),
])
def test_policy_feedback_hides_a_held_out_configuration(error_stage, error, flag, how):
    r = _result(error=error, error_stage=error_stage, integrity_flags=[flag] if flag else [])
    text = policy_feedback(r)
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in:\n{text}"
    assert how in text and "held-out configuration 1 of 2" in text, text
    assert "float32[256, 256], float32[256, 256]" in text and "1.500±0.125" in text, text
    full = full_feedback(r)  # the researcher's view keeps everything
    assert "m199_n3001 (held out)" in full and "bfloat16[199, 3001], bfloat16[3001, 7]" in full, full
    if error:
        assert error.splitlines()[0] in full


def test_the_held_out_count_is_the_tasks_when_a_dead_worker_cut_the_run_short():
    r = _result(error="the worker died during forward on configuration 'm199_n3001'", error_stage="run")
    assert "held-out configuration 1 of 2" in policy_feedback(r)
    r.held_out_count = None  # a record written before the count was kept: counted from the configurations
    assert "held-out configuration 1 of 1" in policy_feedback(r)


def test_sanitize_keeps_plus_minus_and_writes_other_characters_as_ascii():
    text = sanitize("1.5±0.1 ms; error: ‘foo’ was not declared — café")
    assert text == "1.5±0.1 ms; error: 'foo' was not declared - caf\\xe9"
    assert "?" not in text
    # ASCII control characters (a reply of random tokens, echoed in the screen's error) are written out too
    assert sanitize("bad\x1b[0m\x05 reply\n\t") == "bad\\x1b[0m\\x05 reply\n\t"
    env = KBenchEnv(task="level1/relu", device="cpu", config=EvaluatorConfig.from_options(spare_worker=False))
    try:
        env.reset(seed=0)
        obs = env.step("\x1b\x05 not python (")[0]
        assert env.observation_space.contains(obs), [c for c in obs if c not in env.observation_space.character_set]
    finally:
        env.close()


@pytest.mark.parametrize("error_stage, error", [
    ("correctness", "configuration 'm199_n3001' (held out) with inputs bfloat16[199, 3001], bfloat16[3001, 7]: "
                    "values differ"),
    ("run", "configuration 'm199_n3001' (held out) with inputs bfloat16[199, 3001], bfloat16[3001, 7]: "
            "shape (199, 3001) is not supported"),
])
def test_agent_prompts_read_the_policy_view_only(error_stage, error):
    """The agents' feedback and error summaries (mutation, crossover, translation retries, a resumed
    refinement) are built from the policy's view, whether given an EvalResult or its JSONL dict."""
    from kbench_agents import prompts
    from kbench_agents.evolutionary import Candidate

    r = _result(error=error, error_stage=error_stage)
    texts = [prompts.summarize_feedback(r), prompts.summarize_error(r), prompts.summarize_feedback(r.to_dict()),
             Candidate(id=0, source="", origin="mutate", eval=r.to_dict()).feedback,
             prompts.summarize_feedback(_result(correct=True, speedup=3.0, stage="timed"))]
    for text in texts:
        for secret in SECRETS + ["(199, 3001)"]:
            assert secret not in text, f"{secret!r} in:\n{text}"
    assert "held-out configuration 1 of 2" in texts[0] and "held-out configuration 1 of 2" in texts[1]

"""Reward presets keep the promised order; the screen extracts code from LLM replies and rejects quickly."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import no_hang
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.reward import get_reward_fn
from kbench_env.pipeline.screen import MAX_ACTION_CHARS, ScreenError, extract_source, screen
from kbench_env.tasks.suite import resolve_task


def _r(**kw) -> EvalResult:
    return EvalResult(task="t", backend="cpu", device="cpu", **kw)


CASES = {
    "exploit": _r(stage="timed", compiled=True, correct=True, speedup=50.0, integrity_flags=["lazy_output: y"]),
    "invalid": _r(stage="none"),
    "no_build": _r(stage="screened"),
    "wrong": _r(stage="ran", compiled=True),
    "slow": _r(stage="timed", compiled=True, correct=True, speedup=0.5),
    "parity": _r(stage="timed", compiled=True, correct=True, speedup=1.0),
    "fast": _r(stage="timed", compiled=True, correct=True, speedup=3.0),
    "very_fast": _r(stage="timed", compiled=True, correct=True, speedup=1000.0),
}


def test_tiered_order_and_cap():
    f = get_reward_fn("tiered")
    order = ["exploit", "invalid", "no_build", "wrong", "slow", "parity", "fast", "very_fast"]
    values = [f(CASES[k]) for k in order]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert f(CASES["very_fast"]) == 2.0 and f(CASES["parity"]) == 1.0 and f(CASES["slow"]) > 0


@pytest.mark.parametrize("name", ["binary", "speedup", "kevin"])
def test_other_presets_punish_exploits_most(name):
    f = get_reward_fn(name)
    assert f(CASES["exploit"]) < min(f(CASES[k]) for k in CASES if k != "exploit")
    assert f(CASES["fast"]) >= f(CASES["wrong"])


def test_unknown_preset():
    with pytest.raises(ValueError, match="presets"):
        get_reward_fn("nope")


def test_extract_from_llm_reply():
    reply = ("First the reference:\n```python\nclass Model: pass\n```\nNow mine:\n```python\n"
             "class ModelNew:\n    pass\n```\nDone.")
    assert extract_source(reply).strip() == "class ModelNew:\n    pass"
    assert extract_source("class ModelNew: pass") == "class ModelNew: pass"


def test_screen_messages():
    with pytest.raises(ScreenError, match="line 1"):
        screen("def f(:")
    with pytest.raises(ScreenError, match="no class ModelNew"):
        screen("x = 1")
    with pytest.raises(ScreenError, match="empty"):
        screen("")


# ---------------------------------------------------------------------- hostile actions: size, time, depth

# The extraction as it was (a regular expression over the whole action): the oracle for what a block is.
_OLD_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)```", re.DOTALL)


def _old_extract(action: str) -> str:
    if "```" not in action:
        return action
    blocks = [(lang.lower(), body) for lang, body in _OLD_FENCE.findall(action)]
    py = [b for lang, b in blocks if lang in ("", "python", "py", "python3")]
    with_model = [b for b in py if "ModelNew" in b] or [b for _, b in blocks if "ModelNew" in b]
    return with_model[-1] if with_model else py[-1] if py else action


_PIECES = ["```", "```python", "```cuda x", "``", "`", "\n", " ", "\t", "ModelNew", "class Model: pass", "py", "-"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
def test_extraction_keeps_its_meaning(action):
    assert extract_source(action) == _old_extract(action)


class _Unscannable(str):
    """An action that fails the test if anything searches it."""

    def __contains__(self, sub):
        raise AssertionError("the action was searched before its size was checked")

    find = index = count = __contains__


def test_oversize_action_is_refused_before_it_is_scanned():
    with pytest.raises(ScreenError, match="limit is 1,000,000"):
        extract_source(_Unscannable("`" * (MAX_ACTION_CHARS + 1)))
    with pytest.raises(ScreenError, match="characters"):
        extract_source(b"`" * (MAX_ACTION_CHARS + 1))


@pytest.mark.parametrize("storm", ["`", "```x", "```\n", "```python\n`` "])
def test_fence_storms_take_one_pass(storm):
    """Near-limit actions made of fences: a search that retries the rest of the text from each fence needs
    ~10^11 steps on them (hours); one pass of str.find returns at once. ``no_hang`` only turns the former into a
    failure instead of a stuck test run."""
    action = storm * (MAX_ACTION_CHARS // len(storm))
    with no_hang(120):
        source = extract_source(action)
    assert len(source) <= len(action)


def test_deep_base_class_is_a_screen_error(evaluator):
    chain = "class ModelNew(" + "a." * 600 + "Module):\n    pass\n"
    with pytest.raises(ScreenError, match="levels deep"):
        screen(chain)
    r = evaluator.evaluate(resolve_task("level1/relu"), chain)
    assert r.error_stage == "screen" and "levels deep" in r.error, r.feedback()


@pytest.mark.parametrize("deep", [
    "x = " + "a + " * 400 + "a\n",             # an operator chain
    "x = " + "-" * 400 + "1\n",                # unary operators inside each other
    "x = " + "f()" * 1 + "()" * 400 + "\n",    # calls of calls
])
def test_other_deep_trees_are_screen_errors(deep):
    with pytest.raises(ScreenError, match="levels deep"):
        screen(deep + "class ModelNew:\n    def forward(self, x):\n        return x\n")


def test_base_classes_still_decide_whether_forward_is_needed():
    with pytest.raises(ScreenError, match="no forward"):
        screen("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    screen("class ModelNew(Model):\n    pass\n")  # inherits forward
    screen("class ModelNew(Base[int]):\n    pass\n")

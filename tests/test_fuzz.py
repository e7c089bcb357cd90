"""Bad input through ``env.step``: whatever the action, ``step`` returns a text observation with a clear error and a
defined reward, and never raises. Named cases cover each kind of bad input; hypothesis fuzzes the rest (modest
example counts: most fuzz inputs are rejected by the screen in milliseconds, the rest cost one worker each)."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import candidates as C
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.reward import EXPLOIT, INVALID, NO_BUILD, WRONG
from kbench_env.sandbox.confine.policy import Limits

TIERS = {EXPLOIT, INVALID, NO_BUILD, WRONG}


@pytest.fixture(scope="module")
def env(evaluator):
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False,
                   limits=Limits(build_timeout=60, run_timeout=10, time_timeout=20, memory_bytes=2 << 30))
    e = gym.make("KBench-v0", task="level1/relu", evaluator=ev, max_turns=1_000_000, disable_env_checker=True)
    e.reset(seed=0)
    yield e
    e.close()


def _step(env, action):
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and obs
    assert isinstance(reward, float) and math.isfinite(reward)
    assert reward in TIERS or 0.05 - 1e-9 <= reward <= 2.0 + 1e-9, reward
    result = info["eval"]
    assert "internal evaluator error" not in (result["error"] or ""), result["error"]
    return obs, reward, result


CTOR_RAISES = C._HEADER + '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("boom in __init__")

    def forward(self, x):
        return x
'''


@pytest.mark.parametrize("action, reward, stage, words", [
    (None, INVALID, "screen", "must be a string"),
    (42, INVALID, "screen", "must be a string"),
    (["class ModelNew: pass"], INVALID, "screen", "must be a string"),
    ({"source": "x"}, INVALID, "screen", "must be a string"),
    ("", INVALID, "screen", "empty"),
    ("   \n\t ", INVALID, "screen", "empty"),
    ("x = 1\n" * 2_000_000, INVALID, "screen", "limit"),  # 12 MB
    (b"\x00\x01\xfe\xff binary", INVALID, "screen", "NUL"),
    ("ünïcødé ☃ 日本語 🚀", INVALID, "screen", "not valid Python"),
    ("class ModelNew:\n    pass\n# \ud800 lone surrogate", INVALID, "screen", "not valid Python"),
    ("def forward(:\n    return", INVALID, "screen", "not valid Python"),
    ("import torch\n\nclass Model(torch.nn.Module):\n    pass\n", INVALID, "screen", "no class ModelNew"),
    ("Here is my answer:\n```python\nclass ModelNew(:\n```", INVALID, "screen", "not valid Python"),
    (C._forward("        return x", at_import="raise ImportError('boom at import')\n"), NO_BUILD, "load", "boom at import"),
    (CTOR_RAISES, WRONG, "run", "boom in __init__"),
    (C.RAISES_IN_FORWARD, WRONG, "run", "bad block size"),
    (C.WRONG_TYPE, WRONG, "run", "returned a str"),
    (C._forward("        return {'out': x}"), WRONG, "run", "returned a dict"),
    (C._forward("        return x.to('meta')"), WRONG, "run", "meta"),
])
def test_bad_action_gets_a_clear_error(env, action, reward, stage, words):
    obs, r, result = _step(env, action)
    assert r == reward, result["error"]
    assert result["error_stage"] == stage, result["error"]
    assert words in result["error"], result["error"]
    assert words in obs or len(obs) > 200  # the observation carries the error (trimmed when long)


@pytest.mark.parametrize("body, words", [
    ("        return x[:, :-1].clone()", "shape"),
    ("        return torch.zeros(3)", "shape"),
    ("        return x.relu().to(torch.int32)", "dtype"),
    ("        return x > 0", "dtype"),
    ("        return None", "NoneType"),
    ("        return 3", "int"),
    ("        return (x.relu(), x.relu())", "output(s)"),
    ("        return x * float('nan')", "non-finite"),
])
def test_wrong_outputs_are_reported(env, body, words):
    obs, r, result = _step(env, C._forward(body))
    assert result["correct"] is False and result["error_stage"] == "correctness", result["error"]
    assert words in result["error"], result["error"]
    assert r < 0


anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.binary(max_size=64),
    st.text(max_size=200), st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=20),
    st.lists(st.text(max_size=8), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.tuples(st.integers(), st.text(max_size=4)),
)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(action=anything)
def test_fuzz_any_value(env, action):
    _step(env, action)


# Fragments that often make parseable candidates with ModelNew: these reach the worker (a few hundred ms each).
FRAGMENTS = ["import torch\n", "import torch.nn as nn\n", "from torch.utils.cpp_extension import load_inline\n",
             "class ModelNew(nn.Module):\n", "class ModelNew:\n", "    def forward(self, x):\n",
             "    def __init__(self):\n        super().__init__()\n", "        return x\n", "        return x.relu()\n",
             "        return x[0]\n", "        raise ValueError('fuzz')\n", "        return 'x'\n", "        pass\n",
             "if False: load_inline(name='n', cpp_sources='')\n", "```python\n", "```\n", "ü☃", "\x00", "\ud800",
             "(", ")", ":", "\n", "    ", "# comment\n", "import os\nos._exit(0)\n", "x = 1 / 0\n"]


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14))
def test_fuzz_python_like_text(env, parts):
    _step(env, "".join(parts))


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cut=st.integers(0, 2000), junk=st.text(max_size=12))
def test_fuzz_mutated_candidate(env, cut, junk):
    """A working (non-compiling) candidate with text spliced in at a random place."""
    src = C._forward("        return x.relu()")
    i = cut % (len(src) + 1)
    _step(env, src[:i] + junk + src[i:])

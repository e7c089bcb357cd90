"""The SkyRL-gym adapter (``kbench_apps.integrations.skyrl_env``): the env made through skyrl-gym's registry as
SkyRL's generator makes it (``skyrl_gym.make(env_class, env_config=DictConfig, extras=row)``), ``init`` with a
dataset row's prompt, ``step`` with a correct and a wrong reply, in this process and on a ``kbench serve`` server.
CPU backend, level1/relu."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("skyrl_gym")
import skyrl_gym  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from kbench_apps.integrations import episode as episode_mod  # noqa: E402
from kbench_apps.integrations import skyrl_env  # noqa: E402  (registers "kbench")
from kbench_env.env.prompt import SYSTEM_PROMPT  # noqa: E402
from kbench_env.pipeline.reward import WRONG, episode_reward  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402
from tests.conftest import no_hang  # noqa: E402
from tests.kernel_replies import QUICK, TASK, correct_reply, wrong_reply  # noqa: E402
from tests.serving_server import TOKEN, ServerProcess  # noqa: E402
from tests.test_serve_client_view import secrets_of  # noqa: E402

CONFIG = {"device": "cpu", "timing": QUICK}


@pytest.fixture(autouse=True)
def _close_sources():
    yield
    episode_mod.close_shared()


def _make(max_turns: int, **config):
    return skyrl_gym.make(skyrl_env.ENV_ID, env_config=DictConfig({**CONFIG, **config}),
                          extras={"task": TASK, "max_turns": max_turns})


def test_the_rows_prompt_is_the_resets_without_held_out_configurations():
    assert skyrl_gym.registry[skyrl_env.ENV_ID].entry_point == "kbench_apps.integrations.skyrl_env:KBenchTextEnv"
    (row,) = skyrl_env.skyrl_rows([TASK], **CONFIG)
    assert row["env_class"] == "kbench" and row["task"] == TASK
    system, user = row["prompt"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    source = episode_mod.EnvSource(device="cpu")
    try:
        assert user["role"] == "user" and user["content"] == source.prompt(TASK)
    finally:
        source.close()
    secrets = secrets_of(resolve_task(TASK))
    assert secrets and not [s for s in secrets if s in json.dumps(row)]
    with pytest.raises(ValueError, match="names its task"):
        skyrl_gym.make(skyrl_env.ENV_ID, env_config=DictConfig(CONFIG), extras={"max_turns": 1})


def test_a_correct_reply_is_paid_the_envs_reward_and_ends_the_last_turn():
    (row,) = skyrl_env.skyrl_rows([TASK], **CONFIG)
    env = _make(max_turns=1)
    assert isinstance(env, skyrl_env.KBenchTextEnv) and env.max_turns == 1
    try:
        prompt, meta = env.init(row["prompt"])
        assert prompt == row["prompt"] and meta == {"task": TASK}
        with no_hang(900):
            out = env.step(correct_reply())
        assert out["done"] and out["observations"] == []
        assert out["reward"] > 0 and out["reward"] == out["metadata"]["turn_reward"]  # the env's (tiered) reward
        assert out["metadata"]["truncated"] and "eval" not in out["metadata"]
        metrics = env.get_metrics()
        assert metrics["turns"] == 1 and metrics["best_speedup"] > 0
    finally:
        env.close()


def test_a_wrong_reply_gets_feedback_then_the_episode_reward_at_its_end():
    env = _make(max_turns=2, episode_reward="best", turn_cost=0.05)
    try:
        env.init([{"role": "user", "content": "ignored: the row's prompt"}])
        with no_hang(1200):
            first = env.step(wrong_reply())
            assert not first["done"] and first["reward"] == 0.0 and first["metadata"]["turn_reward"] == WRONG
            (feedback,) = first["observations"]
            assert feedback["role"] == "user" and "Attempt 1 of 2. Send an improved ModelNew." in feedback["content"]
            assert not [s for s in secrets_of(resolve_task(TASK)) if s in json.dumps(first)]
            second = env.step(wrong_reply())
        assert second["done"] and second["observations"] == [] and second["metadata"]["truncated"]
        assert second["reward"] == pytest.approx(episode_reward([WRONG, WRONG], "best", 0.05))
        assert env.get_metrics()["turns"] == 2
    finally:
        env.close()


def test_the_env_evaluates_on_a_kbench_serve_server_given_its_url():
    server = ServerProcess("--suite", "default", "--workers", "1")
    try:
        config = {"url": server.url, "token": TOKEN}
        (row,) = skyrl_env.skyrl_rows([TASK], **config)
        assert row["prompt"][1]["content"].startswith(f"Task {TASK}:")
        assert not [s for s in secrets_of(resolve_task(TASK)) if s in json.dumps(row)]
        env = skyrl_gym.make(skyrl_env.ENV_ID, env_config=DictConfig(config), extras={"task": TASK, "max_turns": 1})
        try:
            env.init(row["prompt"])
            with no_hang(900):
                out = env.step(wrong_reply())
            assert out["done"] and out["reward"] == WRONG and out["metadata"]["task"] == TASK
        finally:
            env.close()
    finally:
        episode_mod.close_shared()
        server.stop()

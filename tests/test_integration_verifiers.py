"""The verifiers adapter (``kbench_apps.integrations.verifiers_env``), driven with verifiers' own objects: the env
resolved by its taskset id as ``vf eval`` resolves it, an episode run by ``Env.run_episode`` inside
``Env.serving()``, the model an OpenAI-compatible endpoint (tests/fake_openai.py) that answers with a shipped
correct CPU solution in one case and a wrong kernel in the other. CPU backend, level1/relu."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("verifiers")
import verifiers.v1 as vf  # noqa: E402

from kbench_apps.integrations import episode as episode_mod  # noqa: E402
from kbench_apps.integrations import verifiers_env as kv  # noqa: E402
from kbench_env.env.prompt import SYSTEM_PROMPT  # noqa: E402
from kbench_env.pipeline.reward import WRONG, episode_reward  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402
from tests.conftest import no_hang  # noqa: E402
from tests.fake_openai import fake_openai  # noqa: E402
from tests.kernel_replies import QUICK, TASK, correct_reply, wrong_reply  # noqa: E402
from tests.test_serve_client_view import secrets_of  # noqa: E402


@pytest.fixture(autouse=True)
def _close_sources():
    yield
    episode_mod.close_shared()


def _env(max_turns: int):
    return kv.load_environment(tasks=[TASK], device="cpu", max_turns=max_turns, evaluator={"timing": QUICK})


def _play(env, reply: str):
    """One episode of the env's one task against a model that always answers ``reply``; the episode and what
    the model was sent."""
    (task,) = list(env.taskset)

    async def episode(ctx):
        async with env.serving():
            return await asyncio.wait_for(env.run_episode(task, ctx), timeout=900)

    with no_hang(1200), fake_openai(lambda body: reply) as server:
        ctx = vf.ModelContext(model="tiny-coder",
                              client=vf.EvalClientConfig(base_url=server.base_url, api_key_var="KBENCH_TEST_KEY"))
        return task, asyncio.run(episode(ctx)), server.requests


def test_the_taskset_id_resolves_to_the_kbench_env_and_its_prompt_is_the_resets():
    config = vf.resolve_env_config({"taskset": {"id": kv.TASKSET_ID, "tasks": [TASK], "device": "cpu"}})
    assert isinstance(config, kv.KBenchVerifiersEnvConfig) and isinstance(config.taskset, kv.KBenchTasksetConfig)
    env = vf.load_environment(config)
    assert isinstance(env, kv.KBenchVerifiersEnv)
    assert isinstance(env._harnesses["agent"], kv.KBenchChatHarness)  # the taskset's own harness is the default
    (task,) = list(env.taskset)
    assert task.data.name == TASK and task.data.system_prompt == SYSTEM_PROMPT
    source = episode_mod.EnvSource(device="cpu")
    try:
        assert task.data.prompt == source.prompt(TASK)  # exactly what KBench-v0's reset shows
    finally:
        source.close()
    secrets = secrets_of(resolve_task(TASK))
    assert secrets and not [s for s in secrets if s in task.data.prompt]


def test_a_correct_reply_is_paid_the_envs_reward():
    task, episode, requests = _play(_env(max_turns=1), correct_reply())
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.metrics["turns"] == 1 and trace.num_turns == 1
    reward = trace.rewards["kbench"].score
    assert reward > 0 and reward == trace.metrics["turn_1_reward"] == trace.reward  # correct: the tiered reward
    assert trace.metrics["best_speedup"] > 0
    (request,) = requests
    messages = request[2]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT and messages[1]["content"] == task.data.prompt


def test_a_wrong_reply_gets_feedback_as_the_next_message_until_the_env_truncates():
    task, episode, requests = _play(_env(max_turns=2), wrong_reply())
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.metrics["turns"] == 2 and trace.num_turns == 2
    assert trace.metrics["turn_1_reward"] == trace.metrics["turn_2_reward"] == WRONG
    assert trace.rewards["kbench"].score == pytest.approx(episode_reward([WRONG, WRONG]))
    first, second = (r[2]["messages"] for r in requests)
    assert second[: len(first)] == first and len(second) == len(first) + 2  # the conversation grows
    feedback = second[-1]
    assert second[-2]["role"] == "assistant" and feedback["role"] == "user"
    assert "NO" in feedback["content"] and "Attempt 1 of 2. Send an improved ModelNew." in feedback["content"]
    sent = json.dumps([r[2] for r in requests])
    assert not [s for s in secrets_of(resolve_task(TASK)) if s in sent]  # no held-out configuration reached it

"""``KBench-v0`` as a Prime Intellect ``verifiers`` environment (verifiers 0.4, ``import verifiers.v1 as vf``).

verifiers 0.4 splits an environment into a taskset (the rows), an ``Env`` (how one task becomes one episode) and a
harness (the program that calls the model), and finds each by its id as an importable module that exports them in
``__all__``: ``vf eval kbench-verifiers`` (or ``--env.taskset.id kbench-verifiers``) imports the top-level module
``kbench_verifiers``, which re-exports this module's classes. (verifiers 0.4 has no entry-point lookup, and the
installed import names of this project all start with ``kbench_``, hence the id.)

- ``KBenchTaskset``: one task per suite task (``suite=``, or ``tasks=[names]``); its prompt is the observation
  ``KBench-v0``'s ``reset`` shows (reference program, shown configurations, rules: never a held-out
  configuration), under the system prompt GRPO training uses.
- ``KBenchVerifiersEnv``: the multi-turn loop. The model's reply is the action (``env.step``), the observation text
  is the next user message, and the episode ends when the env terminates or truncates it (``max_turns``,
  ``target_speedup``). The trace's reward ``kbench`` is ``episode_reward`` over the env's per-turn rewards (the
  env's ``reward=`` preset, "tiered" by default; "best" turn less ``turn_cost`` per extra turn, as GRPO training
  pays); each turn's reward and the best speedup are the trace's metrics.
- ``KBenchChatHarness`` (the default harness): one chat completion per turn, in this process, through the
  rollout's interception endpoint (no program to install); any other tool-less chat harness (``null``) works too.

Evaluations run in this process (``gym.make("KBench-v0", ...)``, one Evaluator for all episodes) or, with
``url=``, on a ``kbench serve`` server, whose token is read from the variable ``token_var`` names (a config is
saved with the run's results, so it holds no secret).
"""

from __future__ import annotations

import asyncio
import os
from typing import Literal

import httpx
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.errors import MODEL_TRANSPORT_ERROR_EXIT_CODE

from kbench_apps.integrations.episode import SYSTEM_PROMPT, Episode, shared_source
from kbench_env.pipeline.reward import EPISODE_REWARDS

#: The taskset id verifiers resolves to the module ``kbench_verifiers``.
TASKSET_ID = "kbench-verifiers"

__all__ = ["TASKSET_ID", "KBenchChatHarness", "KBenchChatHarnessConfig", "KBenchTask", "KBenchTaskset",
           "KBenchTasksetConfig", "KBenchVerifiersEnv", "KBenchVerifiersEnvConfig", "load_environment"]


class KBenchTasksetConfig(vf.TasksetConfig):
    """The episodes' settings (``--env.taskset.*``): which tasks, where they are evaluated, how they are paid."""

    suite: str = "default"
    """The suite the tasks come from ("default", "level1", a folder, a comma list): ``kbench tasks --suite``."""
    tasks: list[str] | None = None
    """Task names to use instead of the whole suite."""
    max_turns: int = 4
    """Attempts per episode."""
    target_speedup: float | None = None
    """End an episode early on a correct attempt at least this much faster."""
    url: str | None = None
    """A ``kbench serve`` server to evaluate on; None: in this process."""
    token_var: str = "KBENCH_TOKEN"
    """The environment variable holding the server's token."""
    device: str | None = None
    backend: str | None = None
    reward: str | None = None
    """The env's reward preset ("tiered", "binary", "speedup", "kevin"); None: "tiered"."""
    rules: str | None = None
    format: str | None = None
    dtype: str | None = None
    evaluator: dict = {}
    """More Evaluator options (in this process only), e.g. ``{"timing": {...}}``."""
    episode_reward: Literal[EPISODE_REWARDS] = "best"
    turn_cost: float = 0.02


def env_source(config: KBenchTasksetConfig):
    """The process's ``EnvSource`` for ``config`` (shared by the taskset's prompts and the episodes)."""
    options = {k: getattr(config, k) for k in ("suite", "max_turns", "target_speedup", "device", "backend", "reward",
                                               "rules", "format", "dtype") if getattr(config, k) is not None}
    if config.url is not None:
        return shared_source(url=config.url, token=os.environ.get(config.token_var), **options)
    return shared_source(**options, **config.evaluator)


class KBenchTask(vf.Task[vf.TaskData, vf.State, vf.TaskConfig]):
    """One kernel task; ``data.name`` is its name in the suite. Scored by ``KBenchVerifiersEnv.run``."""

    @property
    def key(self) -> str:
        return self.data.name or self.hash


class KBenchTaskset(vf.Taskset[KBenchTask, KBenchTasksetConfig]):
    def load(self):
        source = env_source(self.config)
        for name in source.task_names(self.config.tasks):
            data = vf.TaskData(id=name, name=name, prompt=source.prompt(name), system_prompt=SYSTEM_PROMPT)
            yield KBenchTask(data, self.config.task)


class KBenchVerifiersEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The policy's seat (``--env.agent.*``); its harness runs no code, so the local runtime suffices."""


class KBenchVerifiersEnv(vf.Env[KBenchVerifiersEnvConfig]):
    """Steps ``KBench-v0`` with each reply of the agent until the env ends the episode (module docstring)."""

    async def run(self, task: KBenchTask, agents: vf.Agents) -> None:
        config = self.taskset.config
        episode = await asyncio.to_thread(Episode, env_source(config), task.data.name)
        try:
            await asyncio.to_thread(episode.reset)
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn()  # the task's prompt speaks first
                while not segment.terminated:
                    step = await asyncio.to_thread(episode.step, segment.last_reply)
                    trace = interaction.trace
                    trace.record_reward("kbench", episode.reward(config.episode_reward, config.turn_cost))
                    trace.record_metric(f"turn_{len(episode.turn_rewards)}_reward", step.reward)
                    trace.record_metrics(episode.metrics())
                    if step.done:
                        break
                    segment = await interaction.turn(step.observation)
        finally:
            await asyncio.to_thread(episode.close)


class KBenchChatHarnessConfig(vf.HarnessConfig):
    timeout: float | None = None
    """Seconds a model call may take (None: the rollout's own timeout bounds it)."""


class KBenchChatHarness(vf.Harness[KBenchChatHarnessConfig]):
    """A tool-less chat turn in this process: the conversation so far, one completion, through the rollout's
    interception endpoint (``Harness.launch`` allows a loop in-process when every model call goes there)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # each later turn relaunches on the whole conversation (Harness.resume)
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        timeout = httpx.Timeout(self.config.timeout, connect=30.0)
        try:
            async with httpx.AsyncClient(timeout=timeout) as http:
                answer = await http.post(f"{endpoint.rstrip('/')}/chat/completions",
                                         headers={"Authorization": f"Bearer {secret}"},
                                         json={"model": ctx.model, "messages": messages})
        except httpx.HTTPError as exc:
            return vf.ProgramResult(MODEL_TRANSPORT_ERROR_EXIT_CODE, "", f"{type(exc).__name__}: {exc}")
        if answer.status_code >= 400:
            return vf.ProgramResult(1, "", f"model call answered {answer.status_code}: {answer.text[-2000:]}")
        return vf.ProgramResult(0, "", "")


def load_environment(**options) -> KBenchVerifiersEnv:
    """The kbench environment with ``options``: ``KBenchTasksetConfig``'s fields (``suite``, ``tasks``, ``url``,
    ``max_turns``, ...) and the env config's (``agent={...}``), as ``vf.load_environment`` builds it for
    ``vf eval kbench-verifiers``."""
    env_fields = {k: options.pop(k) for k in list(options) if k in KBenchVerifiersEnvConfig.model_fields}
    taskset = {**env_fields.pop("taskset", {}), **options, "id": TASKSET_ID}
    return vf.load_environment(vf.resolve_env_config({**env_fields, "taskset": taskset}))

"""``KBench-v0`` as a NovaSky SkyRL-gym text environment (skyrl-gym 0.4): importing this module registers it in
skyrl-gym's registry as ``"kbench"`` (``skyrl_gym.make("kbench", env_config=..., extras=...)``).

SkyRL's generator makes one env per trajectory with ``env_config`` (the trainer's ``skyrl_gym.kbench`` config
block) and ``extras`` (the dataset row's other columns, plus the generator's ``max_turns``), calls
``init(prompt)`` with the row's chat messages, then ``step(reply)`` with each model reply until ``done``:

- ``extras``: ``task`` (a task name, e.g. "level1/relu"; or ``extra_info.task``) and ``max_turns`` (attempts);
  ``skyrl_rows`` makes such rows, the prompt being what ``KBench-v0``'s ``reset`` shows under the system prompt
  GRPO training uses.
- ``env_config``: where and how to evaluate: ``url`` and ``token`` of a ``kbench serve`` server (token default
  ``$KBENCH_TOKEN``), or in this process the ``gym.make("KBench-v0", ...)`` arguments (``device``, ``reward``,
  ``rules``, ``suite``, ``timing``, ...), every env of the process sharing one Evaluator; ``target_speedup``;
  ``episode_reward``: None (default) pays each step the env's reward for that attempt (SkyRL places it at the
  turn's last token), "best" or "last" pays 0 until the last step and then ``episode_reward`` over the turns (as
  GRPO training pays), with ``turn_cost``.
- ``step`` returns the observation text as the next user message (none once done), the reward, ``done`` when the
  env terminates or truncates the episode, and ``metadata`` without the researcher's record (no held-out data).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import register, registry

from kbench_apps.integrations.episode import SYSTEM_PROMPT, Episode, shared_source
from kbench_env.pipeline.reward import EPISODE_REWARDS

ENV_ID = "kbench"
#: ``env_config`` keys the adapter reads itself; the others are ``gym.make("KBench-v0", ...)`` arguments.
ADAPTER_OPTIONS = ("episode_reward", "turn_cost", "max_turns")

__all__ = ["ENV_ID", "KBenchTextEnv", "skyrl_rows"]


def _plain(config: Any) -> dict:
    if config is None:
        return {}
    if isinstance(config, DictConfig):
        return OmegaConf.to_container(config, resolve=True)
    return dict(config)


class KBenchTextEnv(BaseTextEnv):
    """One KBench-v0 episode per SkyRL trajectory (see the module docstring)."""

    def __init__(self, env_config: Any = None, extras: dict | None = None):
        super().__init__()
        options, extras = _plain(env_config), dict(extras or {})
        adapter = {k: options.pop(k) for k in ADAPTER_OPTIONS if k in options}
        self.task = extras.get("task") or (extras.get("extra_info") or {}).get("task")
        if not self.task:
            raise ValueError("a kbench row names its task: a 'task' column (or extra_info.task), e.g. 'level1/relu'")
        self.max_turns = int(extras.get("max_turns") or adapter.get("max_turns") or 4)
        self.mode = adapter.get("episode_reward")
        if self.mode not in (None, *EPISODE_REWARDS):
            raise ValueError(f"episode_reward must be None or one of {EPISODE_REWARDS}, got {self.mode!r}")
        self.turn_cost = float(adapter.get("turn_cost", 0.02))
        self.episode = Episode(shared_source(**options), self.task, max_turns=self.max_turns)

    def init(self, prompt):
        """Starts the episode on the row's task; the row's messages are the prompt."""
        self.episode.reset()
        self.turns = 0
        return prompt, {"task": self.task}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        step = self.episode.step(action)
        self.turns += 1
        reward = step.reward
        if self.mode is not None:
            reward = self.episode.reward(self.mode, self.turn_cost) if step.done else 0.0
        observations = [] if step.done else [{"role": "user", "content": step.observation}]
        metadata = {**step.info, "turn_reward": step.reward, "terminated": step.terminated,
                    "truncated": step.truncated}
        return BaseTextEnvStepOutput(observations=observations, reward=reward, done=step.done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return self.episode.metrics()

    def close(self):
        self.episode.close()


def skyrl_rows(tasks: list[str] | None = None, **env_config) -> list[dict]:
    """Dataset rows for SkyRL (write them to parquet): ``prompt`` (the system prompt and what ``reset`` shows for
    the task), ``env_class`` ("kbench") and ``task``; ``env_config`` as the trainer's (to reach the same prompts),
    ``tasks`` default the suite's."""
    options = {k: v for k, v in _plain(env_config).items() if k not in ADAPTER_OPTIONS}
    source = shared_source(**options)
    return [{"prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": source.prompt(t)}],
             "env_class": ENV_ID, "task": t} for t in source.task_names(tasks)]


if ENV_ID not in registry:
    register(id=ENV_ID, entry_point=f"{__name__}:KBenchTextEnv")

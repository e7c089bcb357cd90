"""``KBench-v0`` episodes as a verl multi-turn interaction: each attempt of the policy is one ``env.step``; the env's
observation (the compile error, the first mismatching configuration, the timing table; held-out configurations
hidden) is the next user message and the env's reward the turn's score.

``KBenchInteraction`` has the interface of verl's ``verl.interactions.base.BaseInteraction`` (verl 0.4 to 0.7.1,
and subclasses it where that exists), all coroutines, as verl's ``ToolAgentLoop`` calls them:

- ``start_interaction(instance_id, **interaction_kwargs) -> instance_id``: ``interaction_kwargs`` is the row's
  ``extra_info["interaction_kwargs"]`` (``verl_data`` writes ``{"name": "kbench", "task": <name>, "kbench":
  <prompt settings>}``); it opens one ``KBenchEnv`` episode on that task.
- ``generate_response(instance_id, messages, **interaction_kwargs) -> (done, feedback, turn_reward, info)``: the
  last assistant message is the attempt; ``done`` when the env terminates (``target_speedup`` reached) or
  truncates (``max_turns`` attempts).
- ``calculate_score(instance_id) -> float``: the episode's reward so far (``kbench_env.pipeline.reward
  .episode_reward``): the best turn's env reward minus ``turn_cost`` per turn after the first (``mode="last"``:
  the last turn's).
- ``finalize_interaction(instance_id)``: forgets the episode.

verl passes the turns' rewards to the reward function as ``extra_info["turn_scores"]``; ``verl_reward.compute_score``
then pays the episode's reward without evaluating again. Interaction config (verl <= 0.7.1;
``actor_rollout_ref.rollout.multi_turn.enable=True``, ``multi_turn.interaction_config_path=<this file>``,
``rollout.agent.default_agent_loop=tool_agent``)::

    interaction:
      - name: kbench
        class_name: kbench_apps.integrations.verl_interaction.KBenchInteraction
        config: {max_turns: 4, turn_cost: 0.02, url: "http://gpu-host:8000"}   # or device: cuda

The ``config`` keys: ``max_turns``, ``target_speedup``, ``mode`` ("best"/"last"), ``turn_cost``,
``max_feedback_chars``, and ``verl_reward``'s evaluator options (``url``, ``token``, ``factory``, ``device``,
``backend``, ``reward``, ``rules``, ``format``). verl 0.8 and later have no interactions: there
``verl_agent_loop.KBenchAgentLoop`` runs the same episodes through this class.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

from kbench_apps.integrations.verl_reward import OPTIONS, evaluator_for, local_task, sample_options, score_of
from kbench_env.env.env import KBenchEnv
from kbench_env.pipeline.reward import EPISODE_REWARDS, episode_reward

try:  # verl <= 0.7.1 has the base class; later releases have none, and the interface is the same without it
    from verl.interactions.base import BaseInteraction
except ImportError:
    class BaseInteraction:
        def __init__(self, config: dict[str, Any]):
            self.config = config
            self.name: str = config.get("name", "interaction_agent")

#: the interaction's own config keys, with their defaults (the others are verl_reward's options)
EPISODE_DEFAULTS = {"max_turns": 4, "target_speedup": None, "mode": "best", "turn_cost": 0.02,
                    "max_feedback_chars": 4000}


def clip_feedback(text: str, max_chars: int | None) -> str:
    """Keep the head (the error or the table) and the last line (the env's request for the next attempt)."""
    if not max_chars or len(text) <= max_chars:
        return text
    head, _, last = text.rpartition("\n")
    return head[: max(0, max_chars - len(last) - 40)] + "\n... (feedback cut)\n" + last


def message_text(message: dict) -> str:
    """A chat message's text (plain content, or the text parts of content blocks)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


class KBenchInteraction(BaseInteraction):
    """One ``KBenchEnv`` episode per ``instance_id`` (see the module docstring); all episodes of a process share
    one evaluator per setting (``verl_reward.evaluator_for``)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        cfg = {**EPISODE_DEFAULTS, **dict(config)}
        unknown = set(cfg) - set(EPISODE_DEFAULTS) - set(OPTIONS) - {"name"}
        if unknown:
            raise ValueError(f"KBenchInteraction: unknown config key(s) {sorted(unknown)}")
        if int(cfg["max_turns"]) < 1 or cfg["mode"] not in EPISODE_REWARDS:
            raise ValueError(f"max_turns must be at least 1 and mode one of {EPISODE_REWARDS}")
        self.max_turns, self.mode = int(cfg["max_turns"]), cfg["mode"]
        self.turn_cost, self.target_speedup = float(cfg["turn_cost"]), cfg["target_speedup"]
        self.max_feedback_chars = cfg["max_feedback_chars"]
        self.options = {k: v for k, v in cfg.items() if k in OPTIONS and k not in ("mode", "turn_cost")}
        self._episodes: dict[str, KBenchEnv] = {}

    async def start_interaction(self, instance_id: str | None = None, task: str | None = None,
                                ground_truth: str | None = None, kbench: dict | None = None, **kwargs) -> str:
        """Open an episode on ``task`` (or ``ground_truth``: the task's name); ``kbench``: the prompt's settings."""
        name = task or ground_truth
        if not name:
            raise ValueError("KBenchInteraction needs the task's name: interaction_kwargs['task'] (verl_data "
                             "writes it)")
        instance_id = instance_id or uuid4().hex
        options = sample_options({"kbench": kbench}, self.options)
        env = await asyncio.to_thread(self._open, str(name), options)
        self._episodes[instance_id] = env
        return instance_id

    def _open(self, name: str, options: dict) -> KBenchEnv:
        evaluator = evaluator_for(options)
        task = local_task(name, options.get("dtype"), options.get("suite"))
        env = KBenchEnv(task=task, evaluator=evaluator, max_turns=self.max_turns, target_speedup=self.target_speedup)
        env.reset()
        return env

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]],
                                **kwargs) -> tuple[bool, str, float, dict[str, Any]]:
        """Evaluate the last assistant message as the next attempt: ``(done, feedback, env reward, info)``."""
        env = self._episode(instance_id)
        replies = [m for m in messages if m.get("role") == "assistant"]
        attempt = message_text(replies[-1]) if replies else ""
        obs, reward, terminated, truncated, info = await asyncio.to_thread(env.step, attempt)
        result = info["eval"]
        summary = {"turn": env.turn, "correct": bool(result["correct"]), "speedup": result["speedup"],
                   "stage": result["stage"]}
        return bool(terminated or truncated), clip_feedback(obs, self.max_feedback_chars), float(reward), summary

    async def calculate_score(self, instance_id: str | None = None, **kwargs) -> float:
        """The episode's reward so far (0.0 before its first attempt)."""
        rewards = self.turn_rewards(instance_id)
        return episode_reward(rewards, self.mode, self.turn_cost) if rewards else 0.0

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs) -> None:
        env = self._episodes.pop(instance_id, None)
        if env is not None:
            env.close()  # the evaluator is shared and stays open

    # ------------------------------------------------------------------ helpers
    def turn_rewards(self, instance_id: str | None) -> list[float]:
        """The env's reward of each attempt of the episode so far."""
        return [float(r.reward) for r in self._episode(instance_id).history]

    def episode_summary(self, instance_id: str | None) -> dict:
        """The episode as a score dict (``verl_reward.SCORE_KEYS``): the figures of its best turn (``mode="last"``:
        its last), the episode's reward as ``score``."""
        history = self._episode(instance_id).history
        if not history:
            raise ValueError(f"episode {instance_id!r} has no attempt yet")
        turn = max(history, key=lambda r: r.reward) if self.mode == "best" else history[-1]
        rewards = [float(r.reward) for r in history]
        return {**score_of(turn), "score": episode_reward(rewards, self.mode, self.turn_cost)}

    def _episode(self, instance_id: str | None) -> KBenchEnv:
        if instance_id is None and len(self._episodes) == 1:
            return next(iter(self._episodes.values()))
        try:
            return self._episodes[instance_id]
        except KeyError:
            raise KeyError(f"no open kbench episode {instance_id!r}: call start_interaction first") from None

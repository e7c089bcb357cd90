"""``KBench-v0`` episodes as a verl agent loop (verl 0.8 and later, which run multi-turn rollouts as agent loops and
have no interactions); imported by verl, it imports verl.

Each trajectory is one episode of ``verl_interaction.KBenchInteraction``: the policy writes an attempt, the env
evaluates it, its observation text comes back as the next user message, up to ``max_turns`` attempts or until the
env ends the episode (``target_speedup``) or the response budget (``rollout.response_length``) has no room left.
Attempt tokens are kept as sampled (mask 1); the feedback's tokens, rendered by the model's chat template through
verl's Continuous Token builder, are masked out (0). The trajectory's ``reward_score`` is the episode's reward (the
best turn's env reward minus ``turn_cost`` per turn after the first; ``mode: last`` for the last turn's), so verl
calls no reward function for it; the turns' rewards are in ``extra_fields["turn_scores"]`` and the episode's
summary in ``reward_extra_info`` (``verl_reward.SCORE_KEYS``).

verl's agent-loop contract used (verl 0.9.1, ``verl/experimental/agent_loop/``): the class is built per trajectory
by ``hydra.utils.instantiate`` from the entry of ``rollout.agent.agent_loop_config_path`` named by the row's
``agent_name`` or ``rollout.agent.default_agent_loop``, the entry's other keys as keyword arguments;
``run(sampling_params, **row)`` gets the row's columns (``raw_prompt``, ``interaction_kwargs`` lifted from
``extra_info``) and returns an ``AgentLoopOutput``. Config (Hydra overrides and the YAML file)::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=kbench_agent_loop.yaml
    actor_rollout_ref.rollout.agent.default_agent_loop=kbench

    # kbench_agent_loop.yaml
    - name: kbench
      _target_: kbench_apps.integrations.verl_agent_loop.KBenchAgentLoop
      max_turns: 4
      url: http://gpu-host:8000      # or device: cuda; any KBenchInteraction config key
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.utils.profiler import simple_timer

from kbench_apps.integrations.verl_interaction import EPISODE_DEFAULTS, KBenchInteraction
from kbench_apps.integrations.verl_reward import OPTIONS


class KBenchAgentLoop(AgentLoopBase):
    """One KBench-v0 episode per trajectory (see the module docstring). Keyword arguments beyond verl's are
    ``KBenchInteraction``'s config keys."""

    def __init__(self, *args, **kwargs):
        own = {k: kwargs.pop(k) for k in list(kwargs) if k in EPISODE_DEFAULTS or k in OPTIONS}
        super().__init__(*args, **kwargs)
        self.interaction = KBenchInteraction({"name": "kbench", **own})
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        first = len(messages)
        episode_kwargs = dict(kwargs.get("interaction_kwargs") or {})
        episode_kwargs.setdefault("task", (kwargs.get("reward_model") or {}).get("ground_truth"))
        instance = await self.interaction.start_interaction(None, **episode_kwargs)
        metrics: dict[str, Any] = {}
        try:
            ids, mask, logprobs = await self._episode(instance, messages, sampling_params, metrics)
            score = await self.interaction.calculate_score(instance)
            turns = self.interaction.turn_rewards(instance)
            summary = self.interaction.episode_summary(instance)
        finally:
            await self.interaction.finalize_interaction(instance)
        n = len(ids) - len(mask)
        return AgentLoopOutput(
            prompt_ids=ids[:n], response_ids=ids[n:][: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            num_turns=len(messages) - first + 1, metrics=metrics, reward_score=score,
            extra_fields={"turn_scores": turns, "tool_rewards": [], "reward_extra_info": summary})

    async def _episode(self, instance: str, messages: list, sampling_params: dict, metrics: dict):
        """Generate and evaluate attempts until the episode or the response budget ends: ``(token ids of prompt
        and response, response mask, response log-probabilities or None)``."""
        ids = await self.ct_build_initial_tokens(messages)
        mask: list[int] = []
        logprobs: list[float] | None = None
        request_id = uuid4().hex  # one id per trajectory: the server may keep its prefix between turns
        while True:
            with simple_timer("generate_sequences", metrics):
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                         sampling_params=sampling_params)
            if out.log_probs and logprobs is None:
                logprobs = [0.0] * len(mask)
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                ids, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs if logprobs is not None else None)
            ids = merged.token_ids
            text = await self.loop.run_in_executor(
                None, lambda: self.tokenizer.decode(out.token_ids, skip_special_tokens=True))
            messages.append({"role": "assistant", "content": text})
            with simple_timer("tool_calls", metrics):  # the env's evaluation shows as verl's tool time
                done, feedback, _, _ = await self.interaction.generate_response(instance, messages)
            if done or len(mask) >= self.response_length:
                return ids, mask, logprobs
            previous = list(messages)
            messages.append({"role": "user", "content": feedback})
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(previous, messages, ids, mask, logprobs)
            if len(new_mask) >= self.response_length:  # no room for another attempt
                return ids, mask, logprobs
            ids, mask, logprobs = merged.token_ids, new_mask, new_logprobs

"""Baseline LLM agents, with the same interface as the evolutionary agent (``name``, ``has_solution``,
``run_episode(env, task, seed)`` yielding ``(turn, info)``):

- ``SingleShotAgent``: one completion for the task prompt, one ``env.step`` (KernelBench's protocol).
- ``BestOfNAgent``: ``n`` independent samples for the same prompt, evaluated as one batch with
  ``Evaluator.evaluate_many``; the best one counts.
- ``IterativeRefinementAgent``: a multi-turn conversation through ``env.step`` (Kevin-32B style): each turn the
  model sees its previous answers and the environment's feedback (compile error, first mismatch, timing table)
  and writes an improved kernel. Only the last ``history_turns`` exchanges are kept in the context.

All three take a ``kbench_agents.llm`` client; ``kbench_agents.llm.OfflineClient`` drives them without a model.
"""

from __future__ import annotations

from kbench_env.env.prompt import SYSTEM_PROMPT
from kbench_env.pipeline.screen import ScreenError, extract_source

from . import prompts


def _source(reply: str | None) -> str:
    if not reply:
        return ""
    try:
        return extract_source(reply)
    except ScreenError:
        return reply


def _with(info: dict, **extra) -> dict:
    out = dict(info)
    out.update(extra)
    return out


class _LLMAgent:
    kind = "?"

    def __init__(self, client, temperature: float | None = None, max_tokens: int | None = None,
                 name: str | None = None):
        self.client = client
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.name = name or f"{self.kind}[{client.model}]"

    def has_solution(self, task) -> bool:
        return True

    def usage(self) -> dict | None:
        return self.client.snapshot().to_dict()

    def _complete(self, messages, seed=None) -> str:
        from .llm import LLMError

        try:
            return self.client.complete(messages, temperature=self.temperature, max_tokens=self.max_tokens,
                                        seed=seed)
        except LLMError as exc:  # the failed request is the attempt: the env answers it as an invalid action
            return f"(no answer: {exc})"


class SingleShotAgent(_LLMAgent):
    """One sample, one evaluation."""

    kind = "single_shot"

    def run_episode(self, env, task, seed: int | None = None, resume: list[dict] | None = None):
        if resume:
            return
        prompt, _ = env.reset(seed=seed, options={"task": task})
        reply = self._complete([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
                               seed=seed)
        _, _, _, _, info = env.step(reply)
        yield 1, _with(info, source=_source(reply), origin="sample")
        return "a single-shot agent makes one attempt"


class BestOfNAgent(_LLMAgent):
    """``n`` samples of the same prompt, evaluated in parallel (``eval_workers``) as one batch."""

    kind = "best_of_n"

    def __init__(self, client, n: int = 4, eval_workers: int | None = None, **kwargs):
        super().__init__(client, **kwargs)
        self.n = n
        self.eval_workers = eval_workers

    def run_episode(self, env, task, seed: int | None = None, resume: list[dict] | None = None):
        prompt, _ = env.reset(seed=seed, options={"task": task})
        evaluator = env.unwrapped.evaluator
        done = len(resume or [])
        n = max(0, self.n - done)
        if not n:
            return
        msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        replies = self.client.complete_many([msgs] * n, temperature=self.temperature, max_tokens=self.max_tokens,
                                            seed=(seed or 0) * 1000 + done)
        actions = [r or "(no answer)" for r in replies]
        results = evaluator.evaluate_many([(env.unwrapped.task, a) for a in actions], max_workers=self.eval_workers)
        best = None
        for i, (a, r) in enumerate(zip(actions, results)):
            if r.correct and r.speedup is not None and not r.integrity_flags:
                best = max(best or 0.0, r.speedup)
            yield done + i + 1, {"task": env.unwrapped.task.name, "turn": done + i + 1, "eval": r.to_dict(),
                                 "best_speedup": best, "source": _source(a), "origin": "sample"}


class IterativeRefinementAgent(_LLMAgent):
    """Multi-turn refinement through ``env.step`` with the environment's feedback (Kevin-32B style).

    Args:
        turns: attempts per episode (``kbench run`` sets it to the budget).
        history_turns: previous (answer, feedback) exchanges kept in the conversation.
    """

    kind = "refine"

    def __init__(self, client, turns: int = 4, history_turns: int = 2, **kwargs):
        super().__init__(client, **kwargs)
        self.turns = turns
        self.history_turns = history_turns

    def run_episode(self, env, task, seed: int | None = None, resume: list[dict] | None = None):
        prompt, _ = env.reset(seed=seed, options={"task": task})
        system = {"role": "system", "content": SYSTEM_PROMPT}
        first = {"role": "user", "content": prompt}
        exchanges: list[tuple[str, str]] = []  # (answer, next user turn)
        turn = 0
        for rec in resume or []:  # an interrupted episode: its answers and feedback rejoin the conversation
            if rec.get("source") and rec.get("eval"):
                turn += 1
                fb = prompts.summarize_feedback(rec["eval"])
                exchanges.append((f"```python\n{rec['source']}\n```", prompts.refine_user_turn(fb, turn, self.turns)))
        while turn < self.turns:
            turn += 1
            msgs = [system, first]
            for answer, user in exchanges[-self.history_turns:] if self.history_turns else []:
                msgs += [{"role": "assistant", "content": answer}, {"role": "user", "content": user}]
            reply = self._complete(msgs, seed=None if seed is None else seed * 1000 + turn)
            obs, _, terminated, _, info = env.step(reply)
            src = _source(reply)
            yield turn, _with(info, turn=turn, source=src, origin="refine")
            if terminated:
                return f"the environment ended the episode after attempt {turn} (target speedup reached)"
            exchanges.append((f"```python\n{src}\n```", prompts.refine_user_turn(obs, turn, self.turns)))


def make_baseline(kind: str, client, budget: int = 4, **kwargs):
    """``"single_shot"``, ``"best_of_n"`` (n = budget) or ``"refine"`` (turns = budget)."""
    if kind == "single_shot":
        return SingleShotAgent(client, **kwargs)
    if kind == "best_of_n":
        return BestOfNAgent(client, n=budget, **kwargs)
    if kind == "refine":
        return IterativeRefinementAgent(client, turns=budget, **kwargs)
    raise ValueError(f"unknown baseline {kind!r}: single_shot, best_of_n or refine")


__all__ = ["SingleShotAgent", "BestOfNAgent", "IterativeRefinementAgent", "make_baseline"]

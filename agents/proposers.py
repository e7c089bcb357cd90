"""The proposers of the evolutionary agent (``kbench_agents.evolutionary``): what writes its candidates, and what a
proposer may look at (``EpisodeContext``).

- ``OfflineProposer``: no model; the shipped solution as the first kernel, then moves among its ``kbench-tune``
  values (``kbench_agents.tunables``).
- ``LLMProposer``: candidates written by a language model from the policy's view of the parents' feedback
  (``kbench_agents.prompts``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kbench_env.pipeline.screen import ScreenError, extract_source
from kbench_env.tasks.suite import solution_path

from . import prompts, tunables


@dataclass
class EpisodeContext:
    """What a proposer may look at: the task, its prompt, the rng and what has been proposed already."""

    task: object
    prompt: str
    backend: str
    rng: random.Random
    seen_sources: set = field(default_factory=set)
    seen_genomes: set = field(default_factory=set)
    best_speedup: float | None = None


# ====================================================================== proposers
class OfflineProposer:
    """No model: the shipped solution as the first kernel, then moves among its ``kbench-tune`` values.

    Args:
        backend: which shipped solutions to start from (``tasks/solutions/<backend>/``).
        format: the action format they must be written in (the fast format's are under ``fast_<backend>/``).
        solutions: ``{task name: source}`` starting points that override the shipped files.
        neighbour_bias: probability that a mutation moves a value to an adjacent entry of its list.
    """

    name = "offline"

    def __init__(self, backend: str = "cpu", solutions: dict | None = None, neighbour_bias: float = 0.7,
                 format: str = "kernelbench"):
        self.backend, self.format = backend, format
        self.solutions = dict(solutions or {})
        self.neighbour_bias = neighbour_bias

    def start_source(self, task) -> str | None:
        if task.name in self.solutions:
            return self.solutions[task.name]
        p = solution_path(task, self.backend, self.format)
        return p.read_text() if p is not None else None

    def has_start(self, task) -> bool:
        return self.start_source(task) is not None

    def translate(self, ctx: EpisodeContext, failures: list[str], n: int) -> list[str]:
        if failures:  # the one starting point failed: there is nothing else to translate from
            return []
        src = self.start_source(ctx.task)
        return [src] if src else []

    def propose(self, ctx: EpisodeContext, requests: list[tuple]) -> list[str | None]:
        out = []
        for req in requests:
            if req[0] == "crossover":
                child = tunables.crossover(req[1].source, req[2].source, ctx.rng, ctx.seen_genomes)
                if child is None:  # parents too alike: mutate the better one instead
                    child = tunables.mutate(req[1].source, ctx.rng, ctx.seen_genomes, self.neighbour_bias)
            else:
                child = tunables.mutate(req[1].source, ctx.rng, ctx.seen_genomes, self.neighbour_bias)
            if child is not None:
                ctx.seen_genomes.add(tunables.key_of(child))
            out.append(child)
        return out

    def usage(self) -> dict | None:
        return None


class LLMProposer:
    """Candidates written by a language model (any ``kbench_agents.llm.LLMClient``).

    Args:
        client: the LLM client.
        temperature: sampling temperature for new candidates.
        max_tokens: completion limit per candidate.
    """

    name = "llm"

    def __init__(self, client, temperature: float = 0.8, max_tokens: int | None = None):
        self.client = client
        self.temperature = temperature
        self.max_tokens = max_tokens

    def has_start(self, task) -> bool:
        return True

    def _ask(self, batch: list[list[dict]], ctx: EpisodeContext) -> list[str | None]:
        replies = self.client.complete_many(batch, temperature=self.temperature, max_tokens=self.max_tokens,
                                            seed=ctx.rng.randrange(2**31))
        out = []
        for r in replies:
            try:
                out.append(extract_source(r) if r else None)
            except ScreenError:
                out.append(None)
        return out

    def translate(self, ctx: EpisodeContext, failures: list[str], n: int) -> list[str]:
        msgs = prompts.translate_messages(ctx.prompt, failures)
        return [s for s in self._ask([msgs] * n, ctx) if s]

    def propose(self, ctx: EpisodeContext, requests: list[tuple]) -> list[str | None]:
        batch = []
        for req in requests:
            if req[0] == "crossover":
                a, b = req[1], req[2]
                batch.append(prompts.crossover_messages(ctx.prompt, a.source, a.feedback, b.source, b.feedback))
            else:
                p = req[1]
                batch.append(prompts.mutate_messages(ctx.prompt, p.source, p.feedback, p.valid, ctx.best_speedup))
        return self._ask(batch, ctx)

    def usage(self) -> dict | None:
        return self.client.snapshot().to_dict()

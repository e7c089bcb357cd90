"""The evolutionary kernel agent: translate the PyTorch program to a first kernel, then evolve a population.

Stages of one episode (one task):

1. **Translation.** The proposer writes first kernels from the task prompt (the env's ``reset`` observation). A
   failed batch is retried with short summaries of its errors in the prompt, up to ``translate_retries`` times.
2. **Evolution.** Until the budget (``budget`` evaluations, ``time_budget_s`` seconds) is spent: pick parents by
   tournament over the population (correct and fast first, then by reward), ask the proposer for a batch of
   children (mutation of one parent with its feedback, or crossover of two), drop duplicates, optionally drop the
   ones a soft verifier predicts to fail (``kbench_agents.soft_verify``), evaluate the batch in parallel with
   ``Evaluator.evaluate_many`` and keep the ``population_size`` fittest. The archive keeps the best per task.

Proposers (``kbench_agents.proposers``): ``LLMProposer`` (any ``kbench_agents.llm`` client; mutation and crossover prompts hold
the parents' code and the policy's view of their feedback: compile errors, mismatches, timings, integrity flags,
held-out configurations only as "held-out configuration k of n") and ``OfflineProposer`` (no model: starts from the
suite's shipped solution and changes the constants marked ``// kbench-tune: v1 v2 ...``, see ``kbench_agents.tunables``).

The agent talks to the environment through ``env.reset`` (the prompt) and ``env.unwrapped.evaluator``'s
``evaluate_many`` only. ``run_episode`` yields ``(turn, info)`` per evaluated candidate, with ``info["eval"]`` the
EvalResult dict, plus ``source``, ``origin``, ``parents``, ``candidate``, ``generation`` and ``verifier``; a
candidate the verifier filtered out is yielded with ``info["eval"] = None`` and ``info["filtered"] = True``. It
returns why it stopped short of its budget, if it did (``kbench run`` notes it).
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass

from . import prompts, tunables
from .proposers import EpisodeContext, LLMProposer, OfflineProposer


# ====================================================================== candidates and archive
@dataclass
class Candidate:
    id: int
    source: str
    origin: str  # "translate", "start", "mutate", "crossover", "resume"
    parents: tuple = ()
    generation: int = 0
    eval: dict | None = None
    verifier: dict | None = None

    @property
    def valid(self) -> bool:
        e = self.eval or {}
        return bool(e.get("correct")) and not e.get("integrity_flags") and e.get("speedup") is not None

    @property
    def speedup(self) -> float | None:
        return self.eval.get("speedup") if self.valid else None

    @property
    def fitness(self) -> tuple:
        e = self.eval or {}
        return (1 if self.valid else 0, float(self.speedup or 0.0), float(e.get("reward") or -9.0))

    @property
    def feedback(self) -> str:
        return prompts.summarize_feedback(self.eval) if self.eval else "(not evaluated)"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()[:16]


class Archive:
    """Best valid candidate per task, over every episode this agent has played."""

    def __init__(self):
        self.best: dict[str, Candidate] = {}

    def offer(self, task: str, cand: Candidate) -> bool:
        cur = self.best.get(task)
        if cand.valid and (cur is None or cand.fitness > cur.fitness):
            self.best[task] = cand
            return True
        return False


class _Episode:
    """One episode's search state (population, counters, what was seen) and the steps that change it."""

    def __init__(self, agent: "EvolutionaryAgent", env, prompt: str, seed: int | None):
        self.agent, self.prompt = agent, prompt
        self.evaluator = env.unwrapped.evaluator
        self.task = env.unwrapped.task
        self.rng = random.Random(f"{agent.seed}:{seed}:{self.task.name}")
        self.ctx = EpisodeContext(task=self.task, prompt=prompt, backend=self.evaluator.backend_name, rng=self.rng)
        self.t0 = time.time()
        self.population: list[Candidate] = []
        self.state = {"evals": 0, "proposals": 0, "next_id": 0}
        self.max_proposals = agent.max_proposals or 4 * max(1, agent.budget)

    def left(self) -> int:
        """Evaluations the budget still allows (0 once the time budget is spent)."""
        a = self.agent
        if a.time_budget_s is not None and time.time() - self.t0 > a.time_budget_s:
            return 0
        return max(0, a.budget - self.state["evals"])

    def new(self, source, origin, parents=(), generation=0) -> Candidate:
        c = Candidate(id=self.state["next_id"], source=source, origin=origin, parents=tuple(p.id for p in parents),
                      generation=generation)
        self.state["next_id"] += 1
        self.ctx.seen_sources.add(source_hash(source))
        self.ctx.seen_genomes.add(tunables.key_of(source))
        return c

    def admit(self, c: Candidate) -> None:
        self.population.append(c)
        self.population.sort(key=lambda x: x.fitness, reverse=True)
        del self.population[self.agent.population_size:]
        if c.valid:
            self.ctx.best_speedup = max(self.ctx.best_speedup or 0.0, c.speedup)
            self.agent.archive.offer(self.task.name, c)

    def info(self, c: Candidate, audited=False) -> dict:
        return {"task": self.task.name, "turn": self.state["evals"], "eval": c.eval,
                "best_speedup": self.ctx.best_speedup, "source": c.source, "origin": c.origin,
                "parents": list(c.parents), "candidate": c.id, "generation": c.generation, "verifier": c.verifier,
                "audited": audited or None}

    def evaluate(self, cands: list[Candidate]):
        """Soft-verify, evaluate the survivors as one batch, yield every outcome."""
        verifier, keep, audited = self.agent.verifier, cands, set()
        if verifier is not None and cands:
            preds = verifier.predict_many(self.prompt, [c.source for c in cands])
            keep = []
            for c, p in zip(cands, preds):
                c.verifier = p
                go, audit = verifier.decide(p)
                if go:
                    keep.append(c)
                    if audit:
                        audited.add(c.id)
                else:
                    yield self.state["evals"], dict(self.info(c), filtered=True, eval=None)
        if not keep:
            return
        items = [(self.task, c.source) for c in keep]
        workers = self.agent.eval_workers  # None: the Evaluator's default (builds overlap, the device in turn)
        if hasattr(self.evaluator, "evaluate_iter"):  # the batch API, results as they finish (logged at once)
            arrivals = ((keep[i], r) for i, r in self.evaluator.evaluate_iter(items, max_workers=workers))
        else:
            arrivals = zip(keep, self.evaluator.evaluate_many(items, max_workers=workers))
        for c, r in arrivals:
            c.eval = r.to_dict()
            self.state["evals"] += 1
            self.admit(c)
            yield self.state["evals"], self.info(c, c.id in audited)


# ====================================================================== the agent
class EvolutionaryAgent:
    """Translation, then evolutionary search over kernels (see the module docstring).

    Args:
        proposer: ``OfflineProposer`` or ``LLMProposer``.
        budget: evaluations per task (translation included; resumed attempts count).
        time_budget_s: wall-clock seconds per task (None: no limit).
        population_size: survivors kept between generations.
        batch_size: children proposed and evaluated per generation.
        translate_batch: first kernels asked for per translation round.
        translate_retries: extra translation rounds (with error summaries) while nothing is correct.
        tournament_size: candidates drawn per parent tournament.
        crossover_rate: probability that a child comes from two parents.
        max_stalls: generations in a row that yield nothing new before the episode stops.
        eval_workers: candidates in flight at once in ``evaluate_many`` (default: the Evaluator's, which overlaps
            builds and takes the device one candidate at a time; 1 evaluates strictly one after another).
        verifier: a ``kbench_agents.soft_verify.SoftVerifier`` filtering children before evaluation (None: off).
        max_proposals: cap on proposals per task (filtered and duplicate ones included), default 4 x budget.
        seed: the search's own random seed (mixed with the episode seed and task name).
        name: the agent's name in results (default ``evolutionary-<proposer>``).
    """

    def __init__(self, proposer, budget: int = 4, time_budget_s: float | None = None, population_size: int = 4,
                 batch_size: int = 2, translate_batch: int = 1, translate_retries: int = 2, tournament_size: int = 2,
                 crossover_rate: float = 0.3, max_stalls: int = 3, eval_workers: int | None = None,
                 verifier=None, max_proposals: int | None = None, seed: int = 0, name: str | None = None):
        self.proposer = proposer
        self.budget = budget
        self.time_budget_s = time_budget_s
        self.population_size = population_size
        self.batch_size = max(1, batch_size)
        self.translate_batch = max(1, translate_batch)
        self.translate_retries = translate_retries
        self.tournament_size = max(1, tournament_size)
        self.crossover_rate = crossover_rate
        self.max_stalls = max_stalls
        self.eval_workers = eval_workers
        self.verifier = verifier
        self.max_proposals = max_proposals
        self.seed = seed
        self.name = name or f"evolutionary-{proposer.name}"
        self.archive = Archive()

    # ------------------------------------------------------------------ agent interface
    def has_solution(self, task) -> bool:
        return self.proposer.has_start(task)

    def usage(self) -> dict | None:
        return self.proposer.usage()

    def run_episode(self, env, task, seed: int | None = None, resume: list[dict] | None = None):
        """Search on ``task``; yields ``(turn, info)`` per evaluated (or filtered) candidate, and returns why it
        stopped short of its budget (None when the budget was spent).

        ``resume``: attempt records of an interrupted episode (with ``source`` and ``eval``); they rejoin the
        population and count against the budget without being evaluated again.
        """
        prompt, _ = env.reset(seed=seed, options={"task": task})
        ep = _Episode(self, env, prompt, seed)
        # -- resumed attempts rejoin the population
        translated = 0
        for rec in resume or []:
            if rec.get("source") and rec.get("eval"):
                c = ep.new(rec["source"], rec.get("origin") or "resume", generation=rec.get("generation") or 0)
                c.eval, c.verifier = rec["eval"], rec.get("verifier")
                ep.state["evals"] += 1
                translated += c.origin in ("translate", "start")
                ep.admit(c)
        yield from self._translate(ep, translated)
        stalls = yield from self._evolve(ep)
        return self._stop_reason(ep.state, ep.population, stalls, time.time() - ep.t0, ep.max_proposals)

    def _translate(self, ep: "_Episode", translated: int):
        """Stage 1: first kernels from the prompt, retried with the failures' summaries while none is valid;
        ``translated``: resumed attempts that were translations (they count against the rounds)."""
        failures: list[str] = [prompts.summarize_error(c.eval) for c in ep.population
                               if c.origin in ("translate", "start") and not c.valid]
        rounds = -(-translated // self.translate_batch)  # rounds the resumed records already used
        while not any(c.valid for c in ep.population) and ep.left() and rounds <= self.translate_retries:
            rounds += 1
            fresh = []
            for s in self.proposer.translate(ep.ctx, failures, min(self.translate_batch, ep.left())):
                ep.state["proposals"] += 1
                if source_hash(s) not in ep.ctx.seen_sources:
                    fresh.append(ep.new(s, "translate" if isinstance(self.proposer, LLMProposer) else "start"))
            if not fresh:
                break
            yield from ep.evaluate(fresh)
            failures += [prompts.summarize_error(c.eval) for c in fresh if c.eval and not c.valid]
            failures += [_predicted(c.verifier) for c in fresh if c.eval is None and c.verifier]

    def _evolve(self, ep: "_Episode"):
        """Stage 2: generations of children from tournament-picked parents until the budget, the proposal cap or
        ``max_stalls`` empty generations in a row; returns the stall count it ended on."""
        generation, stalls = 0, 0
        while ep.left() and ep.population and ep.state["proposals"] < ep.max_proposals and stalls < self.max_stalls:
            generation += 1
            requests = [self._request(ep.population, ep.rng) for _ in range(min(self.batch_size, ep.left()))]
            children = []
            for req, s in zip(requests, self.proposer.propose(ep.ctx, requests)):
                ep.state["proposals"] += 1
                if s is None or source_hash(s) in ep.ctx.seen_sources:
                    continue
                children.append(ep.new(s, req[0], req[1:], generation))
            if not children:
                stalls += 1
                continue
            stalls = 0
            yield from ep.evaluate(children)
        return stalls

    def _stop_reason(self, state: dict, population: list, stalls: int, seconds: float,
                     max_proposals: int) -> str | None:
        """Why an episode ended before its budget of evaluations (None: the budget was spent); ``kbench run``
        writes it in its table's note and the task's JSONL record."""
        if state["evals"] >= self.budget:
            return None
        if self.time_budget_s is not None and seconds > self.time_budget_s:
            return f"time budget of {self.time_budget_s:g} s spent"
        if not population:
            return "no first kernel to start from (none proposed, or every one filtered)"
        if stalls >= self.max_stalls:
            if isinstance(self.proposer, OfflineProposer):
                return "tuning space exhausted: every kbench-tune setting reachable was tried"
            return f"no new candidate in {stalls} rounds of proposals in a row"
        if state["proposals"] >= max_proposals:
            return f"proposal limit reached ({state['proposals']} proposals, duplicates and filtered ones included)"
        return "the search ended early"

    def _request(self, population: list[Candidate], rng: random.Random) -> tuple:
        def tournament() -> Candidate:
            picks = [population[rng.randrange(len(population))] for _ in range(self.tournament_size)]
            return max(picks, key=lambda c: c.fitness)

        a = tournament()
        if len(population) > 1 and rng.random() < self.crossover_rate:
            b = tournament()
            for _ in range(4):
                if b is not a:
                    break
                b = tournament()
            if b is not a:
                return ("crossover", a, b) if a.fitness >= b.fitness else ("crossover", b, a)
        return ("mutate", a)


def _predicted(verdict: dict) -> str:
    checks = [k for k in ("compile_error", "memory_error", "numerics_error") if verdict.get(k)]
    return f"a reviewer predicted {', '.join(checks) or 'a failure'}: {verdict.get('reason') or 'no reason given'}"


# ====================================================================== factories
def make_proposer(kind: str = "offline", backend: str = "cpu", client=None, format: str = "kernelbench",
                  **client_kwargs):
    """``"offline"`` or ``"llm"`` (with ``client``, or one built by ``kbench_agents.llm.make_client(**client_kwargs)``);
    ``format``: the action format (the LLM reads it in the env's prompt; the offline proposer picks its starts)."""
    if kind == "offline":
        return OfflineProposer(backend, format=format)
    if kind == "llm":
        if client is None:
            from .llm import make_client

            client = make_client(**client_kwargs)
        return LLMProposer(client)
    raise ValueError(f"unknown proposer {kind!r}: offline or llm")


def default_agent(backend: str = "cpu", budget: int = 4, proposer: str = "offline", client=None,
                  soft_verify: bool = False, seed: int = 0, format: str = "kernelbench",
                  **kwargs) -> EvolutionaryAgent:
    """The evolutionary agent ``kbench run`` uses: the offline proposer unless ``proposer="llm"``.

    ``kwargs`` go to ``EvolutionaryAgent`` (population_size, batch_size, time_budget_s, ...).
    """
    prop = make_proposer(proposer, backend, client=client, format=format)
    verifier = None
    if soft_verify:
        from .soft_verify import SoftVerifier

        vclient = getattr(prop, "client", None)
        if vclient is None:
            from .llm import OfflineClient

            vclient = OfflineClient()
        verifier = SoftVerifier(vclient, seed=seed)
    name = kwargs.pop("name", None)
    if name is None and proposer == "llm":
        name = f"evolutionary-llm[{prop.client.model}]"
    return EvolutionaryAgent(prop, budget=budget, verifier=verifier, seed=seed, name=name, **kwargs)


__all__ = ["EvolutionaryAgent", "OfflineProposer", "LLMProposer", "Candidate", "Archive", "EpisodeContext",
           "make_proposer", "default_agent"]

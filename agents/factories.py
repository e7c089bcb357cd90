"""The factories that register the shipped agents in the ``kbench.agents`` entry-point group (pyproject.toml).

``kbench run --agent NAME`` finds NAME in that group and calls its factory as ``factory(backend, options)``:
``backend`` is the evaluator's backend name, ``options`` the run's options (``kbench run``'s parsed arguments,
read by attribute, a missing or None attribute meaning the default; ``options`` itself may be None). An agent
from another package registers the same way in its own pyproject.toml::

    [project.entry-points."kbench.agents"]
    my_agent = "my_package.agent:make"
"""

from __future__ import annotations

from kbench_agents.baselines import make_baseline
from kbench_agents.evolutionary import default_agent
from kbench_agents.llm import LLMClient, make_client
from kbench_agents.shipped import ShippedSolutionAgent


def option(options, name: str, default=None):
    """``options.name``, or ``default`` where options lacks it or holds None."""
    value = getattr(options, name, None) if options is not None else None
    return default if value is None else value


def llm_client(options) -> LLMClient:
    """The LLM client the options describe (``--llm``, ``--llm-model``, ...)."""
    kind = option(options, "llm", "openai")
    common = dict(temperature=option(options, "llm_temperature", 0.7),
                  max_tokens=option(options, "llm_max_tokens", 4096),
                  max_concurrency=option(options, "llm_concurrency", 4), timeout=option(options, "llm_timeout", 300.0),
                  max_retries=option(options, "llm_retries", 3))
    if kind == "openai":
        return make_client("openai", base_url=option(options, "llm_base_url"), model=option(options, "llm_model"),
                           price_input_per_mtok=option(options, "llm_price_in", 0.0),
                           price_output_per_mtok=option(options, "llm_price_out", 0.0), **common)
    if kind == "transformers":
        path = option(options, "llm_path") or option(options, "llm_model")
        if not path:
            raise ValueError("--llm transformers needs --llm-path (a local model folder)")
        return make_client("transformers", model_path=path, **common)
    if kind == "offline":
        return make_client("offline", **common)
    raise ValueError(f"unknown --llm {kind!r}: openai, transformers or offline")


def shipped(backend: str, options=None) -> ShippedSolutionAgent:
    return ShippedSolutionAgent(backend, format=option(options, "format", "kernelbench"))


def evolutionary(backend: str, options=None):
    proposer = option(options, "proposer", "offline")
    client = llm_client(options) if proposer == "llm" else None
    return default_agent(backend, budget=option(options, "budget", 4), proposer=proposer, client=client,
                         seed=option(options, "seed", 0), soft_verify=bool(option(options, "soft_verify", False)),
                         format=option(options, "format", "kernelbench"), **_evolution_options(options))


def _evolution_options(options) -> dict:
    out = {}
    for name, kw in (("population", "population_size"), ("batch_size", "batch_size"),
                     ("time_budget", "time_budget_s"), ("workers", "eval_workers")):
        value = option(options, name)
        if value is not None:
            out[kw] = value
    return out


def single_shot(backend: str, options=None):
    return make_baseline("single_shot", llm_client(options), budget=option(options, "budget", 4))


def best_of_n(backend: str, options=None):
    return make_baseline("best_of_n", llm_client(options), budget=option(options, "budget", 4))


def refine(backend: str, options=None):
    return make_baseline("refine", llm_client(options), budget=option(options, "budget", 4))


__all__ = ["option", "llm_client", "shipped", "evolutionary", "single_shot", "best_of_n", "refine"]

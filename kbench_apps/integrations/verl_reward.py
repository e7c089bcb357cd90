"""``KBench-v0``'s reward as a verl custom reward function (``pip install kbench[verl]``; verl itself is not imported).

verl's contract, as verl 0.9.1 calls it (the files named are verl's):

- ``trainer/ppo/reward.py`` loads ``reward.custom_reward_function.{path,name}`` and merges its ``reward_kwargs``
  into every call. ``path=pkg://kbench_apps.integrations.verl_reward`` imports this module (one evaluator per
  process, kept between calls); a file path would load a fresh copy.
- Per sample (``experimental/reward_loop/reward_manager/naive.py``, the trainer's default, and the older
  ``workers/reward_manager/naive.py``): ``compute_score(data_source=, solution_str=, ground_truth=,
  extra_info=)``, ``extra_info`` being the row's ``extra_info`` plus ``num_turns``, ``rollout_reward_scores`` and
  the agent loop's extra fields (``turn_scores``); with a reward-model router also ``reward_router_address`` and
  ``reward_model_tokenizer`` (ignored here). The reward loop runs the samples of a batch at once, each call in a
  thread: ``Evaluator.evaluate`` is thread-safe, so their builds overlap as in ``evaluate_many``.
- Batched (``workers/reward_manager/batch.py``, ``reward_manager=batch``): ``compute_score(data_sources=,
  solution_strs=, ground_truths=, extra_infos=)`` with NumPy object arrays; the whole batch goes to one
  ``evaluate_many`` per evaluator.
- The answer: a float, or a dict with ``"score"`` whose other keys become ``reward_extra_info`` columns. verl takes
  the keys of the first sample for the batch (``experimental/agent_loop/agent_loop.py``), so every dict here has
  the same keys (``SCORE_KEYS``); ``acc`` is what verl's validation reports as accuracy (here: correct).

``ground_truth`` is the task's name; the sample's ``extra_info["kbench"]`` (written by ``verl_data``) says for
which device, backend, action format, rules and suite its prompt was written. Where the evaluation runs, first
that applies:

1. ``use_evaluator(evaluator)`` (a trainer that builds its own Evaluator or ``RemoteEvaluator``; this process only),
2. ``factory``: ``"module:function"``, called with the sample's options, returns an evaluator,
3. ``url``: a ``kbench serve --expose-info`` server (token from ``token`` or ``$KBENCH_TOKEN``),
4. an Evaluator in this process, made with the options ``device``, ``backend``, ``reward``, ``rules``, ``format``
   (by default the prompt's).

Options come from the call (verl's ``reward_kwargs``), else the environment (``$KBENCH_VERL_FACTORY``,
``$KBENCH_URL``), else the prompt's settings. Evaluators are made once per process and kept, in the adapters' one
cache (``episode.shared``): an in-process one is ``episode.shared_evaluator``, the Evaluator the other adapters'
shared sources with the same options use.

An evaluator whose device, backend, format or rules differ from what the prompt was written for raises
ValueError. An evaluation's failure is its result (a negative reward), never an exception; an unknown task raises.
A sample carrying an episode's per-turn env rewards (``extra_info["turn_scores"]``, from ``KBenchInteraction``)
was already evaluated turn by turn: its score is the episode's reward, nothing is evaluated again.

verl's config (Hydra overrides)::

    reward.custom_reward_function.path=pkg://kbench_apps.integrations.verl_reward
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://gpu-host:8000    # or .device=cuda (in-process)

verl calls this in its Ray workers: they see ``$KBENCH_TOKEN`` or ``$KBENCH_URL`` when given as
``+ray_kwargs.ray_init.runtime_env.env_vars.KBENCH_TOKEN=...`` (or pass ``token`` among the reward_kwargs).
Scoring in-process on the GPUs the trainer uses shares them with it (memory, and timing under load): a
``kbench serve`` on GPUs of their own is the setting for real runs.
"""

from __future__ import annotations

import functools
import importlib

from kbench_apps.integrations.episode import close_shared, shared, shared_evaluator
from kbench_env.config import environ
from kbench_env.machine.device import Device, resolve_device
from kbench_env.pipeline import formats
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.reward import episode_reward
from kbench_env.pipeline.rules import check_rules
from kbench_env.tasks.suite import resolve_task

#: keys of every score dict (verl reads the first sample's keys for the whole batch)
SCORE_KEYS = ("score", "acc", "compiled", "flagged", "speedup", "stage", "eval_seconds")
#: options a call (verl's reward_kwargs) may give
OPTIONS = ("url", "token", "factory", "device", "backend", "reward", "rules", "format", "suite", "dtype",
           "mode", "turn_cost")
#: what shaped the prompt text (``extra_info["kbench"]``): the evaluator must agree with it
PROMPT_SETTINGS = ("device", "backend", "format", "rules")
#: keywords verl passes that are not ours
VERL_PASSTHROUGH = ("reward_router_address", "reward_model_tokenizer")
URL_ENV, FACTORY_ENV = "KBENCH_URL", "KBENCH_VERL_FACTORY"

#: the options an evaluator is made for (the others are the sample's)
EVALUATOR_OPTIONS = ("url", "token", "factory", "device", "backend", "reward", "rules", "format")
_installed = None


def use_evaluator(evaluator) -> None:
    """Score every call of this process on ``evaluator`` (an Evaluator or a ``RemoteEvaluator``); None undoes it."""
    global _installed
    _installed = evaluator


def score_of(result: EvalResult) -> dict:
    """The score dict of one evaluation: ``score`` is the env's reward; ``speedup`` only for a correct, timed one."""
    timed = result.correct and result.speedup is not None
    return {"score": float(result.reward), "acc": float(bool(result.correct)), "compiled": float(bool(result.compiled)),
            "flagged": float(bool(result.integrity_flags)), "speedup": float(result.speedup) if timed else None,
            "stage": result.stage, "eval_seconds": float(result.eval_seconds or 0.0)}


def _episode_score(turn_scores, options: dict) -> dict:
    score = episode_reward([float(s) for s in turn_scores], options.get("mode") or "best",
                           float(options.get("turn_cost", 0.02)))
    return {"score": score, "acc": None, "compiled": None, "flagged": None, "speedup": None, "stage": "episode",
            "eval_seconds": 0.0}


# ---------------------------------------------------------------------- options and evaluators


def prompt_settings(device: str = "cuda", backend: str | None = None, format: str = "kernelbench",
                    rules: str = "strict", suite: str | None = None) -> dict:
    """The settings a prompt is written for (``extra_info["kbench"]``), resolved as the Evaluator resolves them."""
    device = resolve_device(device)
    format, backend = formats.resolve(format, backend, device)
    out = {"device": device, "backend": backend, "format": format, "rules": check_rules(rules)}
    if suite is not None:
        out["suite"] = suite
    return out


def sample_options(extra_info, options: dict) -> dict:
    """The options of one sample: the prompt's settings (``extra_info["kbench"]``), the environment's, then the
    call's. A call that names another device, backend, format or rules than the prompt's raises ValueError."""
    unknown = set(options) - set(OPTIONS) - set(VERL_PASSTHROUGH)
    if unknown:
        raise TypeError(f"compute_score got unknown option(s) {sorted(unknown)}; it takes {list(OPTIONS)}")
    prompt = dict((extra_info or {}).get("kbench") or {})
    out = {k: v for k, v in prompt.items() if k in OPTIONS and v is not None}
    for key, env in (("url", URL_ENV), ("factory", FACTORY_ENV)):
        if environ.get(env):
            out[key] = environ.get(env)
    for key, value in options.items():
        if key in VERL_PASSTHROUGH or value is None:
            continue
        if key in PROMPT_SETTINGS and key in prompt and not _same(key, prompt[key], value):
            raise ValueError(f"the prompt of this sample was written for {key}={prompt[key]!r}, the reward "
                             f"options say {value!r}: rebuild the data (verl_data --{key}) or drop the option")
        out[key] = value
    return out


def _same(key: str, a, b) -> bool:
    if key == "device":  # a prompt names the kind of device it was written for, not the index
        return Device.parse(a).kind == Device.parse(b).kind
    return a == b


def _check_agrees(evaluator, options: dict) -> None:
    """Raise ValueError when ``evaluator`` evaluates under other settings than the prompt's."""
    have = {"device": evaluator.device, "backend": evaluator.backend_name, "rules": evaluator.rules,
            "format": getattr(evaluator, "format", "kernelbench")}
    bad = [f"{k}={options[k]!r} (the evaluator's: {have[k]!r})" for k in PROMPT_SETTINGS
           if options.get(k) is not None and not _same(k, options[k], have[k])]
    if bad:
        raise ValueError("the samples' prompts were written for other settings than the evaluator's: "
                         + "; ".join(bad))


def _make_evaluator(options: dict):
    """A factory's evaluator, or a server's (``url``)."""
    if options.get("factory"):
        module, _, name = str(options["factory"]).partition(":")
        if not name:
            raise ValueError(f"factory must be 'module:function', got {options['factory']!r}")
        return getattr(importlib.import_module(module), name)(**options)
    if options.get("reward") is not None:
        raise ValueError("with url the server's reward applies (kbench serve --reward): drop reward=")
    from kbench_env.serving.remote import RemoteEvaluator  # httpx, the [serve] extra

    return RemoteEvaluator(options["url"], options.get("token"))


def evaluator_for(options: dict):
    """The evaluator for ``options``: the installed one, or one made once per process and kept (see the module
    docstring for the order), checked against the prompt's settings."""
    if _installed is not None:
        evaluator = _installed
    else:
        given = {k: str(options[k]) for k in EVALUATOR_OPTIONS if options.get(k) is not None}
        if given.get("factory") or given.get("url"):
            evaluator = shared("verl", given, lambda: _make_evaluator(options))
        else:  # the Evaluator's own defaults for the options not given (device "auto", reward "tiered")
            evaluator = shared_evaluator(**{k: options[k] for k in PROMPT_SETTINGS + ("reward",)
                                            if options.get(k) is not None})
    _check_agrees(evaluator, options)
    return evaluator


def close_evaluators() -> None:
    """Close the evaluators this process keeps (their workers and builders): verl's and the other adapters' shared
    ones alike, which are one cache (``episode.close_shared``); the next call makes new ones."""
    close_shared()


def task_for(evaluator, name: str, options: dict):
    """What ``evaluator.evaluate_many`` takes for the task ``name``: a server looks names up in its own suite; a
    local evaluator gets the Task (looked up in the prompt's suite first)."""
    if not isinstance(evaluator, Evaluator):  # a RemoteEvaluator takes names
        return name
    return local_task(name, options.get("dtype"), options.get("suite"))


@functools.lru_cache(maxsize=4096)
def local_task(name: str, dtype: str | None = None, suite: str | None = None):
    """The Task ``name`` (in ``suite`` first), looked up once per process: every sample of a task names it."""
    return resolve_task(name, dtype=dtype, suite=suite)


# ---------------------------------------------------------------------- the reward function


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *, data_sources=None,
                  solution_strs=None, ground_truths=None, extra_infos=None, **options):
    """verl's custom reward function, both forms (see the module docstring): per sample it returns one score dict,
    batched (``solution_strs=``) a list of them. ``ground_truth`` is the task's name."""
    if solution_strs is not None:
        return compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **options)
    if solution_str is None or ground_truth is None:
        raise TypeError("compute_score needs solution_str and ground_truth (the task's name), or the batched "
                        "keywords solution_strs and ground_truths")
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **options)[0]


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, **options) -> list[dict]:
    """Score dicts for a batch, in order: the samples of each evaluator go to one ``evaluate_many`` (their builds
    run concurrently on the CPU cores, the device times one candidate at a time)."""
    n = len(solution_strs)
    if len(ground_truths) != n or (extra_infos is not None and len(extra_infos) != n):
        raise ValueError(f"{n} solutions, {len(ground_truths)} ground truths, "
                         f"{None if extra_infos is None else len(extra_infos)} extra_infos")
    infos = [dict(e) if e is not None else {} for e in (extra_infos if extra_infos is not None else [None] * n)]
    scores: list = [None] * n
    groups: dict[int, tuple] = {}
    for i, (text, name, info) in enumerate(zip(solution_strs, ground_truths, infos)):
        opts = sample_options(info, options)
        if info.get("turn_scores") is not None and len(info["turn_scores"]):
            scores[i] = _episode_score(info["turn_scores"], opts)
            continue
        evaluator = evaluator_for(opts)
        group = groups.setdefault(id(evaluator), (evaluator, []))
        group[1].append((i, task_for(evaluator, str(name), opts), "" if text is None else str(text)))
    for evaluator, items in groups.values():
        results = evaluator.evaluate_many([(task, text) for _, task, text in items])
        for (i, _, _), result in zip(items, results):
            scores[i] = score_of(result)
    return scores

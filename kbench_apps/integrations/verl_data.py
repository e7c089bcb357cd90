"""verl's RL dataset for a kbench suite: ``train.parquet`` and ``test.parquet``, one row per task.

``python -m kbench_apps.integrations.verl_data --suite default --out DIR [--test-suite S] [--device cuda]``

Each row has verl's columns (``verl/utils/dataset/rl_dataset.py`` reads them; verl's own preprocessing scripts
write the same layout):

- ``data_source``: ``"kbench"``; ``ability``: ``"kernel"``;
- ``prompt``: chat messages, the env's system prompt and the text ``KBenchEnv.reset`` returns for the task on that
  device, backend, action format and rules: the reference program, the shown input configurations and the rules.
  Held-out configurations appear only as a count ("plus N held-out configuration(s)"): never their names or shapes;
- ``reward_model``: ``{"style": "rule", "ground_truth": <task name>}`` (``verl_reward.compute_score``'s key);
- ``extra_info``: ``{"split", "index", "task", "kbench": <the prompt's settings>, "interaction_kwargs": {"name":
  "kbench", "task", "kbench"}}``: the settings (device, backend, format, rules, suite) let the reward function and
  the interaction evaluate where the prompt said, and refuse an evaluator that differs.

The prompt names the target hardware as this machine describes it (``kbench_env.machine.hardware.describe``):
build a GPU dataset on a host with the GPU you will train for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from kbench_apps.integrations.verl_reward import prompt_settings
from kbench_env.backends import get_backend
from kbench_env.machine.device import Device
from kbench_env.env.env import sanitize
from kbench_env.env.prompt import SYSTEM_PROMPT, build_prompt
from kbench_env.pipeline import formats
from kbench_env.tasks.suite import load_suite
from kbench_env.tasks.task import Task

DATA_SOURCE, ABILITY, INTERACTION = "kbench", "kernel", "kbench"


def task_messages(task: Task, settings: dict) -> list[dict]:
    """The system prompt and the env's prompt for ``task`` (what ``KBenchEnv.reset`` returns under ``settings``)."""
    user = sanitize(build_prompt(task, get_backend(settings["backend"]), settings["device"], rules=settings["rules"],
                                 format=settings["format"]))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def build_rows(tasks: list[Task], settings: dict, split: str) -> list[dict]:
    """verl's rows for ``tasks`` (see the module docstring)."""
    rows = []
    for index, task in enumerate(tasks):
        rows.append({
            "data_source": DATA_SOURCE,
            "prompt": task_messages(task, settings),
            "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": task.name},
            "extra_info": {"split": split, "index": index, "task": task.name, "kbench": dict(settings),
                           "interaction_kwargs": {"name": INTERACTION, "task": task.name, "kbench": dict(settings)}},
        })
    return rows


def suite_tasks(spec: str, device: str) -> list[Task]:
    """The tasks of a suite spec that have a configuration for ``device``."""
    tasks = [t for t in load_suite(spec) if t.configs_for(device)]
    if not tasks:
        raise ValueError(f"suite {spec!r} has no task with a configuration for {device}")
    return tasks


def write_dataset(out: str | Path, suite: str = "default", test_suite: str | None = None, device: str = "cuda",
                  backend: str | None = None, format: str = "kernelbench", rules: str = "strict") -> dict:
    """Write ``out/train.parquet`` (``suite``) and ``out/test.parquet`` (``test_suite``, default the same tasks);
    returns ``{split: (path, rows)}``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, spec in (("train", suite), ("test", test_suite or suite)):
        settings = prompt_settings(device, backend, format, rules, spec)
        rows = build_rows(suite_tasks(spec, settings["device"]), settings, split)
        path = out / f"{split}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        written[split] = (path, len(rows))
    return written


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m kbench_apps.integrations.verl_data", description=__doc__.split("\n")[0])
    p.add_argument("--suite", default="default", help="tasks of the train split (a suite spec, as kbench tasks)")
    p.add_argument("--test-suite", default=None, help="tasks of the test split (default: the train split's)")
    p.add_argument("--out", required=True, help="folder for train.parquet and test.parquet")
    p.add_argument("--device", default="cuda", help="the device the prompts are written for (default: cuda)")
    p.add_argument("--backend", default=None, help="kernel language (default: the device's)")
    p.add_argument("--format", default="kernelbench", choices=list(formats.FORMATS), help="action format")
    p.add_argument("--rules", default="strict", choices=["strict", "kernelbench"])
    args = p.parse_args(argv)
    if Device.parse(args.device).is_cuda and not torch.cuda.is_available():
        print("note: no GPU here: the prompts describe this machine's CPU as the target hardware", file=sys.stderr)
    written = write_dataset(args.out, args.suite, args.test_suite, args.device, args.backend, args.format, args.rules)
    for split, (path, n) in written.items():
        print(f"{split}: {n} rows -> {path}")


if __name__ == "__main__":
    main()

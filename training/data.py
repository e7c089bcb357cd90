"""Prompt datasets for GRPO, built from a task suite: the same prompt text the environment gives, in chat format.

Each row is one task: ``prompt`` is ``[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content":
<the env's prompt>}]`` (TRL's conversational format: the trainer applies the model's chat template), ``task`` is the
task's name (a column the reward function receives). The user message is exactly what ``KBenchEnv.reset`` returns as
its observation for that task, backend, device and action format (pipeline/formats.py).
"""

from __future__ import annotations

from kbench_env.backends import get_backend
from kbench_env.env.env import sanitize
from kbench_env.machine.device import resolve_device
from kbench_env.env.prompt import SYSTEM_PROMPT, build_prompt
from kbench_env.tasks.suite import load_suite
from kbench_env.tasks.task import Task


def load_tasks(suite: str = "default", device: str = "cpu") -> list[Task]:
    """The tasks of a suite spec (a name from suites.json, a level, a folder, or a comma-separated list of task
    names), keeping only those with at least one configuration for ``device``."""
    device = resolve_device(device)
    tasks = [t for t in load_suite(suite) if t.configs_for(device)]
    if not tasks:
        raise ValueError(f"suite {suite!r} has no task with a configuration for {device}")
    return tasks


def task_messages(task: Task, backend: str, device: str, format: str = "kernelbench") -> list[dict]:
    """The chat messages of ``task``: the system prompt and the env's prompt in the action ``format``."""
    device = resolve_device(device)
    user = sanitize(build_prompt(task, get_backend(backend), device, format=format))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def build_dataset(tasks: list[Task], backend: str, device: str, repeats: int = 1, format: str = "kernelbench"):
    """A ``datasets.Dataset`` with columns ``prompt`` (chat messages) and ``task`` (name), each task ``repeats``
    times (the trainer shuffles; ``max_steps`` bounds the run)."""
    from datasets import Dataset

    rows = [{"prompt": task_messages(t, backend, device, format), "task": t.name} for t in tasks]
    return Dataset.from_list(rows * max(1, repeats))


def prompt_index(tasks: list[Task], backend: str, device: str, format: str = "kernelbench") -> dict[str, Task]:
    """Map from a prompt's user message to its task. A ``rollout_func`` receives only the prompts, so the
    multi-turn rollout finds each prompt's task here."""
    return {task_messages(t, backend, device, format)[-1]["content"]: t for t in tasks}

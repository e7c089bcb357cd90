"""The task suite on disk: finding task files, named suites, and shipped sample solutions.

Owns the layout of ``tasks/``::

    tasks/level1/*.py, level2/, level3/, robust/   one task per file (KernelBench format, see task.py)
    tasks/suites.json                              named subsets: {"default": ["level1/relu", ...], ...}
    tasks/solutions/<backend>/<level>/<name>.py    sample solutions (ModelNew), test fixtures and demo material

A suite is named ("default", "all", "level1", a name from suites.json), a folder, a single task file, or a
comma-separated list of any of these. ``KBENCH_TASKS`` points at another tasks folder. A folder may hold
robust-kbench task folders at any depth (see robust_kbench.py). In a folder, a file or task folder that cannot
load (a KernelBench level-4 file needs the Hugging Face hub) is skipped with a :class:`SkippedTaskWarning` saying
which and why; the rest load. ``dtype`` applies to plain KernelBench files (see ``loading.load_task``).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import warnings
from functools import lru_cache
from pathlib import Path

from kbench_env.tasks.formats.robust_kbench import load_robust_task, load_robust_tasks, load_robust_tree
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.task import Task, TaskError

SUITE_FOLDERS = ("level1", "level2", "level3", "robust")


def _install_prefixes() -> list[str]:
    return list(dict.fromkeys((sysconfig.get_path("data"), sys.prefix, sys.base_prefix)))


def tasks_root() -> Path:
    """The tasks folder: ``KBENCH_TASKS``, else the source checkout's ``tasks/`` (an editable install), else the
    copy a wheel installs as data under ``<prefix>/share/kbench/tasks`` (see pyproject's data-files)."""
    env = os.environ.get("KBENCH_TASKS")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2] / "tasks"
    if (checkout / "suites.json").is_file():
        return checkout
    for prefix in _install_prefixes():
        installed = Path(prefix) / "share" / "kbench" / "tasks"
        if (installed / "suites.json").is_file():
            return installed
    return checkout


def _task_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def named_suites() -> dict:
    path = tasks_root() / "suites.json"
    return json.loads(path.read_text()) if path.is_file() else {}


@lru_cache(maxsize=512)
def _load_cached(path: str, mtime: float, dtype: str | None) -> Task:
    return load_task(path, dtype=dtype)


def task_from_path(path: Path, dtype: str | None = None) -> Task:
    if path.is_dir() and (path / "func_forward.py").is_file():
        return load_robust_task(path)  # robust-kbench's folder format
    return _load_cached(str(path.resolve()), path.stat().st_mtime, dtype)


def _task_path(name: str) -> Path | None:
    """Where the task called ``name`` (a suite name like "level1/relu", a bare stem, or a path) is; None if nowhere."""
    p = Path(name)
    if p.exists():
        return p
    root = tasks_root()
    cand = root / (name if name.endswith(".py") else name + ".py")
    if cand.is_file():
        return cand
    matches = [f for d in SUITE_FOLDERS for f in _task_files(root / d) if f.stem == name]
    return matches[0] if len(matches) == 1 else None


def resolve_task(name: str, dtype: str | None = None) -> Task:
    """A task by suite name ("level1/relu") or by path to a file."""
    path = _task_path(name)
    if path is None:
        raise TaskError(f"no task named {name!r} (try `kbench tasks`); tasks live under {tasks_root()}")
    return task_from_path(path, dtype)


def load_suite(spec: str = "default", dtype: str | None = None) -> list[Task]:
    """The tasks of a suite spec (see module docstring), in a stable order, without duplicates; ``dtype``: the
    dtype of plain KernelBench files' derived configurations (default float32)."""
    root = tasks_root()
    tasks: list[Task] = []
    for part in [s.strip() for s in spec.split(",") if s.strip()]:
        suites = named_suites()
        if part == "all":
            for d in SUITE_FOLDERS:
                tasks.extend(task_from_path(f, dtype) for f in _task_files(root / d))
        elif part in suites:
            tasks.extend(resolve_task(n, dtype) for n in suites[part])
        elif (root / part).is_dir():
            tasks.extend(_folder(root / part, dtype))
        elif Path(part).is_dir():
            tasks.extend(_folder(Path(part), dtype))
        else:
            tasks.append(_task_or_refuse(part, dtype, suites))
    seen, out = set(), []
    for t in tasks:
        if t.name not in seen:
            seen.add(t.name)
            out.append(t)
    return out


def _task_or_refuse(part: str, dtype: str | None, suites: dict) -> Task:
    """A suite spec's part that is no suite or folder: a task, else an error naming the suites there are."""
    path = _task_path(part)
    if path is None:
        names = ", ".join(["all", *SUITE_FOLDERS, *suites])
        raise TaskError(f"no suite named {part!r} (nor a task or folder of that name); suites: {names}. A suite "
                        f"may also be a folder, a task file, a task name (level1/relu) or a comma list "
                        f"(`kbench tasks` lists the tasks under {tasks_root()})")
    return task_from_path(path, dtype)


class SkippedTaskWarning(UserWarning):
    """A task folder of a suite could not be loaded; the message says which and why, and the rest loaded."""


def _folder(folder: Path, dtype: str | None = None) -> list[Task]:
    if (folder / "func_forward.py").is_file():  # one robust-kbench task: its forward and backward passes
        return load_robust_tasks(folder)
    robust, skipped = load_robust_tree(folder)  # task folders at any depth (robust-kbench nests its groups)
    for path, why in skipped:
        warnings.warn(f"robust-kbench task folder {path} skipped (the rest of the suite loads): {why}",
                      SkippedTaskWarning, stacklevel=3)
    files = []
    for f in _task_files(folder):
        try:
            files.append(task_from_path(f, dtype))
        except TaskError as exc:  # e.g. a KernelBench level-4 file: needs the Hugging Face hub
            warnings.warn(f"{exc} (skipped; the rest of the suite loads)", SkippedTaskWarning, stacklevel=3)
    return files + robust


def solution_folder(backend: str = "cpu", format: str = "kernelbench") -> str:
    """The folder under ``solutions/`` of ``backend``'s solutions in the action ``format``: the backend's own
    (``cpu``, ``cuda``, ``triton``), or ``fast_<backend>`` for the fast format (pipeline/formats.py)."""
    return f"fast_{backend}" if format == "fast" else backend


def solution_path(task: Task, backend: str = "cpu", format: str = "kernelbench") -> Path | None:
    """The shipped sample solution of ``task`` for ``backend`` in the action ``format``, if there is one (under
    ``solutions/<solution_folder>/``)."""
    level, _, stem = task.name.rpartition("/")
    p = tasks_root() / "solutions" / solution_folder(backend, format) / level / f"{stem}.py"
    return p if p.is_file() else None

"""The task suite on disk: finding task files, named suites, and shipped sample solutions.

Owns the layout of ``tasks/``::

    tasks/level1/*.py, level2/, level3/, robust/   one task per file (KernelBench format, see task.py)
    tasks/suites.json                              named subsets: {"default": ["level1/relu", ...], ...}
    tasks/solutions/<backend>/<level>/<name>.py    sample solutions (ModelNew), test fixtures and demo material

A suite is named ("default", "all", "level1", a name from suites.json), a folder, a single task file, or a
comma-separated list of any of these. ``KBENCH_TASKS`` points at another tasks folder. A folder may hold
robust-kbench task folders at any depth (see loaders/robust_kbench/). In a folder, a file or task folder that cannot
load (a KernelBench level-4 file needs the Hugging Face hub) is skipped with a :class:`SkippedTaskWarning` saying
which and why; the rest load. ``dtype`` applies to plain KernelBench files (see ``loading.load_task``).
"""

from __future__ import annotations

import json
import sys
import sysconfig
import warnings
from functools import lru_cache
from pathlib import Path

from kbench_env.config import environ
from kbench_env.tasks.loaders.robust_kbench import load_robust_task, load_robust_tasks, load_robust_tree
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.task import Task, TaskError

SUITE_FOLDERS = ("level1", "level2", "level3", "robust")


def _install_prefixes() -> list[str]:
    return list(dict.fromkeys((sysconfig.get_path("data"), sys.prefix, sys.base_prefix)))


def tasks_root() -> Path:
    """The tasks folder: ``KBENCH_TASKS``, else the source checkout's ``tasks/`` (an editable install), else the
    copy a wheel installs as data under ``<prefix>/share/kbench/tasks`` (see pyproject's data-files)."""
    env = environ.get("KBENCH_TASKS")
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


def _robust_form(path: Path) -> Task | None:
    """The task ``<robust-kbench folder>/forward`` or ``/backward`` names, None when ``path`` is no such name."""
    if path.name not in ("forward", "backward") or not (path.parent / "func_forward.py").is_file():
        return None
    for t in load_robust_tasks(path.parent):
        if t.name.endswith("/" + path.name):
            return t
    raise TaskError(f"{path.parent} has no {path.name} task (robust-kbench's func_{path.name}.py is not there)")


def find_task(tasks: list[Task], name: str) -> Task | None:
    """The task of ``tasks`` called ``name``: its full name, or a tail of it that only one task has
    ("76_Gemm_Add_ReLU", "layernorm/backward"); None when none or several have it."""
    exact = [t for t in tasks if t.name == name]
    if exact:
        return exact[0]
    tails = [t for t in tasks if t.name.endswith("/" + name)]
    return tails[0] if len(tails) == 1 else None


def resolve_task(name: str, dtype: str | None = None, suite: str | None = None) -> Task:
    """A task by name or path: in ``suite`` first when one is given (``find_task``: the names ``kbench tasks
    --suite`` lists), then by suite name under the tasks folder ("level1/relu"), by path to a KernelBench file or
    a robust-kbench task folder, or as ``<robust-kbench folder>/forward`` or ``/backward``. A robust-kbench folder
    that has both forms is refused: name the form."""
    if suite is not None:
        found = find_task(load_suite(suite, dtype), name)
        if found is not None:
            return found
    rk = _robust_form(Path(name))
    if rk is not None:
        return rk
    path = _task_path(name)
    if path is None:
        where = f"in suite {suite!r} nor " if suite is not None else ""
        hint = ("; a robust-kbench name needs the folder it was listed from: --suite <that folder>"
                if name.startswith("robust-kbench/") and suite is None else "")
        raise TaskError(f"no task named {name!r} {where}under {tasks_root()} (try `kbench tasks`){hint}")
    if path.is_dir() and (path / "func_forward.py").is_file():
        forms = load_robust_tasks(path)
        if len(forms) > 1:
            raise TaskError(f"robust-kbench folder {path} holds {len(forms)} tasks: name one, as "
                            + " or ".join(f"{path}/{t.name.rsplit('/', 1)[1]}" for t in forms))
        return forms[0]
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
    rk = _robust_form(Path(part))
    if rk is not None:
        return rk
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

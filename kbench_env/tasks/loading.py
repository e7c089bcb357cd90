"""Reading a KernelBench-format task file (or its source text) into a :class:`~kbench_env.tasks.task.Task`: the
optional ``KBENCH`` block (task.py describes it), the default name, level and description, and, for a plain
KernelBench file, configurations derived on first use (kernelbench.py)."""

from __future__ import annotations

import ast
import copy
import functools
from pathlib import Path

from kbench_env.tasks.loaders import kernelbench
from kbench_env.tasks.task import DTYPES, Config, Task, TaskError
from kbench_env.tasks import pysource


def _literal_kbench(tree: ast.Module, filename: str) -> dict:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KBENCH" for t in stmt.targets):
            try:
                return ast.literal_eval(stmt.value)
            except ValueError as exc:
                raise TaskError(f"{filename}: KBENCH must be a literal dict ({exc})") from None
    return {}

def _default_level(path: Path | None):
    if path is None:
        return None
    parent = path.parent.name
    if parent.startswith("level") and parent[5:].isdigit():
        return int(parent[5:])
    return parent or None


def load_task(path_or_source: str | Path, name: str | None = None, dtype: str | None = None) -> Task:
    """Load a task from a KernelBench-format file (or its source text).

    A file with a ``KBENCH`` block gets the configurations it declares. A plain KernelBench file is run once (its
    imports and definitions, no forward pass), refused if it needs the Hugging Face hub, and gets configurations
    derived on first use (kernelbench.py), in ``dtype`` (default float32: KernelBench's fp32/fp16/bf16 switch;
    the comparison's tolerances follow the dtype, compare.DEFAULT_TOLERANCES). ``dtype`` is for plain files
    only: a ``KBENCH`` block declares its own dtypes per configuration.
    """
    if dtype is not None and dtype not in DTYPES:
        raise TaskError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    path = None
    if isinstance(path_or_source, Path) or (isinstance(path_or_source, str) and "\n" not in path_or_source):
        path = Path(path_or_source)
        if not path.is_file():
            raise TaskError(f"no task file at {path}")
        source = path.read_text()
    else:
        source = str(path_or_source)
    filename = str(path) if path else "<task>"
    try:
        tree = pysource.parse(source, filename=filename)
    except SyntaxError as exc:
        raise TaskError(f"{filename}: not valid Python: {exc}") from None
    meta = copy.deepcopy(_literal_kbench(tree, filename))
    unknown = set(meta) - {"level", "tags", "backward", "description", "configs", "tolerance", "tolerance_reason",
                           "input_ranges"}
    if unknown:
        raise TaskError(f"{filename}: unknown KBENCH keys {sorted(unknown)}")
    if name is None:
        name = f"{path.parent.name}/{path.stem}" if path else "task"
    doc = ast.get_docstring(tree) or ""
    derive = None
    if meta.get("configs"):
        configs = [Config.from_dict(c) for c in meta["configs"]]
        names = [c.name for c in configs]
        if len(set(names)) != len(names):
            raise TaskError(f"{filename}: configuration names repeat: {names}")
    else:
        kernelbench.check_runs(tree, source, filename)
        configs = None
        derive = functools.partial(kernelbench.derived_configs, source, filename, dtype or "float32")
    return Task(
        name=name,
        source=source,
        path=str(path) if path else None,
        level=meta.get("level", _default_level(path)),
        tags=list(meta.get("tags", [])),
        backward=bool(meta.get("backward", False)),
        description=meta.get("description") or (doc.strip().splitlines()[0] if doc.strip() else ""),
        configs=configs,
        tolerance=dict(meta.get("tolerance", {})),
        tolerance_reason=meta.get("tolerance_reason", ""),
        input_ranges=dict(meta.get("input_ranges", {})),
        derive=derive,
    )

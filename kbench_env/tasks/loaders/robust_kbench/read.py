"""Reading a robust-kbench task folder: which forms it has, its configurations, its task file run as a module of its
own, the reference probed for shapes and sizes, and the names the generated program may use (see loader.py
for the format)."""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import json
import keyword
import re
import types
from pathlib import Path

import torch

from kbench_env.tasks.task import TaskError, seeded
from kbench_env.tasks import pysource

FORMS = ("forward", "backward")

#: Names the adapter defines at module level; a setting with one of these names gets a prefixed constant.
_RESERVED = {
    "torch", "nn", "Model", "ModelNew", "get_inputs", "get_init_inputs", "KBENCH", "ROBUST_KBENCH", "GRAD_INPUTS",
    "grad_out_shape", "self", "grad_out", "inputs", "forward_fn", "AutogradFunction", "input_names",
    "ROBUST_KBENCH_SOURCE", "_rk", "_types", "_robust_kbench_module", "_RkModel", "_rk_get_inputs", "_rk_forward_fn",
}


def _func_file(folder: Path, form: str) -> Path:
    return folder / f"func_{form}.py"


def forms_in(folder: str | Path) -> list[str]:
    """The forms a robust-kbench folder defines ("forward", and "backward" if it has func_backward.py)."""
    folder = Path(folder)
    if not _func_file(folder, "forward").is_file():
        raise TaskError(f"{folder}: not a robust-kbench task folder (no func_forward.py)")
    return [f for f in FORMS if _func_file(folder, f).is_file()]


def _as_config_list(value, where: str) -> list[dict]:
    if value is None:
        return [{}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise TaskError(f"{where}: expected a list of settings dicts, got {type(value).__name__}")
    return value or [{}]


def read_configs(folder: str | Path, form: str = "forward", multi: bool = True,
                 accepts: tuple | None = None) -> list[tuple[dict, dict]]:
    """The configurations of ``config_<form>.json`` as ``(init settings, input settings)`` pairs.

    robust-kbench's format: ``{single,multi}_{init,input,shared}_configs`` lists, combined as the Cartesian product
    init x input x shared with the shared settings merged into both (ConfigTask.get_configs). With ``multi`` the
    ``multi_*`` lists are used where present (the shared one only where the init and input ones are too), else the
    ``single_*`` ones. A file without those keys is read as ``{setting: value or [values]}``, whose lists form the
    product; each setting goes to ``Model`` and/or ``get_inputs`` by the parameter names in ``accepts`` (``(names
    of Model.__init__, names of get_inputs)``, None for "any"), to both without it. A missing file means one
    configuration with the functions' defaults.
    """
    path = Path(folder) / f"config_{form}.json"
    if not path.is_file():
        return [({}, {})]
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TaskError(f"{path}: expected a JSON object")
    kinds = ("init", "input", "shared")
    if any(f"{m}_{k}_configs" in data for m in ("single", "multi") for k in kinds):
        lists = {}
        for k in kinds:
            use_multi = multi and f"multi_{k}_configs" in data
            if k == "shared":
                use_multi = use_multi and lists["init"][0] and lists["input"][0]
            key = f"{'multi' if use_multi else 'single'}_{k}_configs"
            lists[k] = (use_multi, _as_config_list(data.get(key), f"{path}: {key}"))
        out = []
        for init_c, input_c, shared_c in itertools.product(lists["init"][1], lists["input"][1], lists["shared"][1]):
            out.append(({**init_c, **shared_c}, {**input_c, **shared_c}))
        return out
    # {setting: value or list of values}: lists form the product; each setting goes where it is accepted
    keys = list(data)
    values = [v if isinstance(v, list) else [v] for v in data.values()]
    to_init, to_input = accepts if accepts is not None else (None, None)
    for k in keys:
        if to_init is not None and to_input is not None and k not in to_init and k not in to_input:
            raise TaskError(f"{path}: setting {k!r} is a parameter of neither Model nor get_inputs")
    out = []
    for combo in itertools.product(*values):
        settings = dict(zip(keys, combo))
        out.append(({k: v for k, v in settings.items() if to_init is None or k in to_init},
                    {k: v for k, v in settings.items() if to_input is None or k in to_input}))
    return out


def _exec_rk(source: str, filename: str):
    mod = types.ModuleType("robust_kbench_task")
    mod.__file__ = filename
    try:
        exec(compile(source, filename, "exec"), mod.__dict__)
    except Exception as exc:  # noqa: BLE001 - the file's own code may raise anything
        raise TaskError(f"{filename}: robust-kbench's file does not run: {type(exc).__name__}: {exc}") from exc
    for need in ("Model", "forward_fn", "get_inputs"):
        if not hasattr(mod, need):
            raise TaskError(f"{filename}: a robust-kbench task file defines {need}")
    return mod


def _probe(rk, init_kw: dict, input_kw: dict, filename: str, devices=("meta", "cpu"), forward: bool = True) -> dict:
    """Run get_inputs, Model and forward once (on the first of ``devices`` where that works: the meta device
    computes shapes only) for shapes and sizes; without ``forward``, only the inputs and parameters are made and
    counted (no ``out_shape``)."""
    last: Exception | None = None
    for device in devices:
        try:
            with seeded(0), torch.device(device):  # the lock: evaluations in other threads draw seeded
                inputs = list(rk.get_inputs(**input_kw))
                model = rk.Model(**init_kw)
                in_shapes = tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor))
                if not forward:
                    params = [p for p in model.parameters() if p.requires_grad]
                    return {"numel": sum(x.numel() for x in [*inputs, *params] if isinstance(x, torch.Tensor)),
                            "in_shapes": in_shapes}
                with torch.no_grad():
                    out = model(*[x.detach() if isinstance(x, torch.Tensor) else x for x in inputs], fn=rk.forward_fn)
            if not isinstance(out, torch.Tensor):
                raise TaskError(f"{filename}: forward returns {type(out).__name__}; kbench's adapter expects a tensor")
            params = [p for p in model.parameters() if p.requires_grad]
            numel = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)) + sum(p.numel() for p in params)
            return {
                "n_inputs": len(inputs),
                "grad_mask": [isinstance(x, torch.Tensor) and x.requires_grad and x.is_floating_point() for x in inputs],
                "float_mask": [isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs],
                "out_shape": tuple(out.shape),
                "in_shapes": in_shapes,  # of the tensor inputs: what a held-out configuration must change
                "numel": numel + out.numel(),
                "n_params": len(params),
            }
        except TaskError:
            raise
        except Exception as exc:  # noqa: BLE001 - try the next device, then report
            last = exc
    raise TaskError(f"{filename}: the reference does not run for init {init_kw} and inputs {input_kw}: {last}")


def _signature_defaults(fn) -> dict:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def _parameter_names(fn) -> set | None:
    """Keyword parameters of ``fn``; None when it takes ``**kwargs`` or has no signature (anything goes)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}


def _identifier(name: str, taken: set) -> str:
    base = name if name.isidentifier() and not keyword.iskeyword(name) else re.sub(r"\W", "_", name).strip("_") or "s"
    if base[0].isdigit():
        base = "s_" + base
    if base in _RESERVED or hasattr(builtins, base) or base in taken:
        base = "rk_" + base
    while base in taken:
        base += "_"
    taken.add(base)
    return base


def _toplevel_names(source: str) -> set:
    names = set()
    for node in pysource.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _config_name(settings: dict, varying: list) -> str:
    if not varying:
        return "default"
    return ",".join(f"{k}={settings.get(k)}" for k in varying)


def _docstring_line(source: str, func: str = "forward_fn") -> str:
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            doc = (ast.get_docstring(node) or "").strip()
            return doc.splitlines()[0].strip() if doc else ""
    doc = (ast.get_docstring(tree) or "").strip()
    return doc.splitlines()[0].strip() if doc else ""

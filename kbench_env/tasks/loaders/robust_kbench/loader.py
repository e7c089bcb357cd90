"""robust-kbench task folders and CUDA submissions, used unchanged by kbench.

robust-kbench (SakanaAI/robust-kbench) keeps one folder per task::

    tasks/<name>/func_forward.py       forward_fn(...): the reference function;
                                       Model(nn.Module): __init__ takes the init settings as keywords and holds the
                                       parameters; forward(*inputs, fn=forward_fn) returns fn(inputs..., parameters...);
                                       get_inputs(**input_settings): the inputs; input_names (optional)
    tasks/<name>/func_backward.py      (optional) the same, plus AutogradFunction(torch.autograd.Function), whose
                                       backward calls the class attribute backward_fn(...) with saved tensors and
                                       grad_output and returns the gradients
    tasks/<name>/config_forward.json   lists of settings: {"single_init_configs": [{...}], "single_input_configs":
    tasks/<name>/config_backward.json  [{...}], "single_shared_configs": [{...}], and "multi_*" versions of the three}
    tasks/<name>/forward.cu, backward.cu   (optional) a correct kernel

Its ConfigTask makes the configurations the Cartesian product init x input x shared (shared settings go to both
``Model(**init)`` and ``get_inputs(**input)``, overriding); the ``multi_*`` lists are used when asked for, else the
``single_*`` ones. A submission is one ``.cu`` file that exports, through its own ``PYBIND11_MODULE``, ``forward``
(with ``forward_fn``'s arguments, returning its output) or ``backward`` (with the arguments ``AutogradFunction``
passes to ``backward_fn``, returning the gradients). robust-kbench builds it with ``torch.utils.cpp_extension.load``
(``-O3 --use_fast_math``) and checks it as ``Model(**init)(*get_inputs(**input), fn=module.forward)`` against
``fn=forward_fn``; for the backward form it sets ``AutogradFunction.backward_fn = module.backward``, runs
``model(*inputs, fn=AutogradFunction.apply).backward(grad_output)`` and compares the ``.grad`` of the inputs that
``get_inputs`` marks ``requires_grad`` and of the model's parameters with those of plain autograd through
``forward_fn``. (Confirmed from robust-kbench's ``kernel_task.py``, ``config_task.py``, ``primitives/forward`` and
``primitives/backward``, and its task files, as stored in public copies of the repository.)

This module turns such a folder into kbench :class:`~kbench_env.tasks.task.Task` objects, one per form
(``robust-kbench/<folder path>/forward`` and ``.../backward``), whose source is a KernelBench-format program
(source.py, from the folder as read.py reads it): the
robust-kbench file unchanged, as a string that runs as a module of its own (so that ``super(Model, self)`` and any
other module-level name in it mean robust-kbench's), then an adapter defining ``Model`` (wrapping robust-kbench's), ``get_inputs``,
``get_init_inputs`` and one module-level constant per setting, which each configuration overrides. The backward form
follows kbench's convention (task.py): ``Model.forward(*inputs, grad_out)`` returns the gradients of the inputs that
robust-kbench differentiates, then of the parameters that the output depends on (in ``named_parameters`` order),
for the upstream gradient ``grad_out``. ``submission.submission_to_source`` turns a ``.cu``
submission into a kbench action (a ``ModelNew`` that builds it with ``load_inline`` and calls it where robust-kbench
would).
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from kbench_env.tasks.loaders.robust_kbench.cpu_configs import check_deterministic, derive_cpu_settings, derive_held_out
from kbench_env.tasks.loaders.robust_kbench.read import (
    _RESERVED, _config_name, _docstring_line, _exec_rk, _func_file, _identifier, _parameter_names, _probe,
    _signature_defaults, _toplevel_names, forms_in, read_configs,
)
from kbench_env.tasks.loaders.robust_kbench.source import generate_source
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.task import Task, TaskError, build_module

#: A configuration whose inputs, parameters and output hold at most this many elements also runs on the CPU.
CPU_ELEMENTS = 1 << 20


# ---------------------------------------------------------------------- planning


def _fill(pairs: list, init_defaults: dict, input_defaults: dict, folder: Path) -> tuple[list, list, list]:
    """The settings each configuration names (init, then input), and every configuration with all of them, the
    functions' defaults filling in what a configuration leaves out."""
    init_keys = list(dict.fromkeys(k for init, _ in pairs for k in init))
    input_keys = list(dict.fromkeys(k for _, inp in pairs for k in inp))
    filled = []
    for init, inp in pairs:
        full_init, full_inp = {}, {}
        for keys, given, defaults, full, what in ((init_keys, init, init_defaults, full_init, "Model"),
                                                  (input_keys, inp, input_defaults, full_inp, "get_inputs")):
            for k in keys:
                if k in given:
                    full[k] = given[k]
                elif k in defaults:
                    full[k] = defaults[k]
                else:
                    raise TaskError(f"{folder}: setting {k!r} is missing from a configuration and {what} has no default")
        filled.append((full_init, full_inp))
    return init_keys, input_keys, filled


def _constants(init_keys: list, input_keys: list, filled: list, rk_source: str) -> tuple[dict, dict]:
    """``(constant of each init setting, constant of each input setting)``: the module-level names the program gives
    the settings."""
    # One constant per setting; a setting in both init and inputs shares a constant when its values always agree.
    taken: set = _toplevel_names(rk_source)  # a constant must not rebind a name of robust-kbench's file
    shared = [k for k in init_keys if k in input_keys and all(i[k] == j[k] for i, j in filled)]
    const_of_init, const_of_input = {}, {}
    for k in shared:
        const_of_init[k] = const_of_input[k] = _identifier(k, taken)
    for k in init_keys:
        if k not in const_of_init:
            const_of_init[k] = _identifier(k if k not in input_keys else f"init_{k}", taken)
    for k in input_keys:
        if k not in const_of_input:
            const_of_input[k] = _identifier(k if k not in init_keys else f"input_{k}", taken)
    return const_of_init, const_of_input


def _new_shapes(shown: dict, held: list) -> bool:
    """Whether a held-out probe's input shapes differ from the shown one's."""
    return any(p["in_shapes"] != shown["in_shapes"] for p in held)


def _derive(rk, filled: list, probes: list, where: str) -> list:
    """``[(init, inp, probe result, held_out, devices)]``: the configurations kbench adds to robust-kbench's own
    so that each device is shown one and holds out one of other input shapes (robust-kbench's lists often vary
    only settings the inputs do not see: an ``init_method``, a layer's ``out_channels``). The CPU: a small shown
    and an odd held-out one where every configuration is sized for a GPU (``derive_cpu_settings``), else an odd
    one near the shown CPU configuration if none held out has other input shapes. A GPU, which runs every
    configuration (the first shown): an odd one near the first, sized on the meta device, if needed."""
    def probe(i, j, devices, forward=True):
        return _probe(rk, i, j, where, devices, forward)

    out: list = []
    cpu = [n for n, p in enumerate(probes) if p["numel"] <= CPU_ELEMENTS]
    if cpu:
        shown, held = (*filled[cpu[0]], probes[cpu[0]]), [probes[n] for n in cpu[1:]]
    else:  # sized for a GPU only: derive small CPU ones
        out = [(i, j, p, h, ["cpu"]) for i, j, p, h in derive_cpu_settings(rk, *filled[0], probe,
                                                                           limit=CPU_ELEMENTS)]
        shown, held = (out[0][:3] if out else None), [o[2] for o in out[1:]]
    if shown is not None and not _new_shapes(shown[2], held):
        out += [(i, j, p, True, ["cpu"]) for i, j, p, _ in derive_held_out(rk, shown[0], shown[1], probe)]
    if _new_shapes(probes[0], probes[1:]):
        return out
    if cpu and cpu[0] == 0 and out and _new_shapes(probes[0], [out[-1][2]]):  # odd sizes near the GPU's shown one
        out[-1][4].append("cuda")
    else:
        out += [(i, j, p, True, ["cuda"])
                for i, j, p, _ in derive_held_out(rk, *filled[0], probe, devices=("meta",))]
    return out


def _plan(folder: Path, form: str, multi: bool) -> dict:
    """Everything the generated program and the submission adapter need, from the folder (runs the task code)."""
    func_path = _func_file(folder, form)
    rk_source = func_path.read_text()
    rk = _exec_rk(rk_source, str(func_path))
    if form == "backward" and not hasattr(rk, "AutogradFunction"):
        raise TaskError(f"{func_path}: a robust-kbench backward file defines AutogradFunction")
    pairs = read_configs(folder, form, multi, accepts=(_parameter_names(rk.Model.__init__),
                                                       _parameter_names(rk.get_inputs)))
    init_defaults = _signature_defaults(rk.Model.__init__)
    input_defaults = _signature_defaults(rk.get_inputs)
    init_keys, input_keys, filled = _fill(pairs, init_defaults, input_defaults, folder)
    probes = [_probe(rk, init, inp, str(func_path)) for init, inp in filled]
    derived = _derive(rk, filled, probes, str(func_path))
    if derived:
        pairs = list(pairs) + [(i, j) for i, j, _, _, _ in derived]
        init_keys, input_keys, filled = _fill(pairs, init_defaults, input_defaults, folder)
        probes += [p for _, _, p, _, _ in derived]
    const_of_init, const_of_input = _constants(init_keys, input_keys, filled, rk_source)
    n_inputs = probes[0]["n_inputs"]
    if any(p["n_inputs"] != n_inputs for p in probes):
        raise TaskError(f"{func_path}: get_inputs returns a different number of inputs across configurations")
    names = getattr(rk, "input_names", None)
    arg_taken = set(_RESERVED) | set(const_of_init.values())
    if (isinstance(names, (list, tuple)) and len(names) == n_inputs and len(set(names)) == n_inputs
            and all(isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n) and n not in arg_taken
                    for n in names)):
        input_names = list(names)
    else:
        input_names = [f"x{i}" for i in range(n_inputs)]
    grad_inputs = [i for i, g in enumerate(probes[0]["grad_mask"]) if g]
    if form == "backward" and not grad_inputs and not probes[0]["n_params"]:
        raise TaskError(f"{func_path}: nothing to differentiate (no input requires grad and no parameters)")
    smallest = min(zip(filled, probes), key=lambda fp: fp[1]["numel"])
    if smallest[1]["numel"] <= CPU_ELEMENTS:  # two real runs, on the smallest configuration
        check_deterministic(rk, *smallest[0], str(func_path))
    # configurations
    merged = [{**{const_of_init[k]: v for k, v in i.items()}, **{const_of_input[k]: v for k, v in j.items()}}
              for i, j in filled]
    varying = [k for k in (merged[0] if merged else {}) if any(m.get(k) != merged[0][k] for m in merged)]
    configs, seen = [], set()
    for idx, (sizes, probe) in enumerate(zip(merged, probes)):
        name = _config_name(sizes, varying)
        if name in seen:
            name = f"{name}#{idx}"
        seen.add(name)
        sizes = dict(sizes)
        if form == "backward":
            sizes["grad_out_shape"] = probe["out_shape"]
        devices = ["cpu", "cuda"] if probe["numel"] <= CPU_ELEMENTS else ["cuda"]
        held_out = idx > 0
        if idx >= len(merged) - len(derived):  # derived by kbench (``_derive``): its own devices
            _, _, _, held_out, devices = derived[idx - (len(merged) - len(derived))]
        configs.append({"name": name, "sizes": sizes, "devices": devices, "held_out": held_out})
    if configs and "cpu" not in configs[0]["devices"]:  # show one CPU configuration too, if there is one
        for c in configs:
            if "cpu" in c["devices"]:
                c["held_out"] = False
                break
    description = _docstring_line(rk_source) or f"robust-kbench task {folder.name}"
    return {
        "folder": folder, "form": form, "func_path": func_path, "rk_source": rk_source,
        "init_keys": init_keys, "input_keys": input_keys,
        "const_of_init": const_of_init, "const_of_input": const_of_input,
        "input_names": input_names, "grad_inputs": grad_inputs, "configs": configs,
        "description": description, "first": merged[0] if merged else {},
        "out_shape": probes[0]["out_shape"],
    }


# ---------------------------------------------------------------------- loading


_CACHE: dict = {}


def _stamp(folder: Path) -> tuple:
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*")) if p.suffix in (".py", ".json"))


def task_path_name(folder: str | Path, root: str | Path | None = None) -> str:
    """The name of a task folder: its path below the nearest enclosing ``tasks`` folder (robust-kbench keeps every
    task under ``tasks/``, grouped as in ``tasks/kernelbench/level_1/task_1``), else below ``root``, else its own
    name; so that the folders of different groups get different names however the suite was asked for."""
    folder = Path(folder).resolve()
    for parent in folder.parents:
        if parent.name == "tasks":
            return folder.relative_to(parent).as_posix()
    if root is not None and folder != Path(root).resolve() and folder.is_relative_to(Path(root).resolve()):
        return folder.relative_to(Path(root).resolve()).as_posix()
    return folder.name


def load_robust_tasks(folder: str | Path, multi: bool = True, name: str | None = None) -> list[Task]:
    """kbench tasks for a robust-kbench task folder: the forward form, and the backward form if it has one.

    Named ``robust-kbench/<name>/<form>``, ``name`` by default :func:`task_path_name`; configurations are the Cartesian product of the folder's
    ``config_<form>.json`` (see :func:`read_configs`), the first shown and the rest held out, each marked for the
    CPU too when its inputs, parameters and output hold at most ``CPU_ELEMENTS`` elements (if the first is for the
    GPU only, the first CPU configuration is shown as well). Where none is for the CPU, a small shown one and an
    odd held-out one are derived for it; where only one is, an odd held-out one (cpu_configs.py). A form
    whose reference is not deterministic is refused (TaskError), as one that does not run is.
    """
    folder = Path(folder)
    forms = forms_in(folder)
    path_name = name or task_path_name(folder)
    key = (str(folder.resolve()), multi, path_name, _stamp(folder))
    if key in _CACHE:
        return list(_CACHE[key])
    tasks = []
    for form in forms:
        plan = _plan(folder, form, multi)
        plan["name"] = task_name = f"robust-kbench/{path_name}/{form}"
        source = generate_source(plan)
        task = load_task(source, name=task_name)
        build_module(source, {}, f"<{task_name}>")  # the program runs as generated
        tasks.append(task)
    _CACHE[key] = tasks
    return list(tasks)


def load_robust_task(folder: str | Path) -> Task:
    """The forward task of a robust-kbench folder (see :func:`load_robust_tasks`)."""
    return load_robust_tasks(folder)[0]


def unique_path_names(folders: list, root: str | Path) -> dict:
    """``{folder: name}``, each :func:`task_path_name`, except where two folders of the tree would get the same one
    (a ``tasks`` folder nested in another, as in ``tasks/relu`` and ``tasks/group/tasks/relu``): those are named by
    their path below ``root``, which differs between folders; any name still taken gets ``~2``, ``~3``, ... in
    path order."""
    root = Path(root).resolve()
    names = {f: task_path_name(f, root) for f in folders}
    counts: dict = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    for f, n in names.items():
        if counts[n] > 1 and Path(f).resolve().is_relative_to(root) and Path(f).resolve() != root:
            names[f] = Path(f).resolve().relative_to(root).as_posix()
    seen: dict = {}
    for f in folders:
        n = names[f]
        seen[n] = seen.get(n, 0) + 1
        if seen[n] > 1:
            names[f] = f"{n}~{seen[n]}"
    return names


def load_robust_tree(root: str | Path, multi: bool = True,
                     only=None) -> tuple[list[Task], list[tuple[Path, str]]]:
    """The tasks of every robust-kbench task folder at or below ``root`` (groups nest, as in
    ``kernelbench/level_1/task_1``), in path order (numbers by value: task_2 before task_10), and the folders that could not be loaded, each with why.

    One broken folder (its code raises, its configuration is unreadable) is skipped, not fatal: the rest still load.
    Names are unique across the tree (:func:`unique_path_names`). ``only`` (strings) keeps the folders whose path
    name contains one of them.
    """
    root = Path(root)
    folders = sorted({p.parent for p in root.rglob("func_forward.py")
                      if not any(part.startswith((".", "__")) for part in p.parent.relative_to(root).parts)},
                     key=lambda p: [(0, int(s), "") if s.isdigit() else (1, 0, s) for s in re.split(r"(\d+)", p.as_posix())])
    names = unique_path_names(folders, root)
    if only:
        folders = [f for f in folders if any(o in names[f] for o in only)]
    tasks, skipped = [], []
    for folder in folders:
        try:
            tasks.extend(load_robust_tasks(folder, multi, name=names[folder]))
        except Exception as exc:  # noqa: BLE001 - robust-kbench code may raise anything; reported, then skipped
            skipped.append((folder, f"{type(exc).__name__}: {exc}"))
    return tasks, skipped

"""A robust-kbench ``.cu`` submission as a kbench action: the ``ModelNew`` source that builds the file unchanged with
``load_inline`` and calls it where robust-kbench would. The tasks themselves are ``robust_kbench``'s."""

from __future__ import annotations

import ast
import hashlib
import re

from kbench_env.tasks.loaders.robust_kbench.source import _model_class, _rk_block, _string_literal
from kbench_env.tasks.task import Task, TaskError
from kbench_env.tasks import pysource


_PYBIND = re.compile(r"PYBIND11_MODULE\s*\(")
_DEF = re.compile(r"""\.\s*def\s*\(\s*"([A-Za-z_]\w*)\"""")


def exported_functions(cu_source: str) -> list[str]:
    """The functions a robust-kbench ``.cu`` exports through its ``PYBIND11_MODULE`` (``m.def("name", ...)``)."""
    m = _PYBIND.search(cu_source)
    if not m:
        return []
    return list(dict.fromkeys(_DEF.findall(cu_source[m.start():])))


def _declaration(cu_source: str, name: str) -> str | None:
    """``<return type> name(<parameters>);`` for a function the ``.cu`` defines (used when it has no pybind block)."""
    pat = re.compile(r"(^|\n)\s*((?:[\w:<>,]+[\s*&]+)+?)" + name + r"\s*\(([^;{}]*?)\)\s*\{", re.DOTALL)
    m = pat.search(cu_source)
    if not m:
        return None
    ret = " ".join(m.group(2).split())
    params = " ".join(m.group(3).split())
    params = re.sub(r"\s*=\s*[^,]+", "", params)  # default arguments belong to the definition only
    return f"{ret} {name}({params});"


def _rk_meta(task: Task) -> dict:
    tree = pysource.parse(task.source)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROBUST_KBENCH" for t in stmt.targets):
            return ast.literal_eval(stmt.value)
    raise TaskError(f"task {task.name} is not a robust-kbench task (load it with load_robust_tasks)")


def _rk_source_of(task: Task) -> str:
    for stmt in pysource.parse(task.source).body:
        if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
                and any(isinstance(t, ast.Name) and t.id == "ROBUST_KBENCH_SOURCE" for t in stmt.targets)):
            return stmt.value.value
    raise TaskError(f"task {task.name}: the robust-kbench source (ROBUST_KBENCH_SOURCE) is missing from the program")


def submission_to_source(cu_source: str, task: Task) -> str:
    """A kbench action (Python source defining ``ModelNew``) from a robust-kbench ``.cu`` submission for ``task``.

    ``ModelNew`` has the task's constructor and forward signature. It builds the ``.cu`` unchanged with
    ``torch.utils.cpp_extension.load_inline(cuda_sources=...)`` at import (robust-kbench's ``-O3 --use_fast_math``),
    with ``functions=None`` when the file binds its functions itself (``PYBIND11_MODULE``) and
    ``functions=[name]`` plus a declaration otherwise, then calls robust-kbench's ``Model`` with ``fn=ext.forward``
    (forward form) or sets ``AutogradFunction.backward_fn = ext.backward`` and differentiates
    ``Model(..., fn=AutogradFunction.apply)`` (backward form), so that the kernel gets exactly the arguments the
    reference function gets in robust-kbench. CUTLASS headers, which robust-kbench puts on the include path, are
    found where ``$KBENCH_CUTLASS`` (or ``$CUTLASS_PATH``) names a CUTLASS checkout (backends/cutlass.py).
    """
    meta = _rk_meta(task)
    form = meta["form"]
    export = "forward" if form == "forward" else "backward"
    rk_source = _rk_source_of(task)
    exports = exported_functions(cu_source)
    if exports:
        if export not in exports:
            raise ValueError(f"the submission's PYBIND11_MODULE exports {exports}, not {export!r} "
                             f"(robust-kbench calls module.{export})")
        cpp_sources, functions = "", None
    else:
        decl = _declaration(cu_source, export)
        if decl is None:
            raise ValueError(f"the submission neither binds functions with PYBIND11_MODULE nor defines {export}(...)")
        cpp_sources, functions = decl, [export]
    digest = hashlib.sha256((cu_source + task.name).encode()).hexdigest()[:10]
    ext_name = re.sub(r"\W", "_", f"rkb_{meta['task']}_{form}_{digest}")
    plan = {
        "form": form,
        "init_keys": list(meta["init_settings"]),
        "const_of_init": dict(meta["init_settings"]),
        "input_names": list(meta["input_names"]),
    }
    if form == "forward":
        fn_expr = "_ext.forward"
        hookup = ""
    else:
        fn_expr = "_rk.AutogradFunction.apply"
        hookup = "_rk.AutogradFunction.backward_fn = _ext.backward  # as robust-kbench's check_backward_correctness does\n"
    header = (
        f'"""robust-kbench submission ({export}.cu) for {task.name}, adapted to kbench by '
        f'kbench_env.tasks.loaders.robust_kbench."""\n'
    )
    build = (
        f"CUDA_SOURCE = {_string_literal(cu_source)}\n\n"
        "_ext = load_inline(\n"
        f"    name={ext_name!r},\n"
        f"    cpp_sources={cpp_sources!r},\n"
        "    cuda_sources=CUDA_SOURCE,\n"
        f"    functions={functions!r},\n"
        '    extra_cuda_cflags=["-O3", "--use_fast_math"],\n'
        ")\n"
    )
    doc = f"robust-kbench's Model with fn={fn_expr}" + (", differentiated by autograd" if form == "backward" else "")
    parts = [
        header,
        _rk_block(meta["file"], rk_source),
        "",
        "# ==== the submission, unchanged, built with load_inline ====",
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n",
        build,
        hookup + f"GRAD_INPUTS = {tuple(meta['grad_inputs'])!r}\n" if form == "backward" else "",
        "",
        _model_class(plan, "ModelNew", fn_expr, doc),
    ]
    return "\n".join(parts)

"""Builds of the candidate's ``torch.utils.cpp_extension`` calls (``inline`` and ``load`` requests), in the builder:
the sources written as ``load_inline`` writes them, compiled by torch's own ninja rules (the flags, include paths
and link libraries of torch's loader) under a deadline, and never imported here: the worker loads the library.

The backend adds its build policy (backends/extension.py, cuda.py): ``-O3`` where the candidate gave no ``-O``,
the GPU's architecture, CUTLASS's include paths, and light headers (<torch/types.h> in place of
<torch/extension.h>; off with KBENCH_LIGHT_HEADERS=0 on the trusted side), a build that then lacks a declaration of
torch's being built again as written. The candidate's own flags are checked before any of that (flags.py).
"""

from __future__ import annotations

import inspect
import os
import time

from kbench_env.builder import flags, requests
from kbench_env.builder.compiler import CompileError, run

_LIB_EXT = ".so"


def _call(fn, **kwargs):
    """``fn(**kwargs)`` with the arguments this torch version's private function takes."""
    accepted = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kwargs.items() if k in accepted})


def compile_with_ninja(name: str, sources: list, options: dict, directory: str, timeout: float) -> None:
    """Write torch's build.ninja for ``sources`` (paths in ``directory``) and run ninja there."""
    import torch.utils.cpp_extension as cpp

    with_cuda = options.get("with_cuda")
    if with_cuda is None:
        with_cuda = any(s.endswith((".cu", ".cuh")) for s in sources)
    ldflags = _call(cpp._prepare_ldflags, extra_ldflags=list(options.get("extra_ldflags") or []),
                    with_cuda=with_cuda, with_sycl=False, verbose=False, is_standalone=False)
    _call(cpp._write_ninja_file_to_build_library, path=os.path.join(directory, "build.ninja"), name=name,
          sources=sources, extra_cflags=list(options.get("extra_cflags") or []),
          extra_cuda_cflags=list(options.get("extra_cuda_cflags") or []), extra_sycl_cflags=[],
          extra_ldflags=ldflags, extra_include_paths=list(options.get("extra_include_paths") or []),
          with_cuda=with_cuda, with_sycl=False, is_standalone=False)
    jobs = os.environ.get("MAX_JOBS", "")
    run(["ninja", "-v"] + (["-j", jobs] if jobs.isdigit() else []), directory, timeout,
        f"Error building extension '{name}'")


def inline_files(name: str, cpp_sources: list, cuda_sources, functions, options: dict) -> dict:
    """{file name: text} of a load_inline call, as load_inline writes them (implicit headers, bindings)."""
    cpp_sources = list(cpp_sources)
    implicit = not options.get("no_implicit_headers")
    if implicit:
        cpp_sources.insert(0, "#include <torch/extension.h>")
    if functions is not None:
        names = functions if isinstance(functions, dict) else {f: f for f in functions}
        wrap = options.get("with_pytorch_error_handling", True)
        cpp_sources.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        cpp_sources += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{doc}");' if wrap else
                        f'm.def("{f}", {f}, "{doc}");' for f, doc in names.items()]
        cpp_sources.append("}")
    files = {"main.cpp": "\n".join(cpp_sources)}
    if cuda_sources:
        head = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"] if implicit else []
        files["cuda.cu"] = "\n".join(head + list(cuda_sources))
    return files


def _plans(req: dict, backend, light_headers: bool) -> list:
    """The builds to try in order, each (sources for the key, {file: text}, options): the lighter one first."""
    options = backend.adjust_kwargs(dict(req["options"]))
    name = req["name"]
    if req["kind"] == "load":
        files = {f["name"]: f["text"] for f in req["files"]}
        return [(list(files.items()), files, options)]
    cpp, cuda, functions = req["cpp_sources"], req["cuda_sources"], req["functions"]
    plans = []
    if light_headers:
        light_cuda = backend.lighter_cuda_sources(cuda) if cuda else None
        light_cpp = backend.lighter_cpp_sources(cpp, options)
        if light_cuda is not None or light_cpp is not None:
            cpp2, opt2 = light_cpp if light_cpp is not None else (cpp, options)
            cuda2 = light_cuda if light_cuda is not None else cuda
            plans.append(([cpp2, cuda2, functions], inline_files(name, cpp2, cuda2, functions, opt2), opt2))
    plans.append(([cpp, cuda, functions], inline_files(name, cpp, cuda, functions, options), options))
    return plans


def build(req: dict, backend, store, context: dict, timeout: float, max_bytes: int, light_headers: bool = True,
          compile_fn=compile_with_ninja) -> dict:
    """Build an ``inline`` or ``load`` request (requests.normalise'd) in ``store``; returns the manifest with
    ``cached``. Raises BuildRefused (a flag) or CompileError (the compiler's message, with the backend's hint)."""
    flags.check_request(req["options"])
    deadline = time.monotonic() + timeout
    name = req["name"]
    plans = _plans(req, backend, light_headers)
    for i, (key_sources, files, options) in enumerate(plans):
        unit = requests.extension_unit(req["kind"], name, key_sources, options, context)

        def make(directory, files=files, options=options):
            for fname, text in files.items():
                with open(os.path.join(directory, fname), "w") as f:
                    f.write(text)
            compile_fn(name, [os.path.join(directory, f) for f in files], options, directory,
                       deadline - time.monotonic())
            return name + _LIB_EXT, name

        try:
            manifest, cached = store.get_or_build(unit, make, max_bytes)
            return {**manifest, "cached": cached, "python_module": options.get("is_python_module", True)}
        except CompileError as exc:
            if i + 1 < len(plans) and backend.needs_full_headers(str(exc)):
                continue  # the lighter headers lacked a declaration: built as written next
            hint = backend.build_error_hint(str(exc))
            raise CompileError(f"{exc}\n{hint}" if hint else str(exc)) from None
    raise AssertionError("unreachable: the last plan returns or raises")

"""Action formats: which way of writing kernels the prompt asks for and the evaluation accepts (``format=`` on the
env and the Evaluator, ``--format`` on the CLI).

- ``"kernelbench"`` (the default): KernelBench's format, ModelNew with kernels built by
  ``torch.utils.cpp_extension.load_inline`` (``cpp_sources`` on the CPU, ``cuda_sources`` on a GPU); whatever the
  backend accepts is accepted, the fast path and Triton included. Any public KernelBench solution runs unchanged.
- ``"fast"``: kernels that need no torch headers (``kbench_env.fastpath``): an ``extern "C"`` C++ function through
  ``cpp_kernel`` on the CPU (``c++ -shared``), an ``extern "C" __global__`` kernel through ``cuda_kernel`` on a GPU
  (``nvcc -cubin``), launched on torch tensors; builds take about a second instead of 10-90 s. The point is the
  build time, so ``torch.utils.cpp_extension`` is refused: by the screen where the source shows it (an import, a
  ``load_inline`` call), and by the builder for any other build kind the worker asks for (a hidden
  ``load_inline`` fails at build, ``builder_kinds``).
- ``"triton"``: ``@triton.jit`` kernels launched from forward (the triton backend). Only on a GPU: on the CPU
  Triton's kernels run in its interpreter, whose times say nothing about speed, so a policy trained there learns
  nothing about fast kernels (``backend="triton"`` with the kernelbench format still runs the interpreter, for
  correctness tests). No C++ extension builds.

A format fixes the backend (fast: the device's own, cpu or cuda; triton: triton); ``resolve_backend`` says so, and
refuses, with one line, a backend or device the format cannot use.
"""

from __future__ import annotations

import ast

from kbench_env.backends import default_backend
from kbench_env.machine.device import Device
from kbench_env.pipeline.format_examples import FAST_EXAMPLES
from kbench_env.pipeline.screen import ScreenError, screen

FORMATS = ("kernelbench", "fast", "triton")
DEFAULT = "kernelbench"

_FAST_CALL = {"cpu": "cpp_kernel", "cuda": "cuda_kernel"}


def check_format(fmt) -> str:
    """``fmt`` if it names a format; otherwise a ValueError that lists them."""
    if fmt in FORMATS:
        return fmt
    raise ValueError(f"unknown format {fmt!r}: use 'kernelbench' (load_inline, the default), 'fast' (extern \"C\" "
                     f"kernels through kbench_env.fastpath: ~1 s builds) or 'triton' (@triton.jit kernels, GPU only)")


def resolve_backend(fmt: str, backend: str | None, device: str) -> str | None:
    """The backend ``fmt`` uses on ``device`` given the requested ``backend`` (None: the device's default); a
    ValueError of one line for a combination that cannot run."""
    fmt = check_format(fmt)
    if fmt == "kernelbench":
        return backend
    is_cpu = Device.parse(device).is_cpu
    if fmt == "triton":
        if is_cpu:
            raise ValueError(f"format='triton' needs a CUDA device, not {device!r}: on the CPU Triton runs only in "
                             f"its interpreter, whose times say nothing about speed; use format='fast' on the CPU")
        if backend not in (None, "triton"):
            raise ValueError(f"format='triton' uses the triton backend, not backend={backend!r}: leave backend out")
        return "triton"
    own = "cpu" if is_cpu else "cuda"
    if backend not in (None, own):
        raise ValueError(f"format='fast' on {device!r} uses the {own} backend ({_FAST_CALL[own]}), not "
                         f"backend={backend!r}: leave backend out")
    return own


def resolve(fmt, backend: str | None, device: str) -> tuple[str, str]:
    """(the format, the backend name) an Evaluator on ``device`` uses for ``fmt`` and the requested ``backend``."""
    fmt = check_format(fmt)
    return fmt, resolve_backend(fmt, backend, device) or default_backend(device)


def builder_kinds(fmt: str) -> tuple | None:
    """The build kinds (builder/requests.py) the trusted builder accepts under ``fmt``; None: all of them."""
    return {"kernelbench": None, "fast": ("fast",), "triton": ()}[check_format(fmt)]


def _uses_cpp_extension(tree: ast.Module) -> str | None:
    """What in the source reaches torch.utils.cpp_extension (an import, the name, a load_inline call), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any("cpp_extension" in a.name for a in node.names):
            return "import torch.utils.cpp_extension"
        if isinstance(node, ast.ImportFrom) and ("cpp_extension" in (node.module or "")
                                                 or any(a.name == "cpp_extension" for a in node.names)):
            return f"from {node.module} import ..."
        if isinstance(node, ast.Attribute) and node.attr in ("cpp_extension", "load_inline"):
            return node.attr
        if isinstance(node, ast.Name) and node.id in ("cpp_extension", "load_inline"):
            return node.id
    return None


def _calls(tree: ast.Module, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) == name:
                return True
    return False


def screen_format(fmt: str, backend_name: str, tree: ast.Module) -> None:
    """Raise ScreenError when ``tree`` is not written in ``fmt`` (after the backend's own screen has passed)."""
    if fmt == "kernelbench":
        return
    used = _uses_cpp_extension(tree)
    if fmt == "fast":
        call = _FAST_CALL.get(backend_name, "cpp_kernel")
        if used:
            raise ScreenError(f"the fast format builds kernels with kbench_env.fastpath.{call} (about a second), "
                              f"not torch.utils.cpp_extension (found: {used}); write an extern \"C\" kernel and "
                              f"wrap it with {call}(source, name, flags)")
        if not _calls(tree, call):
            raise ScreenError(f"the fast format expects kernels built with kbench_env.fastpath.{call}(source, name, "
                              f"flags) and called from ModelNew.forward")
    elif fmt == "triton" and used:
        raise ScreenError(f"the triton format takes Triton kernels only, not C++ extensions (found: {used})")


def screen_action(source: str, backend, fmt: str) -> ast.Module:
    """The screen (screen.py) with the format's own checks; raises ScreenError. The fast format's checks replace the
    backend's, whose message would ask for load_inline."""
    tree = screen(source, None if fmt == "fast" else backend)
    screen_format(fmt, backend.name, tree)
    return tree


def format_rules(fmt: str, backend) -> str:
    """The prompt's rules under ``fmt`` for ``backend`` (a backends.Backend)."""
    if fmt != "fast":
        return backend.rules()
    if backend.name == "cuda":
        how = ("Write each kernel as an extern \"C\" __global__ CUDA C++ function (no torch headers; <cstdint> and "
               "CUDA's own headers are fine) and build it with kbench_env.fastpath.cuda_kernel(source, name, "
               "flags=None) (nvcc -cubin for this GPU, about a second). It returns launch(grid, block, *args, "
               "shared_mem=0), which runs on torch's current stream; tensors pass as their data pointers (make them "
               "contiguous), Python ints as 64-bit integers (long long), Python floats as float. TF32 and reduced "
               "precision are off for float32 tasks: keep float32 accumulation.")
    else:
        how = ("Write each kernel as an extern \"C\" C++ function (no torch headers; the C++ standard library and "
               "OpenMP are fine) and build it with kbench_env.fastpath.cpp_kernel(source, name, flags) (c++ -shared, "
               "about a second; -O3 unless you give an -O flag; add -fopenmp for #pragma omp). It returns a callable; "
               "tensors pass as their data pointers (make them contiguous), Python ints as int64_t, Python floats as "
               "double.")
    return (f"Backend: {backend.name}. {how} torch.utils.cpp_extension (load_inline, load) is not "
            "allowed in this format. ModelNew must have the same constructor and forward signature as Model and "
            "produce the same outputs (same shapes and dtypes) on every input configuration, including ones not "
            "shown here. Inside forward, calls into PyTorch compute operators in place of your kernels are not "
            "allowed; allocation (empty, empty_like), views, reshapes and .contiguous() are fine.")


def format_line(fmt: str) -> str:
    """The prompt's statement of the format asked for."""
    return {"kernelbench": "Answer format: kernelbench (a ModelNew as KernelBench writes it; the backend's rules "
                           "below say how its kernels are built).",
            "fast": "Answer format: fast (extern \"C\" kernels built by kbench_env.fastpath in about a second; "
                    "no torch.utils.cpp_extension).",
            "triton": "Answer format: triton (@triton.jit kernels launched from ModelNew.forward)."}[fmt]


def format_example(fmt: str, backend) -> str:
    """The one-shot example answer of ``fmt`` for ``backend``."""
    if fmt == "fast":
        return FAST_EXAMPLES[backend.name]
    return backend.example()

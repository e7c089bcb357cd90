"""Candidates built with torch.utils.cpp_extension (``load_inline`` / ``load``), shared by the CPU and CUDA
backends: builds go to ``<build_root>/<name>-<hash>``, where the hash covers the sources, flags, torch version,
compiler and backend, so a repeated source is never rebuilt and error text carries no random paths; ``-O3`` is
added where the candidate gives no optimisation level (torch's default flags do not optimise); returned extension
modules are wrapped so that calls into them are counted (decoy detection)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache

import torch

from kbench_env.backends.base import Backend


@lru_cache(maxsize=1)
def compiler_id() -> str:
    cxx = os.environ.get("CXX", "c++")
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return cxx


EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][^\n]*$', re.M)
LIGHT_INCLUDE = "#include <torch/types.h>  // kbench: in place of <torch/extension.h> (faster to build)"
# What <torch/extension.h> declares and <torch/types.h> does not: the C++ frontend's modules, Python bindings.
NEEDS_EXTENSION_H = re.compile(
    r"\btorch::(?:nn|optim|jit|data|serialize|python|fft|linalg|special|nested|sparse|xpu|mps|cuda|utils|"
    r"enumtype|autograd|Module|save|load|manual_seed)\b|pybind11|PYBIND11_|\bpy::|\bTORCH_MODULE\b|"
    r"\bTORCH_LIBRARY")
# nvcc's (EDG's) and g++'s words for a name from torch's namespaces that is not declared.
MISSING_TORCH_DECLARATION = re.compile(
    r'(?:namespace|identifier|name)[^\n]*"(?:torch|at|c10|py|pybind11)(?:::|")|'
    r"(?:'(?:torch|at|c10|py|pybind11)(?:::[\w:]+)?' (?:has not been declared|is not a member|was not declared))|"
    r"is not a member of '(?:torch|at|c10)")


def lighten(sources, head: str = ""):
    """``sources`` (a string or a list of strings, as load_inline takes them) with each <torch/extension.h>
    include replaced by <torch/types.h> (one line for one) and ``head`` put first, in the same shape; None where
    they cannot be lightened (not text, or using what only <torch/extension.h> declares)."""
    texts = [sources] if isinstance(sources, str) else list(sources or [])
    if not texts or not all(isinstance(t, str) for t in texts) or NEEDS_EXTENSION_H.search("\n".join(texts)):
        return None
    light = [EXTENSION_INCLUDE.sub(LIGHT_INCLUDE, t) for t in texts]
    light[0] = head + light[0]
    return light[0] if isinstance(sources, str) else light


def _with_opt(flags) -> list:
    flags = list(flags or [])
    if not any(f.startswith("-O") for f in flags):
        flags.append("-O3")
    return flags


class ExtensionBackend(Backend):
    """Worker-side build set-up for cpp_extension candidates."""

    def __init__(self):
        super().__init__()
        self._build_failed = False
        self._cached: bool | None = None

    def build_environment(self) -> dict:
        """Extra environment variables for builds (e.g. the CUDA architecture)."""
        return {}

    def adjust_kwargs(self, kwargs: dict) -> dict:
        kwargs["extra_cflags"] = _with_opt(kwargs.get("extra_cflags"))
        return kwargs

    def _build_dir(self, build_root: str, kind: str, name: str, payload: dict) -> str:
        """The build directory of one extension: named by everything its build depends on."""
        key = json.dumps({"kind": kind, "name": name, "payload": payload, "torch": torch.__version__,
                          "cxx": compiler_id(), "backend": self.name, "env": self.build_environment()},
                         sort_keys=True, default=str)
        h = hashlib.sha256(key.encode()).hexdigest()[:20]
        d = os.path.join(build_root, f"{name}-{h}")
        self._cached = os.path.isdir(d) and any(f.endswith(".so") for f in os.listdir(d))
        os.makedirs(d, exist_ok=True)
        return d

    def prepare_worker(self, build_root: str) -> None:
        # Late: the fork server imports this module, and must not import cpp_extension (sandbox/forkserver.py)
        import torch.utils.cpp_extension as cpp

        os.makedirs(build_root, exist_ok=True)
        os.environ.update(self.build_environment())
        os.environ["KBENCH_BUILD_ROOT"] = build_root  # fast-path builds (fastpath.py) go under it too
        backend = self
        original_inline, original_load = cpp.load_inline, cpp.load

        def _build(original, kind, name, first, args, kwargs, payload_sources):
            kwargs = backend.adjust_kwargs(dict(kwargs))
            payload = {"sources": payload_sources, "args": args,
                       "kw": {k: v for k, v in kwargs.items() if k != "build_directory"}}
            kwargs["build_directory"] = backend._build_dir(build_root, kind, name, payload)
            # One build per directory at a time across processes: workers without the overlay of the build cache
            # (GPU workers) share the directory, and torch's own lock lets a waiter import a library whose build
            # failed or is half-written. A waiter then finds the finished build or builds it and gets its own error.
            with open(kwargs["build_directory"] + ".lock", "a+") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                # torch's own lock is a file in the build directory that a process killed while building or
                # loading (a timeout, the memory watchdog, its parent's death) leaves behind, and every later
                # load of that directory waits on it forever (tests/test_faults.py reproduces it). Holding the
                # lock above, no other process is inside torch's, so a file found here is stale.
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(kwargs["build_directory"], "lock"))
                try:
                    mod = original(name, *first, *args, **kwargs)
                except Exception as exc:
                    backend._build_failed = True
                    hint = backend.build_error_hint(str(exc))
                    if hint:
                        raise RuntimeError(f"{exc}\n{hint}") from exc
                    raise
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
            return backend.count_calls(mod) if mod is not None else mod

        def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
            light_headers = os.environ.get("KBENCH_LIGHT_HEADERS", "1") != "0"  # 0: build every source as written
            light_cuda = backend.lighter_cuda_sources(cuda_sources) if cuda_sources and light_headers else None
            light_cpp = backend.lighter_cpp_sources(cpp_sources, args, kwargs) if light_headers else None
            if light_cuda is not None or light_cpp is not None:  # without <torch/extension.h> (see those methods)
                cpp2, kw2 = light_cpp if light_cpp is not None else (cpp_sources, kwargs)
                cuda2 = light_cuda if light_cuda is not None else cuda_sources
                try:
                    return _build(original_inline, "inline", name, (cpp2, cuda2), args, kw2, [cpp2, cuda2])
                except Exception as exc:  # noqa: BLE001 - decided below: the candidate's error, or the headers'
                    if not backend.needs_full_headers(str(exc)):
                        raise
                    backend._build_failed = False
                    print("kbench: the sources need more of torch than <torch/types.h>: rebuilding them with "
                          "<torch/extension.h> as written", file=sys.stderr, flush=True)
            return _build(original_inline, "inline", name, (cpp_sources, cuda_sources), args, kwargs,
                          [cpp_sources, cuda_sources])

        def load(name, sources, *args, **kwargs):
            srcs = [sources] if isinstance(sources, str) else list(sources)
            texts = []
            for src in srcs:
                try:
                    with open(src) as f:
                        texts.append(f.read())
                except OSError:
                    texts.append(src)
            return _build(original_load, "load", name, (sources,), args, kwargs, texts)

        cpp.load_inline = load_inline
        cpp.load = load
        if shutil.which("ninja") is None:  # torch requires ninja on PATH; the venv's bin may not be on it
            venv_bin = os.path.dirname(os.path.realpath(sys.executable))
            os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")

    def lighter_cuda_sources(self, cuda_sources):
        """``cuda_sources`` to build in place of the candidate's, with lighter headers, or None (build as written).
        Only the CUDA backend has any (backends/cuda.py)."""
        return None

    def lighter_cpp_sources(self, cpp_sources, args: tuple, kwargs: dict):
        """``(cpp_sources, kwargs)`` to build in place of the candidate's, or None (build as written).

        load_inline puts <torch/extension.h> (all of libtorch's C++ API) on top of ``cpp_sources``; the kernels and
        the bindings it generates need only <torch/types.h> and <torch/python.h>. Measured (bench/results/
        header_cost_cpu.md; 2 cores, g++ 12, torch 2.13): a bound function's file compiles in 22 s with the first and
        16 s with the other two (a whole cold build: bench/results/eval_cost_cpu.md). So,
        unless the candidate asked for something else (``no_implicit_headers``, positional options) or uses what
        only the full header declares, those two are included instead (``no_implicit_headers=True``) and its own
        <torch/extension.h> lines become <torch/types.h>; a build that then lacks a declaration from torch is
        rebuilt as written (needs_full_headers)."""
        if args or kwargs.get("no_implicit_headers") or kwargs.get("use_pch"):
            return None
        head = "#include <torch/types.h>\n" + ("#include <torch/python.h>\n" if kwargs.get("is_python_module", True)
                                                else "")
        light = lighten(cpp_sources, head)
        return None if light is None else (light, {**kwargs, "no_implicit_headers": True})

    def build_error_hint(self, error: str) -> str | None:
        """A line to add to a failed build's error saying what to do (backends/cuda.py: a CUTLASS path), or None."""
        return None

    def needs_full_headers(self, error: str) -> bool:
        """Whether a failed build of lighter sources failed for want of the headers they dropped."""
        return bool(MISSING_TORCH_DECLARATION.search(error))

    def last_build_failed(self) -> bool:
        return self._build_failed

    def build_was_cached(self) -> bool | None:
        return self._cached


compiler_id()  # once, at import: the fork server imports this module, so workers do not run `c++ --version`

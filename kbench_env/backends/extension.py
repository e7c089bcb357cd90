"""Candidates built with torch.utils.cpp_extension (``load_inline`` / ``load``), shared by the CPU and CUDA
backends: the build policy the trusted builder applies (builder/torch_ext.py): ``-O3`` where the candidate gives no
optimisation level (torch's default flags do not optimise), lighter headers, the hints added to a failed build's
error; in the worker, ``load_inline`` and ``load`` are routed to the builder and the extension modules they return
are wrapped so that calls into them are counted (decoy detection)."""

from __future__ import annotations

import os
import re
import subprocess
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
    """The build policy of cpp_extension candidates, and their routing to the builder in the worker."""

    def build_environment(self, device: str | None = None) -> dict:
        """Extra environment variables for builds for ``device`` (e.g. its CUDA architecture), read in the builder
        process, or for a remote builder in a process of its own (builder/client.build_environment)."""
        return {}

    def adjust_kwargs(self, kwargs: dict) -> dict:
        kwargs["extra_cflags"] = _with_opt(kwargs.get("extra_cflags"))
        return kwargs

    def prepare_worker(self, builds) -> None:
        super().prepare_worker(builds)
        builds.route_cpp_extension(self)

    def lighter_cuda_sources(self, cuda_sources):
        """``cuda_sources`` to build in place of the candidate's, with lighter headers, or None (build as written).
        Only the CUDA backend has any (backends/cuda.py)."""
        return None

    def narrow_cuda_sources(self, cuda_sources):
        """(head, sources): a narrower torch head for the device code and its sources, to try before the light
        build, or None. Only the CUDA backend has one (backends/cuda.py, narrow_head.py)."""
        return None

    def split_cuda_sources(self, cuda_sources):
        """The device code cut into a host file and a device file (backends/host_device_split.Split), to try
        before the others, or None. Only the CUDA backend cuts (backends/cuda.py)."""
        return None

    def lighter_cpp_sources(self, cpp_sources, kwargs: dict):
        """``(cpp_sources, kwargs)`` to build in place of the candidate's, or None (build as written).

        load_inline puts <torch/extension.h> (all of libtorch's C++ API) on top of ``cpp_sources``; the kernels and
        the bindings it generates need only <torch/types.h> and <torch/python.h>, with which a bound function's
        file compiles in about three quarters of the time (header cost in bench/RESULTS.md). So,
        unless the candidate asked for something else (``no_implicit_headers``) or uses what
        only the full header declares, those two are included instead (``no_implicit_headers=True``) and its own
        <torch/extension.h> lines become <torch/types.h>; a build that then lacks a declaration from torch is
        rebuilt as written (needs_full_headers)."""
        if kwargs.get("no_implicit_headers"):
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


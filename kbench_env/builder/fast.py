"""Fast-path builds (fastpath.py's ``cpp_kernel`` and ``cuda_kernel``): one compiler command, ``c++ -shared`` to a
shared library or ``nvcc -cubin`` to a cubin for the GPU's architecture, no torch headers; the command and the
source name the build (requests.fast_unit)."""

from __future__ import annotations

import os
import tempfile

from kbench_env.builder import flags, requests
from kbench_env.builder.compiler import run
from kbench_env.builder.store import Store


def command_head(language: str, flag_list: list, arch: str | None) -> tuple[list, str]:
    """(the compiler command without its input and output, the compiler's name)."""
    if language == "cpp":
        cxx = os.environ.get("CXX", "c++")
        head = [cxx, "-shared", "-fPIC", "-std=c++17", *flag_list]
        if not any(f.startswith("-O") for f in flag_list):
            head.append("-O3")
        return head, cxx
    nvcc = os.environ.get("NVCC", "nvcc")
    return [nvcc, "-cubin", f"-arch={arch}", "-O3", *flag_list], nvcc


def _command_and_unit(req: dict) -> tuple[list, str]:
    head, tool = command_head(req["language"], req["flags"], req["arch"])
    return head, requests.fast_unit(head, req["source"], tool)


def unit_of(req: dict) -> str:
    """The unit a ``fast`` request (requests.normalise'd) is built as."""
    return _command_and_unit(req)[1]


def build(req: dict, store: Store, timeout: float, max_bytes: int) -> dict:
    """Build a ``fast`` request (requests.normalise'd) in ``store``; returns the manifest with ``cached``."""
    language = req["language"]
    flags.check_fast(req["flags"], language)
    head, unit = _command_and_unit(req)
    src, out = ("kernel.cpp", "kernel.so") if language == "cpp" else ("kernel.cu", "kernel.cubin")

    def make(directory):
        with open(os.path.join(directory, src), "w") as f:
            f.write(req["source"])
        run([*head, src, "-o", out], directory, timeout, "fast-path build failed")
        return out, None

    manifest, cached = store.get_or_build(unit, make, max_bytes)
    return {**manifest, "cached": cached}


def build_here(language: str, source: str, flag_list: list, arch: str | None = None) -> str:
    """The artifact's path, built in this process: the fast path used outside kbench's worker (a candidate module
    imported directly), in a cache under the temporary directory."""
    req = requests.normalise({"kind": "fast", "language": language, "source": source, "flags": flag_list,
                              "arch": arch})
    store = Store(os.path.join(tempfile.gettempdir(), "kbench-fast"))
    return build(req, store, timeout=600.0, max_bytes=1 << 40)["path"]

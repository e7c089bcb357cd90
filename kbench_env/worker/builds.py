"""Inside the worker: the candidate's builds asked of the trusted builder. ``load_inline``, ``load`` (patched by the
backend's ``prepare_worker``) and the fast path's kernels become a BUILD request on the worker's protocol channel;
the trusted side relays it (sandbox/worker_build.py) and answers BUILT with the path of the library in the build
cache (which this process can read, not write) or the compiler's trimmed error; the library is then loaded here.

Nothing is compiled in this process: on the CPU the compilers' own programs are not even visible to it
(sandbox/job.py).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import threading

import torch

from kbench_env.fastpath import call_count as fast_path_calls, set_builder as route_fast_builds
from kbench_env.builder.requests import OPTIONS
from kbench_env.protocol import messages as msg
from kbench_env.protocol.wire import pack, unpack


class BuildClient:
    """The worker's end of the builds: sends requests, loads what comes back, remembers whether any failed and
    whether all were found in the cache."""

    def __init__(self, conn):
        self._conn = conn
        self._lock = threading.Lock()  # one exchange at a time, whichever thread of the candidate's builds
        self.failed = False  # a build failed (the load's error is then a build error)
        self._cached: list = []

    def cached(self) -> bool | None:
        """Whether every build was found in the cache (None: nothing was built)."""
        return all(self._cached) if self._cached else None

    def request(self, request: dict) -> dict:
        """Send one BUILD request and wait for its BUILT; raise RuntimeError with the builder's message if the build
        failed."""
        with self._lock:
            self._conn.send_bytes(pack({"type": msg.BUILD, **request}))
            header, _ = unpack(self._conn.recv_bytes())
        if header.get("type") != msg.BUILT:
            raise RuntimeError(f"protocol error: the trusted side answered a build request with {header.get('type')!r}")
        if not header.get("ok"):
            self.failed = True
            raise RuntimeError(header.get("message") or "the build failed")
        self._cached.append(bool(header.get("cached")))
        return header

    # ------------------------------------------------------------------ torch.utils.cpp_extension
    def route_cpp_extension(self, backend) -> None:
        """``torch.utils.cpp_extension.load_inline`` and ``load`` build through the builder; the modules they
        return are wrapped by ``backend.count_calls`` (decoy detection)."""
        import torch.utils.cpp_extension as cpp

        inline_sig, load_sig = inspect.signature(cpp.load_inline), inspect.signature(cpp.load)
        client = self

        def load_inline(*args, **kwargs):
            a = inline_sig.bind(*args, **kwargs).arguments
            if a.get("sycl_sources") or a.get("extra_sycl_cflags"):
                raise RuntimeError("SYCL sources are not supported")
            req = {"kind": "inline", "name": a["name"], "cpp_sources": _plain(a["cpp_sources"]),
                   "cuda_sources": _plain(a.get("cuda_sources")), "functions": _plain(a.get("functions")),
                   "options": _options(a)}
            return client._load(client.request(req), backend)

        def load(*args, **kwargs):
            a = load_sig.bind(*args, **kwargs).arguments
            if a.get("is_standalone"):
                raise RuntimeError("is_standalone=True (an executable) is not supported: build a library")
            files = []
            for src in [a["sources"]] if isinstance(a["sources"], (str, os.PathLike)) else list(a["sources"]):
                with open(src) as f:
                    files.append({"name": os.path.basename(os.fspath(src)), "text": f.read()})
            req = {"kind": "load", "name": a["name"], "files": files, "options": _options(a)}
            return client._load(client.request(req), backend)

        load_inline.__doc__, load.__doc__ = cpp.load_inline.__doc__, cpp.load.__doc__
        cpp.load_inline, cpp.load = load_inline, load

    @staticmethod
    def _load(reply: dict, backend):
        """Load a built extension as torch's loader does: a Python module, or a library of operators."""
        path = reply["path"]
        if not reply.get("python_module", True):
            torch.ops.load_library(path)
            return path
        spec = importlib.util.spec_from_file_location(reply["module"], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return backend.count_calls(module)

    # ------------------------------------------------------------------ the fast path
    def route_fastpath(self):
        """The fast path's kernels (fastpath.py) build through the builder. Returns the fast path's call counter
        (the backend adds it to the candidate's own calls: backends/base.py)."""
        def build(language: str, source: str, flags: list, arch: str | None) -> str:
            req = {"kind": "fast", "language": language, "source": source, "flags": _plain(flags), "arch": arch}
            return self.request(req)["path"]

        route_fast_builds(build)
        return fast_path_calls


def _plain(value):
    """``value`` as JSON can carry it (tuples as lists); anything else is left for the request's check to refuse."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _options(arguments: dict) -> dict:
    """The keyword arguments of a load_inline/load call that shape the build (those left out change nothing)."""
    return {k: _plain(v) for k, v in arguments.items() if k in OPTIONS and (v is not None or k == "with_cuda")}

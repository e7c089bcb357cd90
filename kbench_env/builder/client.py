"""``Builder``: the trusted side's handle on a builder process (server.py), one per Evaluator, shared by its
workers (the relay of each worker's requests is sandbox/worker_build.py). The process starts on the first request,
again after it dies, and is stopped after ``IDLE_S`` without requests; requests run concurrently in it (up to
``workers``, the Evaluator's build pool), each answered through a Future. ``history`` keeps what was built or
found, newest last. A reply with ``internal`` set is kbench's failure, not the candidate's (BuilderError)."""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import shutil
import signal
import tempfile
import threading
from concurrent.futures import Future

from kbench_env.builder import server
from kbench_env.config import environ
from kbench_env.protocol.wire import pack, unpack
from kbench_env.sandbox.confine.cgroup import kill_session
from kbench_env.sandbox.confine.environment import scrubbed_environment
from kbench_env.sandbox.confine.forkserver import context, spawning
from kbench_env.sandbox.confine.policy import Limits


#: Seconds without a request after which the builder process is stopped (the next request starts another).
IDLE_S = 120.0


class BuilderError(RuntimeError):
    """The builder process could not be started or died with requests in flight."""


def request_defaults(limits: Limits, max_bytes: int | None, light_headers: bool | None) -> tuple[int, bool]:
    """(max_bytes, light_headers) of a request, those left out (None) given: Limits.build_bytes, and lighter
    headers unless $KBENCH_LIGHT_HEADERS is 0 (0: build every source as written)."""
    if light_headers is None:
        light_headers = environ.get("KBENCH_LIGHT_HEADERS")
    return int(limits.build_bytes if max_bytes is None else max_bytes), light_headers


def build_environment(backend: str, device: str, timeout: float = 60.0) -> dict:
    """The build environment (backend.build_environment) of ``device``, read in a process started from the fork
    server, as the builder process reads it: this process does not initialise CUDA (machine/device_lock.py). For a
    builder that does not read its own (a remote builder, builder/ray_builds.py). Raises BuilderError if it cannot be
    read."""
    ctx = context()
    conn, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=server.send_build_environment, args=(child, backend, device), daemon=True,
                       name="kbench-build-env")
    try:
        with spawning():
            proc.start()
    finally:
        child.close()
    try:
        answer = conn.recv() if conn.poll(timeout) else {"ok": False, "message": f"no answer within {timeout:.0f} s"}
    except (EOFError, OSError):
        answer = {"ok": False, "message": f"the process exited (exit code {proc.exitcode})"}
    finally:
        conn.close()
        proc.join(timeout=5)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
    if not answer.get("ok"):
        raise BuilderError(f"could not read the {backend} backend's build environment for {device}: "
                           f"{answer.get('message')}")
    return answer["env"]


class Builder:
    """Builds for one backend, device and build root (see the module docstring). ``kinds``: the request kinds it
    accepts (None: all; the action format's, pipeline/formats.builder_kinds); any other is refused unbuilt.
    ``build_env``: the build environment (backend.build_environment()) to use in place of the builder's own."""

    def __init__(self, backend: str, device: str, build_root: str, limits: Limits | None = None,
                 workers: int = 1, kinds: tuple | None = None, build_env: dict | None = None):
        self.backend, self.device, self.build_root = backend, device, os.path.realpath(build_root)
        self.build_env = build_env  # None: the backend's, read in the builder process (server._confine)
        self.kinds = None if kinds is None else tuple(kinds)
        self.limits = limits or Limits()
        self.workers = max(1, int(workers))
        self.history: collections.deque = collections.deque(maxlen=4096)
        self.protections: dict = {}
        self.pid: int | None = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict = {}
        self._proc = self._conn = self._scratch = None
        self._closed = False
        self._idle: threading.Timer | None = None

    # ------------------------------------------------------------------ requests
    def submit(self, request: dict, timeout: float, max_bytes: int | None = None,
               light_headers: bool | None = None) -> Future:
        """Send a build request (requests.py); the Future's result is the builder's reply: {"ok": True, "path",
        "module", "cached", "unit", "bytes", ...} or {"ok": False, "message"}. Raises BuilderError if the builder
        cannot be started."""
        if self.kinds is not None and request.get("kind") not in self.kinds:
            refused: Future = Future()
            allowed = ", ".join(self.kinds) or "none"
            refused.set_result({"ok": False, "refused": True, "message": (
                f"a {request.get('kind')!r} build is not allowed in this evaluation's action format (builds "
                f"allowed: {allowed}); the fast format builds only kbench_env.fastpath kernels, the triton format "
                f"none")})
            return refused
        max_bytes, light_headers = request_defaults(self.limits, max_bytes, light_headers)
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise BuilderError("the builder is closed")
            self._start()
            if self._idle is not None:
                self._idle.cancel()
            rid = next(self._ids)
            self._pending[rid] = fut
            conn = self._conn
        header = {"id": rid, "request": request, "timeout": float(timeout), "light_headers": light_headers,
                  "max_bytes": max_bytes}
        try:
            with self._send_lock:
                conn.send_bytes(pack(header))
        except (OSError, ValueError) as exc:
            self._fail_all(f"the builder process could not be reached: {exc}")
        return fut

    def build(self, request: dict, timeout: float, **kw) -> dict:
        """``submit`` and wait (up to ``timeout`` plus a margin for the reply)."""
        return self.submit(request, timeout, **kw).result(timeout=timeout + 30)

    # ------------------------------------------------------------------ process
    def _start(self) -> None:
        if self._proc is not None and self._proc.exitcode is None:
            return
        self._scratch = self._scratch or tempfile.mkdtemp(prefix="kbench-builder-")
        l = self.limits
        config = {"backend": self.backend, "device": self.device, "build_root": self.build_root,
                  "scratch": self._scratch, "workers": self.workers, "env": scrubbed_environment(worker=True),
                  "isolate": l.isolation, "memory_bytes": l.memory_bytes, "file_bytes": l.file_bytes,
                  "extra_read": list(l.extra_read_paths), "build_env": self.build_env}
        ctx = context()
        conn, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=server.main, args=(child, config), daemon=True, name="kbench-builder")
        try:
            with spawning():
                proc.start()
        finally:
            child.close()
        if not conn.poll(60.0):
            self._kill(proc)
            raise BuilderError("the builder process did not start within 60 s")
        try:
            hello, _ = unpack(conn.recv_bytes())
        except (EOFError, OSError) as exc:
            self._kill(proc)
            raise BuilderError(f"the builder process exited while starting (exit code {proc.exitcode}); see "
                               f"{os.path.join(self._scratch, 'builder.log')}") from exc
        self.protections, self.pid = hello.get("protections", {}), proc.pid
        self._proc, self._conn = proc, conn
        threading.Thread(target=self._read, args=(conn, proc), name="kbench-builder-replies", daemon=True).start()

    def _read(self, conn, proc) -> None:
        while True:
            try:
                reply, _ = unpack(conn.recv_bytes())
            except (EOFError, OSError, ValueError, TypeError):  # (TypeError: the connection closed meanwhile)
                break
            with self._lock:
                fut = self._pending.pop(reply.get("id"), None)
                if not self._pending and proc is self._proc:
                    self._idle = threading.Timer(IDLE_S, self._stop_if_idle, args=(proc,))
                    self._idle.daemon = True
                    self._idle.start()
            if fut is not None:
                self.history.append({k: reply.get(k) for k in ("unit", "ok", "cached", "seconds", "bytes", "pch")})
                fut.set_result(reply)
        proc.join(timeout=1)
        self._fail_all(f"the builder process exited (exit code {proc.exitcode}); its log: "
                       f"{os.path.join(self._scratch or '', 'builder.log')}", proc)

    def _stop_if_idle(self, proc) -> None:
        with self._lock:
            if self._pending or proc is not self._proc:
                return
            conn, self._proc, self._conn = self._conn, None, None
        conn.close()
        self._kill(proc)

    def _fail_all(self, message: str, proc=None) -> None:
        with self._lock:
            if proc is not None and proc is not self._proc:
                return  # an earlier process's end: its requests were failed when it was replaced
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_result({"ok": False, "internal": True, "message": f"internal builder error: {message}"})

    @staticmethod
    def _kill(proc) -> None:
        if proc.pid is not None:
            for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), lambda: os.kill(proc.pid, signal.SIGKILL)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill()
            kill_session(proc.pid)  # its compilers (process groups of their own in its session)
        proc.join(timeout=5)

    def close(self) -> None:
        """Stop the builder process and its compilers; requests in flight fail."""
        with self._lock:
            self._closed = True
            proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
            if self._idle is not None:
                self._idle.cancel()
        if conn is not None:
            conn.close()
        if proc is not None:
            self._kill(proc)
        self._fail_all("the builder was closed")
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)

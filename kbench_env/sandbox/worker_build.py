"""A worker's builds, on the trusted side: each BUILD request the worker sends is checked (builder/requests.py),
relayed to the trusted builder (builder/client.py) within the worker's quota and deadline, and answered with BUILT;
the builds the worker was given are claimed (cache.Claim) until it is gone, so eviction passes over them.

The worker never writes the cache and never talks to the builder: what it sends is read here as any of its
messages (bounded, JSON only), normalised, and only then forwarded. Its quota: at most ``MAX_REQUESTS`` requests
and ``Limits.build_bytes`` of new builds in all.

Each library given to the worker has its symbol tables read here before the worker loads it (builder/symbols.py,
the same for a local, a remote and a cached build): ``linked`` keeps what it calls outside the dispatcher, which
the evaluator judges (pipeline/linked.py).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import TimeoutError as FutureTimeout

from kbench_env.builder import symbols
from kbench_env.builder.client import BuilderError
from kbench_env.builder.errors import BuildRefused
from kbench_env.builder.requests import normalise
from kbench_env.protocol import messages
from kbench_env.builder import cache
from kbench_env.sandbox.confine.policy import Limits

MAX_REQUESTS = 64
_REPLY_MARGIN_S = 0.5  # the builder's deadline ends this much before the worker's, so its answer still arrives


class WorkerBuilds:
    """The build requests of one worker (see the module docstring)."""

    def __init__(self, builder, build_root: str, limits: Limits):
        self._builder, self._root, self._limits = builder, build_root, limits
        self._claims: dict = {}
        self.requests = 0
        self.new_bytes = 0
        self.built = False  # a build was made for this worker (the cache grew)
        self.builder_seconds = 0.0  # the builder's own time on the builds made for it (not its queue's)
        self.units: list = []  # the builds it was given, in order
        self.linked: list = []  # (library path, builder/symbols.scan of it) of each library given, in order

    def serve(self, worker, header: dict, deadline: float) -> None:
        """Answer one BUILD request of ``worker`` (a sandbox.Worker) with BUILT, watching the worker meanwhile."""
        worker.send({"type": messages.BUILT, **self._reply(worker, header, deadline)})

    def _reply(self, worker, header: dict, deadline: float) -> dict:
        if self._builder is None:
            return {"ok": False, "message": "this worker cannot build (a reference worker)"}
        self.requests += 1
        if self.requests > MAX_REQUESTS:
            return {"ok": False, "message": f"more than {MAX_REQUESTS} build requests from one candidate"}
        try:
            request = normalise({k: v for k, v in header.items() if k != "type"})
        except BuildRefused as exc:
            return {"ok": False, "refused": True, "message": f"the builder refused the request: {exc}"}
        left = min(self._limits.build_timeout, deadline - time.monotonic() - _REPLY_MARGIN_S)
        if left <= 0:
            return {"ok": False, "message": "no time left for a build (the stage's deadline has passed)"}
        room = max(0, self._limits.build_bytes - self.new_bytes)
        fut = self._builder.submit(request, left, max_bytes=room)
        while True:
            try:
                reply = fut.result(timeout=0.5)
                break
            except FutureTimeout:
                worker.watch()  # the worker waits for the answer: its memory and scratch are still watched
                if time.monotonic() > deadline:
                    return {"ok": False, "message": f"the builder did not answer within {left:.0f} s"}
        if reply.get("internal"):  # kbench's failure: an internal error, not the candidate's build error
            raise BuilderError(reply.get("message"))
        if not reply.get("ok"):
            return {k: reply.get(k) for k in ("ok", "message", "refused", "seconds")}
        if not reply.get("cached"):
            self.built = True
            self.new_bytes += int(reply.get("bytes") or 0)
            self.builder_seconds += float(reply.get("seconds") or 0.0)
        unit = reply["unit"]
        if unit not in self._claims:
            self._claims[unit] = cache.Claim(self._root, unit)
        self.units.append(unit)
        path = os.path.join(self._root, unit, os.path.basename(reply["artifact"]))
        if not any(p == path for p, _ in self.linked):
            self.linked.append((path, scan_library(path)))
        return {"ok": True, "path": path, "module": reply.get("module"), "cached": bool(reply.get("cached")),
                "python_module": bool(reply.get("python_module", True)), "seconds": reply.get("seconds")}

    def release(self) -> bool:
        """Let the claimed builds go. Returns whether the cache grew (then it must be brought back under its
        bound)."""
        for claim in self._claims.values():
            claim.release()
        self._claims.clear()
        return self.built


_SCANS: dict = {}  # (path, inode, size, mtime) -> symbols.scan: a cache unit's library does not change in place


def scan_library(path: str) -> dict:
    """builder/symbols.scan of the library at ``path`` (once per file as it is)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return {"unreadable": f"it could not be read ({exc.strerror})"}
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _SCANS:
        if len(_SCANS) > 4096:
            _SCANS.clear()
        try:
            _SCANS[key] = symbols.scan(path)
        except OSError as exc:
            return {"unreadable": f"it could not be read ({exc.strerror})"}
    return _SCANS[key]

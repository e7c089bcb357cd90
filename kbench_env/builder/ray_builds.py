"""Builds on the CPU nodes of a Ray cluster (``Evaluator(remote_builds="ray")``), for a GPU host whose own cores
cannot keep its GPUs busy. ``RemoteBuilder`` stands where the Evaluator's Builder (client.py) stands and sends each
build request as a Ray task (CPUs only, ``num_gpus=0``) that runs the same builder under the same confinement on
its node (ray_task.py); running and timing stay on this host.

The task's reply comes back with the artifact's bytes and manifest. This side checks that the unit is one that a
local build of the request would have made, that the bytes have the manifest's SHA-256 and fit the build's size
bound, and publishes them into its own store (Store.publish_external), so a worker loads a remote build as it loads
a local one and a later local request finds it. A request with a unit already in the store (the first of its plans'
units found, torch_ext.plan_units) is answered from it, and one the builder refuses (requests.normalise) is refused
here, both without a task.

A matching unit vouches only for what the unit's name hashes (requests.extension_unit, fast_unit): for a
cpp_extension build the sources and flags as built, torch's version, the C++ compiler's version line ($CXX), the
backend and its build environment (the GPU architecture); for a fast-path build only the compiler's name, its
command and the source. Neither names nvcc's or the CUDA toolkit's version, nor the system's headers and libraries,
and a fast build not even the compiler's version: a node that differs from this host there builds the same units
with other code, and nothing here notices. The cluster's nodes should run this host's software image.

Kbench's failures (no cluster, a task that died or did not answer, a node unlike this host, an artifact refused)
fall back to the local builder with the build's whole timeout, said once in a warning and counted in
``fallbacks``; no cluster, or a node that builds other units than this host would, turns remote builds off for the
builder's life. A compile error is the candidate's: it comes back as it would locally.
"""

from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import Future

from kbench_env.machine.ray_cluster import connect
from kbench_env.backends import get_backend
from kbench_env.builder import fast, ray_task, torch_ext
from kbench_env.builder.client import Builder, BuilderError, build_environment, request_defaults
from kbench_env.builder.errors import BuildRefused
from kbench_env.builder.requests import normalise
from kbench_env.builder.store import Store

#: Seconds a task's answer may come after the build's own deadline (the task's start on a busy cluster, transfers).
REPLY_MARGIN_S = 60.0


class RemoteBuildError(RuntimeError):
    """A remote build that failed for kbench's reasons (not the candidate's): the build falls back to this host."""


class _RemoteOff(RemoteBuildError):
    """A failure that stays: remote builds are off for the rest of the builder's life."""


def parse_option(value) -> str | None:
    """The cluster address of ``remote_builds`` ("ray": the cluster this process is connected to, else "auto";
    "ray:<address>": that one), or None when off (None, False, "", "off")."""
    if value in (None, False, "", "off"):
        return None
    if isinstance(value, str) and (value == "ray" or value.startswith("ray:")):
        return value[4:] or "auto"
    raise ValueError(f"remote_builds={value!r}: use 'ray' (the Ray cluster this process is connected to, else "
                     f"the one running here) or 'ray:<address>' (e.g. 'ray:auto', 'ray:ray://head:10001')")


def make_builder(backend: str, device: str, build_root: str, limits, workers: int, kinds, remote_builds=None):
    """The Evaluator's builder: a local Builder, or a RemoteBuilder in front of one (``remote_builds``)."""
    address = parse_option(remote_builds)
    local = Builder(backend, device, build_root, limits, workers, kinds)
    return local if address is None else RemoteBuilder(local, address)


class RemoteBuilder:
    """``Builder``'s interface (submit, build, history, close), building on a Ray cluster at ``address``, one CPU
    per task; ``local`` builds what cannot be built there (see the module docstring)."""

    def __init__(self, local: Builder, address: str = "auto"):
        self.local, self.address = local, address
        self.kinds, self.limits, self.build_root = local.kinds, local.limits, local.build_root
        self.history = local.history  # remote builds are entered with their reply's "remote"
        self.backend = get_backend(local.backend)
        self.store = Store(local.build_root)
        self.fallbacks = 0
        self.off_reason: str | None = None
        self._warned = False
        self._lock = threading.Lock()
        self._ray = self._task = self._spec = self._context = None

    @property
    def pid(self):
        """The local builder process's pid (None while no build fell back to it)."""
        return self.local.pid

    @property
    def protections(self) -> dict:
        return self.local.protections

    def submit(self, request: dict, timeout: float, max_bytes: int | None = None,
               light_headers: bool | None = None) -> Future:
        """As Builder.submit; the reply of a remote build has ``remote``: {"node", "pid" (the Ray worker's),
        "protections" (its builder's confinement)}."""
        if self.off_reason is not None or (self.kinds is not None and request.get("kind") not in self.kinds):
            return self.local.submit(request, timeout, max_bytes, light_headers)  # refused there, unbuilt
        max_bytes, light_headers = request_defaults(self.limits, max_bytes, light_headers)
        fut: Future = Future()
        threading.Thread(target=self._serve, args=(fut, request, float(timeout), max_bytes, light_headers),
                         name="kbench-remote-build", daemon=True).start()
        return fut

    def build(self, request: dict, timeout: float, **kw) -> dict:
        """``submit`` and wait: for the task (``timeout`` plus REPLY_MARGIN_S), then for a fallback's build."""
        return self.submit(request, timeout, **kw).result(timeout=2 * timeout + REPLY_MARGIN_S + 30)

    def close(self) -> None:
        self.local.close()

    # ------------------------------------------------------------------ one request
    def _serve(self, fut: Future, request: dict, timeout: float, max_bytes: int, light_headers: bool) -> None:
        t0 = time.monotonic()
        try:
            reply = self._remote(request, timeout, max_bytes, light_headers)
        except Exception as exc:  # noqa: BLE001 - every failure of kbench's falls back to this host's builder
            self._fall_back(exc)
        else:
            reply["seconds"] = round(time.monotonic() - t0, 4)
            self.history.append({**{k: reply.get(k) for k in ("unit", "ok", "cached", "seconds", "bytes")},
                                 "remote": reply.get("remote")})
            fut.set_result(reply)
            return
        try:  # the whole timeout: the time kbench's failure took is not the candidate's to lose
            local = self.local.submit(request, timeout, max_bytes, light_headers)
        except BuilderError as exc:
            fut.set_result({"ok": False, "internal": True, "message": f"internal builder error: {exc}"})
            return
        local.add_done_callback(lambda done: fut.set_result(done.result()))

    def _remote(self, request: dict, timeout: float, max_bytes: int, light_headers: bool) -> dict:
        try:
            req = normalise(request)
        except BuildRefused as exc:  # answered as the builder answers it (server.serve), without a task
            return {"ok": False, "refused": True, "message": str(exc), "remote": None}
        ray = self._connect()
        units, python_module = self._expected(req, light_headers)
        for unit in units:  # built before (here or remotely), under any of its plans: no task
            found = self.store.lookup(unit)
            if found is not None:
                return {"ok": True, **found, "cached": True, **python_module, "remote": None}
        ref = self._task.remote(self._spec, request, timeout, max_bytes, light_headers)
        try:
            out = ray.get(ref, timeout=timeout + REPLY_MARGIN_S)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise RemoteBuildError(f"the Ray task did not answer within {timeout + REPLY_MARGIN_S:.0f} s") from None
        return self.accept(out, units, max_bytes)

    def accept(self, out: dict, units: list, max_bytes: int) -> dict:
        """The reply to give for a task's answer ``out`` (ray_task.build), its artifact published here when it is
        a unit of ``units`` (the request's, as this host would build it) whose bytes match the manifest's SHA-256.
        Raises RemoteBuildError when the remote builder failed or built another unit (then remote builds are off),
        and store.ExternalBuildRefused (a ValueError; nothing published) for an artifact the store refuses; the
        build falls back to this host for either (_serve)."""
        reply = dict(out["reply"])
        where = {"node": out.get("node"), "pid": out.get("pid"), "protections": out.get("protections")}
        if reply.get("internal"):
            raise RemoteBuildError(f"the builder on Ray node {where['node']} failed: {reply.get('message')}")
        reply.update(remote=where)
        if not reply.get("ok"):
            return reply  # the compiler's trimmed message or the refusal, as a local build gives them
        if reply.get("unit") not in units:
            raise _RemoteOff(f"Ray node {where['node']} built unit {reply.get('unit')!r} where this host would "
                             f"build {units[:1]}: its torch, compiler, kbench or build settings (KBENCH_CUTLASS, "
                             f"CXX) differ from this host's, so its builds would not be the same")
        manifest, cached = self.store.publish_external(reply["unit"], out.get("files") or {}, out.get("manifest"),
                                                       max_bytes)
        reply.update(manifest, cached=cached)
        return reply

    def _expected(self, request: dict, light_headers: bool) -> tuple[list, dict]:
        """(the units a local build of ``request`` would try, in order; its reply's python_module, if it has one).
        Raises BuildRefused for a request the builder refuses before building."""
        req = normalise(request)  # a no-op on a normalised request
        if req["kind"] == "fast":
            return [fast.unit_of(req)], {}
        units = torch_ext.plan_units(req, self.backend, self._context, light_headers)
        return units, {"python_module": req["options"].get("is_python_module", True)}

    # ------------------------------------------------------------------ the cluster
    def _connect(self):
        with self._lock:
            if self._task is None:
                try:
                    ray = connect(self.address)
                    build_env = build_environment(self.local.backend, self.local.device)  # not read here
                except Exception as exc:  # noqa: BLE001 - no [ray] extra, no cluster, a cluster that refused
                    raise _RemoteOff(f"no Ray cluster to build on at {self.address!r}: {type(exc).__name__}: "
                                     f"{exc}") from None
                self._spec = {"backend": self.local.backend, "device": self.local.device, "limits": self.limits,
                              "build_env": build_env}
                self._context = torch_ext.build_context(self.backend, build_env)
                self._ray = ray
                self._task = ray.remote(ray_task.build).options(num_cpus=1, num_gpus=0, max_retries=0)
        return self._ray

    def _fall_back(self, exc: Exception) -> None:
        reason = str(exc) if isinstance(exc, RemoteBuildError) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.fallbacks += 1
            if isinstance(exc, _RemoteOff):
                self.off_reason = reason
            first, self._warned = not self._warned, True
        if first:
            then = ("remote builds are off from now on" if isinstance(exc, _RemoteOff) else
                    "said once; Evaluator.builder.fallbacks counts the builds that fell back")
            warnings.warn(f"remote builds: {reason[:600]}; building on this host instead ({then})", RuntimeWarning,
                          stacklevel=2)

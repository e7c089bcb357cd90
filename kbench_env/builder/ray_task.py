"""What a remote build runs on a Ray node (builder/ray_builds.py sends it there as a Ray task, CPUs only): the same
builder as a local build under the same confinement (client.Builder starting server.py on this node), on a build
root of this Ray worker process's own. The reply goes back with the artifact's bytes and its manifest, and the unit
is removed here (the trusted side's store holds it from then on).

One builder per Ray worker process and configuration, kept between tasks (its precompiled headers, pch.py, are made
once, not per build) and closed when the process exits; the build roots of worker processes that were killed before
their exit handlers ran are removed by the next one that starts a builder on the node.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import tempfile
import threading

from kbench_env.builder.client import Builder

_PREFIX = "kbench-ray-build-"
_LOCK = threading.Lock()
_BUILDERS: dict = {}


def _close(builder: Builder, root: str) -> None:
    builder.close()
    shutil.rmtree(root, ignore_errors=True)


def _remove_stale() -> None:
    """Build roots of this node's Ray worker processes that are gone."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        pid = name[len(_PREFIX):].split("-")[0] if name.startswith(_PREFIX) else ""
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _builder(spec: dict) -> Builder:
    key = json.dumps(spec, sort_keys=True, default=repr)
    with _LOCK:
        builder = _BUILDERS.get(key)
        if builder is None:
            _remove_stale()
            root = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
            builder = Builder(spec["backend"], spec["device"], root, spec["limits"], workers=1,
                              build_env=spec["build_env"])
            _BUILDERS[key] = builder
            atexit.register(_close, builder, root)
    return builder


def build(spec: dict, request: dict, timeout: float, max_bytes: int, light_headers: bool) -> dict:
    """Build ``request`` here. Returns {"reply": the builder's reply, "node", "pid", "protections" (the confinement
    the builder has on this node, server._confine)} and, for a build, "manifest" (the reply's unit, artifact,
    module and sha256: what Store.publish_external reads) and "files" ({artifact name: bytes}). ``spec``: backend, device, limits and build_env of the
    trusted side's builder (remote.RemoteBuilder.spec). A builder that cannot start raises (BuilderError)."""
    builder = _builder(spec)
    reply = builder.build(request, timeout, max_bytes=max_bytes, light_headers=light_headers)
    out = {"reply": reply, "node": socket.gethostname(), "pid": os.getpid(), "protections": builder.protections}
    if reply.get("ok"):
        manifest = {k: reply[k] for k in ("unit", "artifact", "module", "sha256")}
        unit_dir = os.path.join(builder.build_root, reply["unit"])
        with open(os.path.join(unit_dir, os.path.basename(manifest["artifact"])), "rb") as f:
            data = f.read()
        out.update(manifest=manifest, files={manifest["artifact"]: data})
        shutil.rmtree(unit_dir, ignore_errors=True)
    return out

"""The builder process: compiles build requests the trusted side sends it, publishes the builds in the cache and
answers with the artifact's path or the compiler's trimmed error. It never imports or runs candidate Python, and
never loads what it builds (a library's constructors would run in it).

Started by the trusted side (client.Builder) from the fork server, it confines itself before serving: its own
session (the trusted side kills it whole), a scrubbed environment, a network namespace without interfaces where
the machine allows one, Landlock (reads from system, Python, CUDA and CUTLASS directories only, writes to the build
cache and its scratch directory only), no capabilities, seccomp (no sockets), no core files, killed with its parent.
So a source that includes /etc/shadow or a user's key, or inline assembly that ``.incbin``s one, fails to build.

Requests are served concurrently (a thread each, up to ``workers``; the compilers are processes of their own), one
build of a unit at a time (store.Store). Each request and its reply are framed as the worker protocol's messages
(protocol/wire.py): {"id", "request", "timeout", "max_bytes", "light_headers"} -> {"id", "ok", ...}.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor


from kbench_env.backends import get_backend
from kbench_env.builder import fast, requests, torch_ext
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.errors import BuildRefused, trim_compiler_output
from kbench_env.builder.pch import BindingHeaders
from kbench_env.builder.store import Store
from kbench_env.protocol.wire import pack, unpack
from kbench_env.sandbox.confine import environment, landlock, namespaces, privileges, rlimits, seccomp
from kbench_env.sandbox.confine.libc import libc
from kbench_env.sandbox.confine.paths import allowed_paths

#: How much lower than the trusted side's the builder's scheduling priority is (a nice increment; its compilers
#: inherit it). Builds are throughput work that fills whatever cores are free, while the trusted side, the workers
#: and their checks and timings wait on the host in turn: a GPU timing's wall clock, which bounds the device time a
#: worker may report (pipeline/gpu_blocks.py), stretches when compilers on every core delay the exchange around a
#: block, and a CPU timing's blocks share the cores with whatever runs beside them. Lowering a priority needs no
#: privilege.
BUILD_NICE = 10

_PR_SET_PDEATHSIG = 1


def scratch_environment(scratch: str, env: dict) -> None:
    """This process's environment made ``env`` with its home and temporary files in ``scratch``, the one place it
    may write once confined: Python's cached temporary directory too (the process this one was forked from may
    have looked it up as /tmp)."""
    os.environ.clear()
    os.environ.update(env)
    os.environ.update({"HOME": scratch, "TMPDIR": scratch})
    tempfile.tempdir = scratch


def _confine(config: dict, conn) -> dict:
    """Confine this process (see the module docstring); returns {"active": ..., "missing": ...}."""
    status: dict = {"active": {}, "missing": {}}
    act, miss = status["active"], status["missing"]
    scratch, root = config["scratch"], config["build_root"]
    environment.close_inherited([conn.fileno()], None, act)
    os.setsid()
    _lower_priority(act, miss)
    os.chdir(scratch)
    log = os.open(os.path.join(scratch, "builder.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    scratch_environment(scratch, config["env"])
    if shutil.which("ninja") is None:  # torch's builds need it on PATH; the venv's bin may not be on it
        os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    # Before the confinement: the CUDA backend asks the GPU for its architecture (a remote builder, on a node
    # without the GPU, is given the GPU host's: builder/ray_builds.py).
    if config.get("build_env") is None:
        config["build_env"] = get_backend(config["backend"]).build_environment(config["device"])
    os.environ.update(config["build_env"])
    if not config.get("isolate", True):
        return status
    namespaces.enter(scratch, root, [], act, miss, user_ns=os.geteuid() != 0, net_only=True)
    miss.pop("mount_namespace", None)  # not asked for: Landlock keeps the builder's reads and writes in
    rlimits.set_limits({"memory_bytes": config.get("memory_bytes"), "file_bytes": config.get("file_bytes")},
                       config["device"], act, miss, cgroup=True)
    reads, execs = allowed_paths(scratch, root, "cpu", config.get("extra_read", ()))
    landlock.restrict([scratch, root], reads, execs, "cpu", act, miss)
    privileges.drop(act, miss)
    seccomp.install(act, miss, process_groups=True)  # each compiler runs in a process group of its own
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:
        os._exit(1)
    return status


def _lower_priority(act: dict, miss: dict) -> None:
    """This process (before it starts a thread: each thread and compiler inherits it) BUILD_NICE below the
    priority it was started with (sandbox/confine/forkserver.py: the trusted side's)."""
    try:
        act["build_nice"] = os.nice(BUILD_NICE)
    except OSError as exc:
        miss["build_nice"] = str(exc)


class _Server:
    def __init__(self, conn, config: dict):
        self.conn, self.config = conn, config
        self.send_lock = threading.Lock()
        self.backend = get_backend(config["backend"])
        self.store = Store(config["build_root"])
        # The builder's own directory (no worker writes it); made in the background, so cold builds do not wait.
        self.pch = BindingHeaders(os.path.join(config["scratch"], "pch"), background=True)
        self.context = torch_ext.build_context(self.backend, config.get("build_env", {}))

    def build(self, header: dict) -> dict:
        req = requests.normalise(header.get("request"))
        timeout = float(header.get("timeout", 300.0))
        max_bytes = int(header.get("max_bytes", 256 << 20))
        if req["kind"] == "fast":
            return fast.build(req, self.store, timeout, max_bytes)
        return torch_ext.build(req, self.backend, self.store, self.context, timeout, max_bytes,
                               light_headers=bool(header.get("light_headers", True)), pch=self.pch)

    def serve(self, header: dict) -> None:
        t0 = time.perf_counter()
        try:
            reply = {"ok": True, **self.build(header)}
        except BuildRefused as exc:
            reply = {"ok": False, "refused": True, "message": str(exc)}
        except CompileError as exc:
            reply = {"ok": False, "message": trim_compiler_output(str(exc), self.store.root)}
        except Exception as exc:  # noqa: BLE001 - a builder bug is reported, not a hang
            traceback.print_exc()
            reply = {"ok": False, "internal": True, "message": f"internal builder error: {type(exc).__name__}: {exc}"}
        reply.update(id=header.get("id"), seconds=round(time.perf_counter() - t0, 4), pch=self.pch.counts())
        print(json.dumps({k: reply.get(k) for k in ("id", "ok", "unit", "cached", "seconds")}), flush=True)
        with self.send_lock:
            self.conn.send_bytes(pack(reply))


def send_build_environment(conn, backend: str, device: str) -> None:
    """Entry point of a process that reads the backend's build environment for ``device`` (initialising CUDA, as the
    builder process does before its confinement) and sends it, or the failure, on ``conn``
    (client.build_environment)."""
    try:
        conn.send({"ok": True, "env": get_backend(backend).build_environment(device)})
    except Exception as exc:  # noqa: BLE001 - said to the trusted side
        conn.send({"ok": False, "message": f"{type(exc).__name__}: {exc}"})
    conn.close()


def main(conn, config: dict) -> None:
    """Entry point of the builder process (client.Builder starts it): confine, then serve until the connection
    closes."""
    status = _confine(config, conn)
    server = _Server(conn, config)
    conn.send_bytes(pack({"id": None, "ok": True, "protections": status, "pid": os.getpid()}))
    with ThreadPoolExecutor(max_workers=max(1, int(config.get("workers", 1))),
                            thread_name_prefix="kbench-build") as pool:
        while True:
            try:
                header, _ = unpack(conn.recv_bytes())
            except (EOFError, OSError):
                break
            pool.submit(server.serve, header)
    sys.stdout.flush()
    os._exit(0)  # the session's compilers, if any are left, go with the trusted side's kill of the session

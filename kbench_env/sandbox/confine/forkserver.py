"""The fork server every worker is forked from, and how it and the workers are started.

A worker is a fresh process per evaluation, forked from a server that has torch already imported
(``multiprocessing`` forkserver), so starting one costs milliseconds. The server is itself started with only the
allowed environment (confine/environment.py) and no descriptor of this process's but stdio, so no credential is
ever in a worker's memory; and with the user's ``__main__`` hidden, so that an unguarded script is not re-run in it.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.forkserver as mp_forkserver
import multiprocessing.util as mp_util
import os
import sys
import threading

from kbench_env.sandbox.confine.environment import scrubbed_environment

_CTX = None

# Imported once in the fork server rather than in each worker. setuptools is most of torch.utils.cpp_extension's
# import, which every C++/CUDA worker needs. Not cpp_extension itself: with a CUDA build of torch, importing it
# leaves the process multi-threaded and every forked child fails "Cannot re-initialize CUDA in forked subprocess".
_PRELOAD = ["torch", "setuptools", "kbench_env.worker.loop", "kbench_env.sandbox.confine.confinement",
            "kbench_env.builder.server"]


def context():
    """The multiprocessing context workers are started with (the fork server, started here on first use)."""
    global _CTX
    if _CTX is None:
        if "forkserver" in mp.get_all_start_methods():
            _CTX = mp.get_context("forkserver")
            _CTX.set_forkserver_preload(_PRELOAD)
            _start_forkserver_without_main()
        else:  # pragma: no cover - non-Linux
            _CTX = mp.get_context("spawn")
    return _CTX


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def spawning():
    """While a fork server or worker starts: the user's ``__main__`` file hidden from multiprocessing, and a fork
    server (or resource tracker) that multiprocessing starts, or restarts after it died, spawned by
    ``spawn_scrubbed``.

    Otherwise multiprocessing re-imports the main script in the fork server and in every worker, which re-runs an
    unguarded script (no ``if __name__ == "__main__"``), and a restarted fork server would have this process's
    whole environment. Workers need nothing from either.
    """
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        saved = main.__dict__.pop("__file__", None) if main is not None else None
        original, mp_util.spawnv_passfds = mp_util.spawnv_passfds, spawn_scrubbed
        try:
            yield
        finally:
            mp_util.spawnv_passfds = original
            if saved is not None:
                main.__file__ = saved


def spawn_scrubbed(path, args, passfds):
    """multiprocessing.util.spawnv_passfds for the fork server (and the resource tracker it starts), hence for every
    worker: started with the allowed environment only (the variables named in confine/environment.py, none holding
    a credential: /proc/<pid>/environ of a worker shows what the fork server started with, whatever the worker later
    removes), and holding only the descriptors it is passed and stdio (posix_spawn keeps every descriptor that is
    not close-on-exec: a parent's inherited pipes reached every worker)."""
    keep = {0, 1, 2, *map(int, passfds)}
    actions = [(os.POSIX_SPAWN_CLOSE, fd) for fd in _open_fds() if fd not in keep]
    actions += [(os.POSIX_SPAWN_DUP2, fd, fd) for fd in sorted(map(int, passfds))]
    return os.posix_spawn(path, list(args), scrubbed_environment(), file_actions=actions)


def _open_fds() -> list:
    for where in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return [int(n) for n in os.listdir(where) if n.isdigit()]
    return list(range(3, 256))


def _start_forkserver_without_main() -> None:
    with spawning():
        mp_forkserver.ensure_running()


def forkserver_dir() -> str | None:
    """The directory of the fork server's socket (hidden from workers), if it listens on a path."""
    address = getattr(mp_forkserver._forkserver, "_forkserver_address", None)
    return os.path.dirname(address) if isinstance(address, str) and address.startswith("/") else None

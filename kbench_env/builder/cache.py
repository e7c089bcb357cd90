"""The shared build cache, seen from the trusted side: which builds a live worker holds, how big the cache grows.

Layout: ``<root>/<unit>``, one directory per build, named by everything the build depends on (builder/requests.py:
``<name>-<hash>`` for a cpp_extension build, ``fast-<hash>`` for a fast-path kernel). Only the trusted builder
writes here (builder/store.py: staged, then renamed into place with a manifest); workers see the cache read-only
(confine/namespaces.py, confine/landlock.py). So a build is loaded by any candidate whose request names the same
unit, which is exactly the build its own request would have made: no candidate can plant what another loads.

Bounds (their defaults: sandbox/confine/policy.py): a worker's new builds add at most ``Limits.build_bytes``
(sandbox/worker_build.py), and after they are made the cache is brought under ``Limits.cache_bytes`` by evicting
the least recently used units. A unit a live worker was given is never evicted: each ``Claim`` holds a shared
``flock`` on its directory, eviction takes an exclusive one without waiting and skips what it cannot lock, so
several evaluator processes can share one cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import time
import uuid

_UNIT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}$")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_STALE_S = 3600.0  # a build or eviction left half-done this long ago was cut by its process's death


def _same_file(path: str, fd: int) -> bool:
    try:
        a, b = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class Claim:
    """A unit in use by a worker: a shared lock on it from before the worker is told its path until the worker is
    gone. Eviction passes over a claimed directory."""

    def __init__(self, root: str, key: str):
        if not _UNIT.match(key):
            raise ValueError(f"not a build unit: {key!r}")
        self.path = os.path.join(root, key)
        while True:
            os.makedirs(self.path, exist_ok=True)
            fd = os.open(self.path, _DIR_FLAGS)
            fcntl.flock(fd, fcntl.LOCK_SH)
            # An eviction may have renamed the directory away between the open and the lock: lock the one that is
            # there now.
            if _same_file(self.path, fd):
                break
            os.close(fd)
        self._fd: int | None = fd
        with contextlib.suppress(OSError):
            os.utime(self.path)  # its last use: eviction goes by it

    def release(self) -> None:
        """Let the directory go; remove it if it holds no file and nobody else holds it (a unit evicted before it
        was claimed)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(self.path, fd):
                for here, _, _ in os.walk(self.path, topdown=False):
                    with contextlib.suppress(OSError):
                        os.rmdir(here)  # fails unless empty
        except OSError:
            pass
        finally:
            os.close(fd)


# ---------------------------------------------------------------------- size bound


def disk_usage(path: str, limit_files: int = 100_000) -> tuple[int, int]:
    """Bytes on disk (allocated blocks) and number of entries under ``path``, counting at most ``limit_files``."""
    total, files, stack = 0, 0, [path]
    while stack and files < limit_files:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                files += 1
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
    return total, files


def remove_tree(path: str) -> None:
    """Remove a directory tree, what a worker left without permissions included."""
    def fix(func, p, exc):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)

    shutil.rmtree(path, onerror=fix)
    if os.path.exists(path):
        shutil.rmtree(path, ignore_errors=True)


def enforce_bound(root: str, max_bytes: int) -> list:
    """Evict the least recently used source directories of ``root`` until it holds at most ``max_bytes``, passing
    over those a live worker claims. One process evicts at a time (another one's eviction in progress: nothing
    done here). Returns the names evicted."""
    try:
        lock = os.open(os.path.join(root, ".evict.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return []
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []
        units, total, now = [], 0, time.time()
        with os.scandir(root) as it:
            entries = list(it)
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.name.startswith(".evict-") or (e.name.startswith((".staging-", ".old-"))
                                                 and now - st.st_mtime > _STALE_S):
                remove_tree(e.path)  # left by a process that died evicting or building
                continue
            size = st.st_blocks * 512 + (disk_usage(e.path)[0] if stat.S_ISDIR(st.st_mode) else 0)
            total += size
            if stat.S_ISDIR(st.st_mode) and not e.name.startswith("."):
                units.append((st.st_mtime, e.name, size))
        evicted = []
        for _, name, size in sorted(units):
            if total <= max_bytes:
                break
            if _evict(root, name):
                total -= size
                evicted.append(name)
        return evicted
    finally:
        os.close(lock)


def _evict(root: str, name: str) -> bool:
    path = os.path.join(root, name)
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # claimed by a live worker
        if not _same_file(path, fd):
            return False
        gone = os.path.join(root, f".evict-{uuid.uuid4().hex}")
        os.rename(path, gone)  # a claim waiting for the lock finds the name gone and makes a new directory
    except OSError:
        return False
    finally:
        os.close(fd)
    remove_tree(gone)
    return True

"""The shared build cache, seen from the trusted side: who may load what, what a worker may publish, how big it grows.

Layout: ``<root>/<sha256 of a candidate's whole source>/<build>``. A worker builds and loads under its own source's
directory only (``Claim``; the backends' own names, ``<name>-<hash>`` for cpp_extension and ``fast/`` for the fast
path, live inside it). On the CPU the worker sees the cache through an overlay whose writes stay in its scratch
directory (confine/namespaces.py), and ``publish`` copies into the shared cache only what the worker left under its
own source's directory. So a build published by candidate X is only ever loaded by a candidate with X's exact source,
whose behaviour X's source already determines: no candidate can plant an artifact that another source will load,
whatever name it gives it. A repeated identical source is a cache hit; two sources that differ anywhere (a comment
in the Python part included) never share a build.

Bounds: a worker publishes at most ``max_bytes`` (``Limits.build_bytes``) and a build over it is not published at
all; after a publication the cache is brought under ``Limits.cache_bytes`` by evicting the least recently used
source directories. A directory a live worker uses is never evicted: each ``Claim`` holds a shared ``flock`` on
its directory, eviction takes an exclusive one without waiting and skips what it cannot lock, so several evaluator
processes can share one cache.

Not covered here: GPU workers have no overlay (CUDA does not start under the mount namespace), so they write into
the shared cache directly and nothing bounds or filters what they write; the full fix is a trusted builder that
compiles and publishes in a process the candidate does not control.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import time
import uuid

#: What one worker may publish (bytes) and the whole cache's bound, where ``Limits`` does not say.
BUILD_BYTES = 256 << 20
CACHE_BYTES = 10 << 30

_KEY = re.compile(r"^[0-9a-f]{64}$")
_BUILD_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,199}$")
_MAX_PUBLISHED = 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_STALE_S = 3600.0  # a publication or eviction left half-done this long ago was cut by its process's death


def cache_bytes_default() -> int:
    """The cache bound: $KBENCH_CACHE_MAX_BYTES, else ``CACHE_BYTES``."""
    try:
        return int(os.environ.get("KBENCH_CACHE_MAX_BYTES", "")) or CACHE_BYTES
    except ValueError:
        return CACHE_BYTES


def source_key(source: str) -> str:
    """The name of ``source``'s directory in the cache: the SHA-256 of its whole text."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def _same_file(path: str, fd: int) -> bool:
    try:
        a, b = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class Claim:
    """A source's directory in use by a worker: a shared lock on it from before the worker looks at it until the
    worker is gone and its builds are published. Eviction passes over a claimed directory."""

    def __init__(self, root: str, key: str):
        if not _KEY.match(key):
            raise ValueError(f"not a source key: {key!r}")
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
        """Let the directory go; remove it if it holds no file and nobody else holds it (most sources build
        nothing)."""
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


# ---------------------------------------------------------------------- publishing


def _has_library(path) -> bool:
    """Whether a build directory (a path, or a directory fd) holds a built library."""
    try:
        with os.scandir(path) as it:
            return any(e.name.endswith((".so", ".cubin")) and e.is_file(follow_symlinks=False) for e in it)
    except OSError:
        return False


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    """Open a directory without following a link at its last component (relative to ``dir_fd``): the worker may
    still be running and swap a directory for a link while its builds are copied."""
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _copy_file(name: str, src_fd: int, dst: str, budget: list) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_fd)  # no FIFO waits
    with os.fdopen(fd, "rb") as fin:
        st = os.fstat(fin.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > budget[0]:
            raise OSError(f"refusing to publish {name} ({st.st_size} bytes, {budget[0]} left of the build quota)")
        budget[0] -= st.st_size
        with open(dst, "xb") as fout:
            # At most what was checked: the worker may still be running and growing the file.
            shutil.copyfileobj(_Bounded(fin, st.st_size), fout)
        os.chmod(dst, 0o755 if st.st_mode & 0o111 else 0o644)
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))  # ninja compares modification times


class _Bounded:
    def __init__(self, f, n: int):
        self.f, self.left = f, n

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        data = self.f.read(size) if size else b""
        self.left -= len(data)
        return data


def _copy_tree(src_fd: int, dst: str, budget: list, depth: int = 0, skip=("lock",)) -> None:
    """Copy regular files and directories only (no links, devices, FIFOs or overlay whiteouts), walking by
    directory fds that never follow a link. ``lock`` (torch's build lock) stays behind: a stale one would make
    every later load of the build wait forever."""
    os.mkdir(dst, 0o755)
    with os.scandir(src_fd) as it:
        entries = list(it)
    for e in entries:
        if e.name in skip or e.is_symlink():
            continue
        if e.is_dir(follow_symlinks=False):
            if depth < 4:
                sub = _open_dir(e.name, src_fd)
                try:
                    _copy_tree(sub, os.path.join(dst, e.name), budget, depth + 1, skip=())
                finally:
                    os.close(sub)
        elif e.is_file(follow_symlinks=False):
            _copy_file(e.name, src_fd, os.path.join(dst, e.name), budget)


def publish(scratch: str, root: str, key: str, max_bytes: int) -> list:
    """Copy the builds a worker made in its overlay under its own source's directory
    (``<scratch>/.kbench/upper/<key>``) into the shared cache's ``<root>/<key>``; nothing the worker wrote elsewhere
    in its overlay is looked at. Only builds that are not there yet (or are there without a library: a failed
    build) are published, nothing existing is changed, and all of them together stay within ``max_bytes`` (a build
    that does not fit is left out whole). Safe while the worker runs: every directory is opened by fd without
    following links, and no file is copied past the size it had when checked. Returns what was published."""
    if not _KEY.match(key):
        return []
    published: list = []
    budget = [max_bytes]
    fds: list = []
    try:
        fds.append(_open_dir(scratch))
        for name in (".kbench", "upper", key):
            fds.append(_open_dir(name, fds[-1]))
        with os.scandir(fds[-1]) as it:
            entries = list(it)
    except OSError:
        entries = []
    upper = fds[-1] if len(fds) == 4 else None
    dest_root = os.path.join(root, key)
    for e in entries:
        if len(published) >= _MAX_PUBLISHED or not _BUILD_NAME.match(e.name) or not e.is_dir(follow_symlinks=False):
            continue
        try:
            sub = _open_dir(e.name, upper)
        except OSError:
            continue
        try:
            if e.name == "fast":
                published += [f"fast/{n}" for n in _publish_flat(sub, os.path.join(dest_root, "fast"), budget)]
            elif _publish_build(sub, dest_root, e.name, budget):
                published.append(e.name)
        except OSError:
            continue
        finally:
            os.close(sub)
    for fd in fds:
        os.close(fd)
    return [f"{key}/{p}" for p in published]


def _publish_flat(src_fd: int, dest_dir: str, budget: list) -> list:
    """The fast path's flat directory: new files only, each as a whole or not at all."""
    with os.scandir(src_fd) as it:
        files = list(it)
    done = []
    for f in files:
        dest = os.path.join(dest_dir, f.name)
        if (f.is_file(follow_symlinks=False) and _BUILD_NAME.match(f.name) and ".tmp" not in f.name
                and not os.path.lexists(dest)):
            tmp = os.path.join(dest_dir, f".publish-{uuid.uuid4().hex}")
            try:
                os.makedirs(dest_dir, exist_ok=True)
                _copy_file(f.name, src_fd, tmp, budget)
                os.rename(tmp, dest)
                done.append(f.name)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
    return done


def _publish_build(src_fd: int, dest_root: str, name: str, budget: list) -> bool:
    dest = os.path.join(dest_root, name)
    if _has_library(dest) or not _has_library(src_fd):
        return False
    tmp = os.path.join(dest_root, f".publish-{uuid.uuid4().hex}")
    try:
        os.makedirs(dest_root, exist_ok=True)
        _copy_tree(src_fd, tmp, budget)
        if os.path.lexists(dest):  # a failed build's directory: set it aside
            old = os.path.join(dest_root, f".old-{uuid.uuid4().hex}")
            os.rename(dest, old)
            shutil.rmtree(old, ignore_errors=True)
        os.rename(tmp, dest)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    """Remove a directory tree, what a worker left without permissions (overlay work directories) included."""
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
            if e.name.startswith(".evict-") or (e.name.startswith((".publish-", ".old-"))
                                                 and now - st.st_mtime > _STALE_S):
                remove_tree(e.path)  # left by a process that died evicting or publishing
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

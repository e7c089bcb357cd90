"""The sandbox's policy for one worker: ``Limits`` (resources, timeouts, which layers), the layers that may be left
off, the build cache's bounds, and how long a spare worker waits for its candidate."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kbench_env.config import environ

#: How long a spare worker waits for a candidate before it exits (it holds a process, and on a GPU a CUDA context).
#: Longer than a KernelBench-format build with many at once, since spares are started
#: while the candidates in flight build, and than a trainer's generation between two batches (a minute or two).
SPARE_IDLE_S = 300.0

#: Layers of the sandbox that ``Limits.isolation_off`` may name.
LAYERS = ("namespaces", "landlock", "seccomp", "cgroup", "audit")  # audit: the hook reports only

#: What one worker's new builds may add to the shared build cache (bytes) and the whole cache's bound, where
#: ``Limits`` is not told otherwise (builder/cache.py holds the cache to them).
BUILD_BYTES = 256 << 20
CACHE_BYTES = 10 << 30


def cache_bytes_default() -> int:
    """The cache bound: $KBENCH_CACHE_MAX_BYTES, else ``CACHE_BYTES``."""
    return environ.get("KBENCH_CACHE_MAX_BYTES") or CACHE_BYTES


@dataclass
class Limits:
    """Resource limits of one candidate worker (wall-clock timeouts per stage, in seconds)."""

    build_timeout: float = 300.0
    run_timeout: float = 60.0
    time_timeout: float = 120.0
    memory_bytes: int = 8 << 30  # address space on top of what the worker holds at start
    file_bytes: int = 1 << 30  # largest file (the log included)
    open_files: int = 1024
    # Threads for candidate and reference alike. Half the cores: OpenMP barriers stall for a whole scheduler
    # slice when the threads outnumber the idle cores, which wrecks CPU timings.
    threads: int = field(default_factory=lambda: environ.get("KBENCH_THREADS") or max(1, (os.cpu_count() or 2) // 2))
    # CPU time of the worker process, all its threads together (each compiler gets its own): a backstop behind the
    # wall-clock timeouts. Processes and threads of a worker: the pids cgroup as root, RLIMIT_NPROC otherwise
    # (torch.compile's workers in a reference worker need many threads on a big machine).
    cpu_seconds: float = field(default_factory=lambda: 1800.0 * max(1, (os.cpu_count() or 2) // 2))
    processes: int = field(default_factory=lambda: max(512, 16 * (os.cpu_count() or 1)))
    disk_bytes: int = 4 << 30  # scratch directory, new builds included (watched every half second)
    build_bytes: int = BUILD_BYTES  # what one worker's new builds may add to the shared build cache
    cache_bytes: int = field(default_factory=cache_bytes_default)  # the shared cache's bound (LRU)
    isolation: bool = True  # False: rlimits, session and environment only (debugging; never for untrusted code)
    isolation_off: tuple = ()  # layers to leave off, from LAYERS
    extra_read_paths: tuple = ()  # more paths the worker may read (e.g. a toolkit outside /usr)
    scratch_root: str | None = None  # where scratch directories are made (default: the system's temporary dir)
    # CUDA workers get a network namespace and seccomp allowing AF_UNIX, but no mount namespace and no Landlock
    # (CUDA fails to start under those: bench/gpu_sandbox_probe.py); True asks for the full sandbox.
    gpu_isolation: bool = False
    netns_only: bool = False  # the namespaces layer makes a network namespace only (no mount namespace)
    unix_sockets: bool = False  # seccomp lets socket() make AF_UNIX sockets (every other family stays refused)


"""The device locks (kbench_env/machine/device_lock.py) exclude other threads and other processes: hold intervals
never overlap; the CPU's lock is the host's."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
import time

from kbench_env.machine.device_lock import DeviceLock


def _hold(path: str, n: int, out) -> None:
    lock = DeviceLock(path)
    for _ in range(n):
        with lock:
            t0 = time.monotonic()
            time.sleep(0.02)
            out.put((t0, time.monotonic()))


def _no_overlap(intervals: list) -> bool:
    intervals = sorted(intervals)
    return all(a_end <= b_start for (_, a_end), (b_start, _) in zip(intervals, intervals[1:]))


def test_lock_excludes_other_processes(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    path = str(tmp_path / "locks" / "gpu-test.lock")
    procs = [ctx.Process(target=_hold, args=(path, 5, q)) for _ in range(3)]
    for p in procs:
        p.start()
    intervals = [q.get(timeout=60) for _ in range(15)]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert _no_overlap(intervals), intervals


def test_lock_excludes_threads_and_other_instances(tmp_path):
    import queue

    q: queue.Queue = queue.Queue()
    path = str(tmp_path / "gpu-test.lock")
    shared = DeviceLock(path)
    threads = [threading.Thread(target=lambda: [_hold_with(shared, q) for _ in range(4)]) for _ in range(2)]
    threads += [threading.Thread(target=_hold, args=(path, 4, q))]  # its own instance on the same file
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    intervals = [q.get_nowait() for _ in range(12)]
    assert _no_overlap(intervals), intervals
    assert shared.acquire(blocking=False)  # free again once every holder is done
    shared.release()


def _hold_with(lock: DeviceLock, out) -> None:
    with lock:
        t0 = time.monotonic()
        time.sleep(0.02)
        out.put((t0, time.monotonic()))


def test_unusable_lock_file_falls_back_to_the_process_lock(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    lock = DeviceLock(str(blocker / "sub" / "x.lock"))  # a path under a regular file cannot be created
    with lock:
        assert not lock.acquire(blocking=False)
    assert lock.acquire(blocking=False)
    lock.release()


@contextlib.contextmanager
def _held_by_another_process(target, *args, what: str):
    """While the body runs, a spawned process holds a lock (``target(*args, held, release)`` sets ``held`` once it
    has it and lets go on ``release``); it must have exited cleanly after."""
    ctx = mp.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=target, args=(*args, held, release))
    other.start()
    try:
        assert held.wait(60), f"the other process never took {what}"
        yield
    finally:
        release.set()
        other.join(timeout=60)
    assert other.exitcode == 0


def _hold_cpu_lock(held, release) -> None:
    from kbench_env.pipeline.device_hold import CPU_LOCK
    with CPU_LOCK:
        held.set()
        release.wait(60)


def test_the_cpu_lock_is_the_hosts_whatever_the_cache_folder(tmp_path, monkeypatch):
    """Two kbench processes on one machine time on the same cores (sandbox/placement.py), real-time there: the
    CPU's lock is one file for the host, not one per cache folder or process, so while another process holds it
    this one's evaluations wait (with it per process, two concurrent CPU evaluations starved each other's workers
    in a stop: 'did not stop within 10 s')."""
    from kbench_env.machine.device_lock import cpu_lock_path
    from kbench_env.pipeline.device_hold import CPU_LOCK, make_device_lock
    lock, _ = make_device_lock("cpu", shared_checks=False)
    assert lock is CPU_LOCK
    monkeypatch.setenv("KBENCH_CACHE", str(tmp_path / "other-cache"))
    with _held_by_another_process(_hold_cpu_lock, what="the CPU's lock"):
        assert cpu_lock_path().exists()
        assert not CPU_LOCK.acquire(blocking=False)  # another process holds the host's CPU lock
        assert not CPU_LOCK.acquire(blocking=False, shared=True)
    assert CPU_LOCK.acquire(blocking=False)
    CPU_LOCK.release()


def _hold_file(path: str, held, release) -> None:
    import fcntl
    import os
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    held.set()
    release.wait(60)


def test_a_gpus_lock_is_the_hosts_whatever_the_cache_folder(tmp_path, monkeypatch):
    """Two kbench processes with their own cache folders on one GPU must still take turns on it: the GPU's lock file
    is named by the card and kept in the host's lock folder, not under a cache folder; that folder and the file are
    open to every user's processes (a lock another user cannot open does not keep that user's timing out)."""
    import os
    import stat
    import tempfile

    from kbench_env.machine import device_lock
    from kbench_env.pipeline.device_hold import make_device_lock

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(device_lock, "gpu_identity", lambda device: "GPU-test-uuid")
    old_umask = os.umask(0o022)
    try:
        paths = []
        for cache in ("one", "two"):
            monkeypatch.setenv("KBENCH_CACHE", str(tmp_path / cache))
            lock, slots = make_device_lock("cuda:0", shared_checks=True)
            assert slots is not None
            assert lock.acquire(blocking=False, shared=True)
            paths.append(lock._file)  # noqa: SLF001
            lock.release()
    finally:
        os.umask(old_umask)
    assert paths[0] == paths[1] == str(tmp_path / "tmp" / "kbench-locks" / "gpu-GPU-test-uuid.lock")
    assert stat.S_IMODE(os.stat(paths[0]).st_mode) == 0o666
    assert stat.S_IMODE(os.stat(tmp_path / "tmp" / "kbench-locks").st_mode) == 0o1777
    with _held_by_another_process(_hold_file, paths[0], what="the GPU's lock file"):
        lock, _ = make_device_lock("cuda:0", shared_checks=False)
        assert not lock.acquire(blocking=False)  # another process holds this card's lock
    assert lock.acquire(blocking=False)
    lock.release()

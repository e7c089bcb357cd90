"""A CPU worker's timed-block input buffers on a memfd (worker/executor.py ``_shared_buffers``) that the trusted side
writes through its own mapping (sandbox/memory.py ``ProcessMemory.share``) instead of /proc/<pid>/mem: taken only
from a memfd sealed against shrinking and as large as the worker says, anything else refused (writes then go
through /proc/<pid>/mem as before); a real evaluation's timing takes it on both sides of its pairs."""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os

import pytest
import torch

from conftest import ROOT, read
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.memory import ProcessMemory
from kbench_env.tasks.suite import resolve_task
from kbench_env.worker.executor import _shared_buffers


def _sealed_memfd(size: int, seals: int = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL):
    fd = os.memfd_create("kb-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    view = mmap.mmap(fd, size)
    return fd, view, ctypes.addressof(ctypes.c_char.from_buffer(view))


def test_writes_in_the_window_go_through_the_memfd_and_the_rest_through_proc_mem():
    fd, view, base = _sealed_memfd(1 << 16)
    outside = bytearray(16)
    mem = ProcessMemory(os.getpid())  # this process plays the worker: the same rights as a worker's parent has
    try:
        assert mem.share(fd, base, 1 << 16)
        os.ftruncate(fd, 1 << 16)  # (no change of size: allowed; a smaller one is not, below)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 4096)
        mem.write(base + 100, b"\x01\x02\x03")
        assert view[100:103] == b"\x01\x02\x03"
        address = ctypes.addressof(ctypes.c_char.from_buffer(outside))
        mem.write(address, b"\x07" * 16)  # not in the window: /proc/<pid>/mem
        assert outside == bytearray(b"\x07" * 16)
        mem.write(base + (1 << 16) - 2, b"\x05\x06")  # the window's last bytes
        assert view[(1 << 16) - 2:] == b"\x05\x06"
    finally:
        mem.close()
        del outside
        os.close(fd)


def test_what_is_not_a_sealed_memfd_as_large_as_said_is_refused(tmp_path):
    mem = ProcessMemory(os.getpid())
    unsealed, view, base = _sealed_memfd(4096, seals=0)
    sealed, view2, base2 = _sealed_memfd(4096)
    path = tmp_path / "file"
    path.write_bytes(b"\0" * 4096)
    regular = os.open(path, os.O_RDWR)
    try:
        assert not mem.share(unsealed, base, 4096)  # could shrink under this side's mapping
        assert not mem.share(regular, base, 4096)  # a file, not a memfd: never written through
        assert not mem.share(sealed, base2, 8192)  # larger than it is
        assert not mem.share(sealed, base2, "4096")
        assert not mem.share(1 << 20, base2, 4096)  # no such file descriptor
        huge = os.memfd_create("kb-huge", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING | os.MFD_HUGETLB)
        try:
            os.ftruncate(huge, 2 << 20)
            fcntl.fcntl(huge, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            # huge pages: a fault here could fail once their pool is gone (on a machine with no pool the mapping
            # fails as well; with one, only the page-size check refuses it)
            assert not mem.share(huge, base2, 4096)
        finally:
            os.close(huge)
        assert mem._window is None
        assert mem.share(sealed, base2, 4096)
        assert not mem.share(regular, base, 4096) and mem._window is None  # a refusal drops the last window
        mem.write(base2, b"\x09")  # now through /proc/<pid>/mem, into the same memory
        assert view2[0:1] == b"\x09" and path.read_bytes() == b"\0" * 4096
    finally:
        mem.close()
        for fd in (unsealed, sealed, regular):
            os.close(fd)


def test_the_workers_sets_lie_on_one_sealed_memfd():
    x, ids = torch.randn(3, 5), torch.arange(7)
    sets, info = _shared_buffers([x, ids, 2.5], 4)
    try:
        assert os.readlink(f"/proc/self/fd/{info['fd']}").startswith("/memfd:")
        assert fcntl.fcntl(info["fd"], fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK
        for one in sets:
            assert one[0].shape == x.shape and one[0].dtype == x.dtype and one[1].dtype == ids.dtype
            assert one[2] == 2.5
            for t in one[:2]:
                assert info["base"] <= t.data_ptr() and t.data_ptr() + t.nbytes <= info["base"] + info["size"]
        ends = sorted((t.data_ptr(), t.data_ptr() + t.nbytes) for one in sets for t in one[:2])
        assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))  # no two buffers overlap
        assert _shared_buffers([torch.randn(2, 2, device="meta")], 2) is None  # not on the CPU: as before
    finally:
        os.close(info["fd"])


def test_an_evaluation_writes_both_sides_inputs_through_their_memfds(monkeypatch, evaluator):
    taken = []
    share = ProcessMemory.share

    def share_(self, fd, base, size):
        taken.append(share(self, fd, base, size))
        return taken[-1]
    monkeypatch.setattr(ProcessMemory, "share", share_)
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, spare_worker=False,
                   timing={"warmup": 1, "min_reps": 3, "block_seconds": 0.01, "pair_seconds": 0.2})
    try:
        r = ev.evaluate(resolve_task("level1/relu"), read(ROOT / "tasks/solutions/cpu/level1/relu.py"), seed=2)
    finally:
        ev.close()
    assert r.correct and r.speedup is not None, r.feedback()
    assert len(taken) >= 2 and all(taken), taken  # the reference's worker and the candidate's, every set of slots

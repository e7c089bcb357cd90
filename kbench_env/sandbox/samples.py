"""Where a worker's threads spend their CPU time, sampled by the trusted side: the library each sample's instruction
pointer falls in.

``Sampler`` opens a Linux perf event on each of the worker's threads (``perf_event_open``: the software task clock,
one sample every ``period_ns`` of the thread's CPU time, user space only) and reads the kernel's sample buffers,
mapping each instruction pointer to the file mapped there (``/proc/<pid>/maps``). The kernel writes the samples;
the worker, which may not call ``perf_event_open`` itself (its seccomp filter), cannot forge or withhold them.
Threads are taken on while the worker is stopped (``attach``, before each timed block), so one started during a
block is sampled from the next. Where the machine refuses perf events (``perf_event_paranoid`` above 2, a seccomp
filter on the trusted side), ``available`` is False and nothing is sampled.

The kernel coverage uses it (pipeline/coverage.sampled_share): only time sampled in the candidate's own libraries
is the candidate's, whatever the profile's records say (a library that calls ``at::cpu::addmm`` runs MKL's GEMM in
libtorch_cpu, inside the record of the candidate's own call).
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import fcntl
import mmap
import os
import platform
import re
import struct

_NR = {"x86_64": 298, "aarch64": 241}.get(platform.machine())
_TYPE_SOFTWARE, _SW_TASK_CLOCK = 1, 1
_SAMPLE_IP, _SAMPLE_TID = 1, 2
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
_FLAG_FD_CLOEXEC = 8
_IOC_ENABLE, _IOC_DISABLE = 0x2400, 0x2401
_RECORD_SAMPLE = 9
_PAGES = 4  # data pages per thread (16 KiB: ~680 samples between reads; a block of 50 ms at 1 ms takes ~50)
_ATTR_SIZE = 128
MAX_THREADS = 256
_libc = ctypes.CDLL(None, use_errno=True)


def _attr(period_ns: int) -> ctypes.Array:
    head = struct.pack("IIQQQQQ", _TYPE_SOFTWARE, _ATTR_SIZE, _SW_TASK_CLOCK, period_ns, _SAMPLE_IP | _SAMPLE_TID,
                       0, _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV)
    return ctypes.create_string_buffer(head.ljust(_ATTR_SIZE, b"\0"), _ATTR_SIZE)


class _Thread:
    def __init__(self, fd: int):
        self.fd = fd
        self.size = (1 + _PAGES) * mmap.PAGESIZE
        self.ring = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def read(self) -> list[int]:
        """The instruction pointers sampled since the last read."""
        head, tail = struct.unpack_from("QQ", self.ring, 1024)
        offset, size = struct.unpack_from("QQ", self.ring, 1040)
        offset, size = offset or mmap.PAGESIZE, size or _PAGES * mmap.PAGESIZE
        ips = []
        while tail + 8 <= head:
            kind, _, length = struct.unpack("IHH", self._bytes(offset, size, tail, 8))
            if length < 8:
                break
            if kind == _RECORD_SAMPLE and length >= 24:
                ips.append(struct.unpack("Q", self._bytes(offset, size, tail + 8, 8))[0])
            tail += length
        struct.pack_into("Q", self.ring, 1032, head)  # data_tail: the kernel may write over what was read
        return ips

    def _bytes(self, offset: int, size: int, at: int, n: int) -> bytes:
        i = at % size
        if i + n <= size:
            return self.ring[offset + i:offset + i + n]
        return self.ring[offset + i:offset + size] + self.ring[offset:offset + n - (size - i)]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ring.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Sampler:
    """CPU samples of process ``pid``'s threads by the library their instruction pointer was in (module docstring).
    ``counts``: {path, or "[anonymous]" for executable memory no file backs: sample count}."""

    def __init__(self, pid: int, period_ns: int = 1_000_000):
        self.pid, self.period_ns = pid, int(period_ns)
        self.counts: dict = {}
        self.available = _NR is not None
        self.why_not: str | None = None if self.available else f"no perf_event_open number for {platform.machine()}"
        self._threads: dict = {}
        self._maps: tuple = ([], [])
        self.partial = False  # some threads could not be sampled (why_not says why)

    def attach(self) -> None:
        """Sample every thread the process has now (call while it is stopped); threads already sampled go on."""
        if not self.available:
            return
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            return
        for tid in tids:
            if tid in self._threads or len(self._threads) >= MAX_THREADS or self.partial:
                continue
            fd = _libc.syscall(_NR, _attr(self.period_ns), tid, -1, -1, _FLAG_FD_CLOEXEC)
            if fd < 0:
                err = ctypes.get_errno()
                if err == 3:  # ESRCH: the thread has just exited
                    continue
                self._refused(f"perf_event_open refused ({os.strerror(err)})")
                return
            try:
                thread = _Thread(fd)
                fcntl.ioctl(fd, _IOC_ENABLE, 0)
            except OSError as exc:
                os.close(fd)
                # the perf buffers a user may lock are bounded (perf_event_mlock_kb): past it, the threads taken on
                # so far go on being sampled
                self._refused(f"its sample buffer could not be mapped ({exc.strerror})")
                return
            self._threads[tid] = thread

    def drain(self) -> None:
        """Read the samples taken since the last read into ``counts`` (call while the process is stopped)."""
        ips = [ip for thread in self._threads.values() for ip in thread.read()]
        if not ips:
            return
        starts, rows = self._maps
        for ip in ips:
            i = bisect.bisect_right(starts, ip) - 1
            if i < 0 or ip >= rows[i][1]:
                self._maps = starts, rows = self._read_maps()
                i = bisect.bisect_right(starts, ip) - 1
            where = rows[i][2] if i >= 0 and ip < rows[i][1] else "[anonymous]"
            self.counts[where] = self.counts.get(where, 0) + 1

    def _read_maps(self) -> tuple:
        rows = []
        try:
            with open(f"/proc/{self.pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) < 5 or "x" not in parts[1]:
                        continue
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    path = parts[5].strip() if len(parts) == 6 else ""
                    rows.append((lo, hi, path if path.startswith("/") else path or "[anonymous]"))
        except OSError:
            pass
        rows.sort()
        return [r[0] for r in rows], rows

    def _refused(self, why: str) -> None:
        """No more threads can be sampled: none at all (``available`` False) if none was taken on yet."""
        self.why_not = why
        self.partial = True
        if not self._threads:
            self.available = False

    def close(self) -> None:
        for thread in self._threads.values():
            thread.close()
        self._threads.clear()


#: Vendors' libraries (CUDA's, cuDNN's, NCCL's, MKL's, OpenMP runtimes) that a worker may map from outside the system
#: and Python directories (an image with CUDA under /opt): not judged as the candidate's builds unless in its scratch.
VENDOR_LIBRARY = re.compile(r"^lib(?:cu|nv|nccl|cudnn|cublas|cusparse|cusolver|cufft|curand|cupti|mkl|iomp|gomp|omp)")


def executable_files(pid: int) -> list[str]:
    """The files process ``pid`` has mapped executable (its /proc/<pid>/maps, read here), in order; a file deleted
    since it was mapped keeps its " (deleted)" mark (it then cannot be read: scan_library says so)."""
    out: list = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
                    path = parts[5].rstrip("\n")
                    if path not in out:
                        out.append(path)
    except OSError:
        pass
    return out

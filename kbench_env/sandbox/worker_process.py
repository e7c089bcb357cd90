"""The sandboxed worker process, seen from the trusted side: start, talk with timeouts, watch, kill, clean up.

Owns the process boundary. A worker is a fresh process per evaluation, forked from the fork server
(confine/forkserver.py), and nothing a candidate does to its process outlives its evaluation. The worker confines
itself before the candidate loads (confine/: descriptors, namespaces, Landlock, capabilities, seccomp, limits, an
audit hook); this side

- hands the worker its policy (confine/policy.Limits) and scratch directory (job.py),
- puts the worker in a pids cgroup of its own where the machine allows (root, confine/cgroup.py): a process limit
  that also holds for uid 0, and a complete kill list (children that left the process group included),
- keeps a report channel separate from the protocol (report_channel.py): the worker's confinement status, then every
  attempt the audit hook refused (``violations()``; the evaluator turns them into a ``sandbox_violation`` flag),
- reads and writes the worker's connection with deadlines, and refuses what it sends beyond what is expected
  (protocol/wire.py): half a message, a worker that stops reading, or a reply that would swell this process end
  that worker,
- watches resident memory (GPU workers) and the scratch directory's size on disk,
- relays the worker's build requests to the trusted builder and answers them (worker_build.py: the worker never
  compiles nor writes the build cache, which it sees read-only), claims the builds it loads against eviction,
- kills the process group and the cgroup on a timeout or at the end, keeps the cache within its bound
  (builder/cache.py), removes the scratch (reaper.py, in the background).

A dead or hung worker becomes a ``WorkerError`` (diagnosis.py) with its exit signal and the tail of its own output;
the caller turns that into an EvalResult.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.connection as mpc
import os
import signal
import tempfile
import time

from kbench_env.config import environ
from kbench_env.machine.device import Device
from kbench_env.protocol import messages, wire
from kbench_env.builder import cache
from kbench_env.sandbox.confine.cgroup import PidsCgroup, kill_session
from kbench_env.sandbox.diagnosis import WorkerError, exit_description, partial_note, rss_bytes
from kbench_env.sandbox.confine.forkserver import context, spawning
from kbench_env.sandbox.job import worker_job
from kbench_env.sandbox.memory import Freezer, ProcessMemory
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.reaper import REAPER
from kbench_env.sandbox.report_channel import ReportChannel
from kbench_env.sandbox.samples import VENDOR_LIBRARY, executable_files
from kbench_env.sandbox.worker_build import WorkerBuilds, scan_library
from kbench_env.sandbox.cpu_tally import TALLY, process_cpu_seconds
from kbench_env.worker import loop as worker_mod


class Worker:
    """One sandboxed candidate process. Use as a context manager; ``close()`` always reaps it."""

    def __init__(self, source: str | None, backend: str, device: str, build_root: str, limits: Limits | None = None,
                 scratch_root: str | None = None, audit: bool = True, builder=None, compile_warm: bool = False):
        """``source=None`` starts a spare: confined (and on a GPU, with CUDA started) but waiting for its candidate,
        which ``assign`` hands it (SpareWorkers keeps one ready). ``builder`` (builder.Builder) compiles what the
        candidate builds; without one (a reference worker) every build request is refused. ``compile_warm``: the
        worker imports torch.compile's modules as it starts (a reference worker that will compile)."""
        self.limits = limits or Limits()
        self._device = device
        self._builds = WorkerBuilds(builder, build_root, self.limits)
        self._assigned = source is not None
        self._role = "candidate" if builder is not None else "reference"  # (cpu_tally.py's roles)
        self.busy_seconds = 0.0  # time the worker reported spending on requests (build excluded)
        # With $KBENCH_TRACE set, per message: what, seconds to pack and send or to wait for the reply, bytes, the
        # worker's busy seconds; written there as a JSON line when the worker closes (where an evaluation's time
        # goes). None otherwise: nothing is recorded.
        self.trace: list | None = [] if environ.get("KBENCH_TRACE") else None
        self._t_created = time.monotonic()
        self.build_root = build_root
        self._closed = False
        self._next_disk_check = 0.0
        self._cgroup = self._report = self.proc = self.scratch = self.cpu_marks = None
        self._hands = None
        try:
            self._start(source, backend, device, build_root, scratch_root, audit, builder is not None, compile_warm)
        except BaseException:
            if self.proc is None or self.proc.pid is None:
                self._release()  # nothing was started: give back the cgroup, the scratch and waiting workers
            raise

    @property
    def builds(self) -> list:
        """The build units (directories of the cache) the worker was given, in order."""
        return list(self._builds.units)

    def linked(self, mapped_from=None) -> list:
        """(library, builder/symbols.scan) of each library the worker was given, read before it loaded them; with
        ``mapped_from`` (directories whose files are not the candidate's: the system's, the Python installation's),
        also of each other file the worker has mapped executable now (read from /proc/<pid>/maps on this side): a
        library the candidate wrote and loaded itself (ctypes, torch.ops.load_library) is judged as a build."""
        given = list(self._builds.linked)
        if mapped_from is None or self.proc is None or self.proc.pid is None:
            return given
        known = {os.path.realpath(p) for p, _ in given}
        for path in executable_files(self.proc.pid):
            real = os.path.realpath(path)
            if path.startswith(tuple(mapped_from)) or real in known:
                continue
            # a vendor's library installed elsewhere (/opt) is not the candidate's; one in its scratch always is
            if VENDOR_LIBRARY.match(os.path.basename(path)) and not real.startswith(self.scratch + "/"):
                continue
            known.add(real)
            given.append((path, {**scan_library(path), "mapped": True}))
        return given

    @property
    def protections(self) -> dict:
        """The worker's confinement status (confinement.apply), once it has reported ({} before)."""
        return self._report.protections if self._report is not None else {}

    def hands(self) -> tuple[Freezer, ProcessMemory]:
        """This side's access to the worker's process (memory.py): stop and resume it, read and write its memory
        while it is stopped."""
        if self._hands is None:
            procs = os.path.join(self._cgroup.path, "cgroup.procs") if self._cgroup is not None else None
            group = self._cgroup.freezer if self._cgroup is not None else None
            self._hands = (Freezer(self.proc.pid, procs, group), ProcessMemory(self.proc.pid))
        return self._hands

    def assign(self, source: str) -> None:
        """Give a spare (started with ``source=None``) its candidate; it then builds and loads it as a worker
        started with the source does. Raises WorkerError if the spare is gone (it leaves after
        ``policy.SPARE_IDLE_S``)."""
        if self._assigned or self._closed:
            raise ValueError("assign() is for an unused spare worker")
        if self.proc.exitcode is not None:
            raise WorkerError("the spare worker has exited", self.log_tail())
        self._assigned = True
        self.send({"type": messages.SOURCE, "source": source})

    def _start(self, source, backend, device, build_root, scratch_root, audit, builds: bool,
               compile_warm: bool = False) -> None:
        self.scratch = os.path.realpath(tempfile.mkdtemp(prefix="kbench-worker-",
                                                         dir=scratch_root or self.limits.scratch_root))
        if self.limits.isolation and "cgroup" not in self.limits.isolation_off and self.limits.processes:
            with contextlib.suppress(OSError):
                self._cgroup = PidsCgroup(self.limits.processes)
        ctx = context()
        self.conn, child = ctx.Pipe(duplex=True)
        reports, report_w = ctx.Pipe(duplex=False)
        self._report = ReportChannel(reports)
        # Everything from the worker is read through these, never waiting past a deadline nor reading more than the
        # caller expects (wire.FrameReader); requests go out through wire.send_frame, bounded in time as well.
        self._reader = wire.FrameReader(self.conn.fileno(), wire.HEADROOM)
        job = worker_job(self.limits, source, backend, device, self.scratch, build_root, audit, report_w,
                         self._cgroup.path if self._cgroup else None, builds, compile_warm)
        if self._cgroup is not None:  # the worker waits until it is in each; it reports the stop it gets
            job["sandbox"]["cgroup_hierarchies"] = self._cgroup.hierarchies
            job["sandbox"]["freezer"] = self._cgroup.freezer.version if self._cgroup.freezer is not None else None
        proc = ctx.Process(target=worker_mod.main, args=(child, job), daemon=True)
        try:
            with spawning():
                proc.start()
        finally:
            child.close()
            report_w.close()
        self.proc = proc
        if self._cgroup is not None:
            with contextlib.suppress(OSError):  # the worker reports the cgroup missing
                self._cgroup.add(self.proc.pid)
        try:
            self.recv(timeout=60.0, what="worker start")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ messaging
    def send(self, header: dict, payload=None, timeout: float | None = None) -> None:
        """Send a request; the worker must take it within ``timeout`` seconds (default: the run timeout)."""
        timeout = self.limits.run_timeout if timeout is None else timeout
        try:
            t0 = time.monotonic()
            data = wire.pack(header, payload)
            wire.send_frame(self.conn.fileno(), data, t0 + timeout)
            if self.trace is not None:
                self.trace.append({"send": header.get("type"), "config": header.get("config"), "bytes": len(data),
                                   "s": round(time.monotonic() - t0, 4)})
        except TimeoutError as exc:
            self.kill()
            raise WorkerError(f"timed out after {timeout:.0f} s sending the worker its {header.get('type')!r} request: "
                              f"{exc} (the worker was killed)", self.log_tail()) from None
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise WorkerError(self._death("while sending it work"), self.log_tail()) from None

    def recv(self, timeout: float, what: str, expect_bytes: int | None = None):
        """The worker's next message (header, payload), within ``timeout`` seconds. A reply that should carry
        outputs says how many bytes they are (``expect_bytes``): a longer message is refused unread
        (wire.reply_limit); any other may be headers only (wire.HEADROOM)."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        limit = wire.HEADROOM if expect_bytes is None else wire.reply_limit(expect_bytes)
        if self.limits.memory_bytes:  # nor more than the worker may hold (the memory watchdog's bound)
            limit = min(limit, self.limits.memory_bytes + (2 << 30))
        self._reader.limit = limit
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                partial = self._reader.pending()
                self.kill()
                raise WorkerError(f"timed out after {timeout:.0f} s during {what} (the worker was killed)"
                                  + (partial_note(*partial) if partial else ""), self.log_tail())
            reports = self._report.conn  # (draining it may close it and set the connection to None)
            waitables = [self.conn, self.proc.sentinel] + ([reports] if reports is not None else [])
            ready = mpc.wait(waitables, timeout=min(left, 0.5))
            if reports is not None and reports in ready:
                self._drain_reports()
                ready = [r for r in ready if r is not reports]
                if not ready:
                    continue
            if not ready:
                self._check_memory()
                self._check_disk()
                continue
            if self.conn in ready:
                try:
                    data = self._reader.read(min(deadline, time.monotonic() + 0.5))
                except wire.FrameError as exc:
                    self.kill()
                    raise WorkerError(f"the worker's message during {what} was refused unread: {exc} (the worker was "
                                      "killed)", self.log_tail()) from None
                except (EOFError, OSError):
                    raise WorkerError(self._death(f"during {what}"), self.log_tail()) from None
                if data is None:  # a message still arriving
                    self._check_memory()
                    self._check_disk()
                    continue
                try:
                    header, payload = wire.unpack(data, max_tensor_bytes=len(data))
                    if not (isinstance(header, dict) and isinstance(header.get("type"), str)):
                        raise ValueError("its header is not a JSON object with a type")
                    self.busy_seconds += float(header.get("busy_s") or 0.0)
                    if self.trace is not None:
                        self.trace.append({"recv": what, "bytes": len(data), "s": round(time.monotonic() - t0, 4),
                                           "busy_s": round(float(header.get("busy_s") or 0.0), 4),
                                           **{k: header[k] for k in ("steps_ms", "steps_usage") if k in header}})
                except Exception as exc:  # a malformed message is the candidate's doing
                    self.kill()
                    raise WorkerError(f"the worker sent an unreadable message during {what}: {exc}", self.log_tail()) from None
                if header["type"] == messages.LOADED:  # (its CPU stages: cpu_tally.py)
                    self.cpu_marks = header.get("cpu_seconds")
                if header["type"] != messages.BUILD:
                    return header, payload
                self._builds.serve(self, header, deadline)  # a build the candidate asked for, inside this exchange
            elif ready:
                raise WorkerError(self._death(f"during {what}"), self.log_tail())

    # ------------------------------------------------------------------ reports
    def _drain_reports(self) -> None:
        """Read what the worker's confinement reported: its status (first, written before any candidate code ran),
        then the attempts its audit hook refused."""
        if self._report is not None:
            self._report.drain(self._running)

    def _running(self) -> bool:
        """Whether the worker still runs (given a moment to exit), unless it is being closed."""
        if self.proc.exitcode is None and not self._closed:
            self.proc.join(timeout=0.2)
            return self.proc.exitcode is None
        return False

    def violations(self) -> list[str]:
        """What the candidate tried that the sandbox refused (empty when nothing)."""
        self._drain_reports()
        return self._report.violations() if self._report is not None else []

    # ------------------------------------------------------------------ watchdogs
    def watch(self) -> None:
        """The watchdogs' checks while waiting on the worker: its memory, its scratch directory's size, its death."""
        self._check_memory()
        self._check_disk()
        if self.proc.exitcode is not None:
            raise WorkerError(self._death("while waiting for it"), self.log_tail())

    def _check_memory(self) -> None:
        """Resident-memory watchdog (the GPU path, where an address-space limit cannot be used)."""
        rss = rss_bytes(self.proc.pid)
        if rss > self.limits.memory_bytes + (2 << 30):
            self.kill()
            raise WorkerError(f"the worker used {rss / 2**30:.1f} GiB of memory, over its limit of "
                              f"{self.limits.memory_bytes / 2**30:.1f} GiB (killed)", self.log_tail())

    def _check_disk(self) -> None:
        """Scratch-size watchdog: the file-size limit bounds one file, this bounds them all (every 0.5 s)."""
        if not self.limits.disk_bytes or time.monotonic() < self._next_disk_check:
            return
        used, files = cache.disk_usage(self.scratch)
        self._next_disk_check = time.monotonic() + 0.5
        if used > self.limits.disk_bytes or files >= 100_000:
            self.kill()
            raise WorkerError(f"the worker wrote {used / 2**30:.2f} GiB in {files} files to its scratch directory, "
                              f"over its limit of {self.limits.disk_bytes / 2**30:.2f} GiB (killed)", self.log_tail())

    def _death(self, when: str) -> str:
        self.proc.join(timeout=2)
        code = self.proc.exitcode
        if code is None:
            self.kill()
            return f"the worker stopped answering {when}"
        return exit_description(code, when, self.log_tail)

    def log_tail(self, max_chars: int = 3000) -> str:
        path = os.path.join(self.scratch, "worker.log")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - max_chars))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text.replace(self.build_root, "<build>").replace(self.scratch, "<scratch>")

    # ------------------------------------------------------------------ life cycle
    def kill(self) -> None:
        pid = self.proc.pid
        if pid is not None and self.proc.exitcode is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self._cgroup is not None:
            self._cgroup.kill_all()
        elif pid is not None:
            kill_session(pid)
        self.proc.join(timeout=5)

    def close(self) -> None:
        if self._closed:
            return
        # No graceful exit: the worker holds nothing to save (its reports are in the channel, its builds were made
        # by the builder), and waiting for its interpreter to shut down would be much of a cached CPU step.
        self._drain_reports()
        self._closed = True
        self._write_trace()
        if self._hands is not None:
            self._hands[1].close()
        # The process group may hold children the candidate started: kill it either way, now. On the CPU, waiting
        # for the processes to be gone, the cgroup's removal and the release (the cgroup's polling) happen in the
        # background; reaper.flush_cleanups() waits for them. A GPU worker is waited for here: the next candidate
        # must not start while a dying process still holds GPU memory.
        pid = self.proc.pid
        alive = pid if self.proc.exitcode is None else None  # (a pid reaped already may be another process's now)
        TALLY.record(self._role if self._assigned else "spare_unused", process_cpu_seconds(alive), self.cpu_marks)
        if pid is not None:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        if self._cgroup is not None:
            self._cgroup.signal_all()
        self.conn.close()
        if Device.parse(self._device).is_cpu:
            REAPER.submit(self._reap)
        else:
            self._reap()

    def _reap(self) -> None:
        self.kill()
        self._release()

    def _write_trace(self) -> None:
        path = environ.get("KBENCH_TRACE")
        if not path or self.trace is None:
            return
        try:
            with open(path, "a") as f:
                f.write(json.dumps({"worker": self.proc.pid, "lived_s": round(time.monotonic() - self._t_created, 3),
                                    "messages": self.trace}) + "\n")
        except OSError:
            pass

    def _release(self) -> None:
        """After the last process of the worker is gone: let its builds go (and keep the cache within its bound),
        drop its cgroup and scratch."""
        if self._cgroup is not None:
            self._cgroup.kill_all()
            self._cgroup.remove()
            self._cgroup = None
        if self._report is not None:
            self._report.close()
        if self._builds.release():  # the cache grew: back under its bound, in the background
            root, bound = self.build_root, self.limits.cache_bytes
            REAPER.submit(lambda: cache.enforce_bound(root, bound))
        if self.scratch is not None:
            REAPER.submit(self.scratch)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


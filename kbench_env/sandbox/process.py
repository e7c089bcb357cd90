"""The sandboxed worker process, seen from the trusted side: policy, start, talk with timeouts, watch, kill, clean up.

Owns the process boundary. A worker is a fresh process per evaluation, forked from a server that has torch
already imported (``multiprocessing`` forkserver, itself started with only the allowed environment and no
descriptor of this process's but stdio, so no credential is ever in a worker's memory), so starting one costs
milliseconds, and nothing a candidate does to its process outlives its evaluation. The worker confines itself
before the candidate loads (confine.py: descriptors, namespaces, Landlock, capabilities, seccomp, limits, an audit
hook); this side

- decides the policy (``Limits``) and hands it to the worker with its scratch directory,
- puts the worker in a pids cgroup of its own where the machine allows (root): a process limit that also holds
  for uid 0, and a complete kill list (children that left the process group included),
- keeps a report channel separate from the protocol: the worker's confinement status, then every attempt the
  audit hook refused (``violations()``; the evaluator turns them into a ``sandbox_violation`` flag),
- reads and writes the worker's connection with deadlines, and refuses what it sends beyond what is expected
  (wire.py): half a message, a worker that stops reading, or a reply that would swell this process end that worker,
- watches resident memory (GPU workers) and the scratch directory's size on disk,
- kills the process group and the cgroup on a timeout or at the end, publishes the builds the worker made in its
  private overlay of the build cache under its own source's directory (buildcache.py: new ones only, within a
  quota; the cache kept within its bound), removes the scratch.

A dead or hung worker becomes a ``WorkerError`` with its exit signal and the tail of its own output; the caller
turns that into an EvalResult. ``doctor()`` says which protections are active on this machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing.connection as mpc
import os
import re
import shutil
import signal
import tempfile
import threading
import time

from kbench_env.protocol import wire
from kbench_env.sandbox import buildcache, policy
from kbench_env.sandbox.cgroup import PidsCgroup, kill_session
from kbench_env.sandbox.confine.confinement import LIMITATIONS
from kbench_env.sandbox.confine.landlock import landlock_abi
from kbench_env.sandbox.forkserver import context, spawning
from kbench_env.sandbox.job import worker_job
from kbench_env.sandbox.policy import Limits
from kbench_env.sandbox.reaper import REAPER
from kbench_env.worker import loop as worker_mod

_INFLIGHT_LOCK = threading.Lock()
_INFLIGHT: dict = {}  # build key -> Event set once the worker building that source has published it

def _rss_bytes(pid) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b.*")


def _last_exception(log: str, max_chars: int = 400) -> str | None:
    """The last ``SomeError: message`` line of a Python traceback in the worker's log (the cause behind an exit
    status), trimmed."""
    for line in reversed(log.splitlines()):
        line = line.strip()
        if _EXC_LINE.match(line):
            return line[:max_chars]
    return None


_MAX_REPORT_BYTES = 1 << 16  # one sandbox report (confine.py sends a few hundred bytes)
_MAX_REPORTS_PER_DRAIN = 256


def _partial_note(got: int, size: int | None) -> str:
    whole = f"the {size:,} bytes" if size is not None else "the length"
    return f"; it had begun a message, sent {got:,} of {whole} of it and stopped"


class WorkerError(RuntimeError):
    """The worker died, hung or broke the protocol."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


# ---------------------------------------------------------------------- the worker


class Worker:
    """One sandboxed candidate process. Use as a context manager; ``close()`` always reaps it."""

    def __init__(self, source: str | None, backend: str, device: str, build_root: str, limits: Limits | None = None,
                 scratch_root: str | None = None, audit: bool = True):
        """``source=None`` starts a spare: confined (and on a GPU, with CUDA started) but waiting for its candidate,
        which ``assign`` hands it (SpareWorkers keeps one ready)."""
        self.limits = limits or Limits()
        self._backend, self._device = backend, device
        self._build_key = self._build_event = self._claim = self.build_dir = None
        self._build_done = False
        self._built = False  # the worker reported a build it made (not found in the cache)
        if source is not None:
            self._claim_build(source, build_root)
        self.busy_seconds = 0.0  # time the worker reported spending on requests (build excluded)
        # With $KBENCH_TRACE set, per message: what, seconds to pack and send or to wait for the reply, bytes, the
        # worker's busy seconds; written there as a JSON line when the worker closes (where an evaluation's time
        # goes). None otherwise: nothing is recorded.
        self.trace: list | None = [] if os.environ.get("KBENCH_TRACE") else None
        self._t_created = time.monotonic()
        self.build_root = build_root
        self.protections: dict = {}  # the worker's confinement status (confine.apply), once it has reported
        self.published: list = []
        self._violations: list = []
        self._report_closed_early = False
        self._closed = False
        self._next_disk_check = 0.0
        self._cgroup = self._reports = self.proc = self.scratch = None
        try:
            self._start(source, backend, device, build_root, scratch_root, audit)
        except BaseException:
            if self.proc is None or self.proc.pid is None:
                self._release()  # nothing was started: give back the cgroup, the scratch and waiting workers
            raise

    def _claim_build(self, source: str, build_root: str) -> None:
        """The source's own directory of the cache (buildcache.py) is held for the worker's lifetime. Builds are
        private to a worker until it has loaded (its overlay of the cache): a worker for a source that another
        worker of this process is building waits for that build to be published, as torch's build lock made it
        wait before."""
        self._claim = buildcache.Claim(build_root, buildcache.source_key(str(source)))
        self.build_dir = self._claim.path
        key = "\0".join((self._backend, self._device, build_root, str(source)))
        self._build_key = hashlib.sha256(key.encode()).hexdigest()
        with _INFLIGHT_LOCK:
            first = _INFLIGHT.get(self._build_key)
            self._build_event = None if first is not None else _INFLIGHT.setdefault(self._build_key, threading.Event())
        if first is not None:
            first.wait(timeout=self.limits.build_timeout)

    def assign(self, source: str) -> None:
        """Give a spare (started with ``source=None``) its candidate; it then builds and loads it as a worker
        started with the source does. Raises WorkerError if the spare is gone (it leaves after ``SPARE_IDLE_S``)."""
        if self._build_key is not None or self._closed:
            raise ValueError("assign() is for an unused spare worker")
        if self.proc.exitcode is not None:
            raise WorkerError("the spare worker has exited", self.log_tail())
        self._claim_build(source, self.build_root)
        self.send({"type": "source", "source": source, "build_dir": self.build_dir})

    def _start(self, source, backend, device, build_root, scratch_root, audit) -> None:
        self.scratch = os.path.realpath(tempfile.mkdtemp(prefix="kbench-worker-",
                                                         dir=scratch_root or self.limits.scratch_root))
        if self.limits.isolation and "cgroup" not in self.limits.isolation_off and self.limits.processes:
            with contextlib.suppress(OSError):
                self._cgroup = PidsCgroup(self.limits.processes)
        ctx = context()
        self.conn, child = ctx.Pipe(duplex=True)
        self._reports, report_w = ctx.Pipe(duplex=False)
        # Everything from the worker is read through these, never waiting past a deadline nor reading more than the
        # caller expects (wire.FrameReader); requests go out through wire.send_frame, bounded in time as well.
        self._reader = wire.FrameReader(self.conn.fileno(), wire.HEADROOM)
        self._report_reader = wire.FrameReader(self._reports.fileno(), _MAX_REPORT_BYTES)
        job = worker_job(self.limits, source, backend, device, self.scratch, build_root, self.build_dir, audit,
                         report_w, self._cgroup.path if self._cgroup else None)
        proc = ctx.Process(target=worker_mod.main, args=(child, job), daemon=True)
        try:
            with spawning():
                proc.start()
        finally:
            child.close()
            report_w.close()
        self.proc = proc
        if self._cgroup is not None:
            try:
                self._cgroup.add(self.proc.pid)
            except OSError:  # the worker reports the cgroup missing
                pass
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
                                  + (_partial_note(*partial) if partial else ""), self.log_tail())
            reports = self._reports  # (draining it may close it and set self._reports to None)
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
                                           "busy_s": round(float(header.get("busy_s") or 0.0), 4)})
                    if not self._build_done and header.get("type") in ("loaded", "error"):
                        self._built = header.get("cached") is False
                        self._build_over()  # the build result: publish it now, for workers waiting on it
                    return header, payload
                except Exception as exc:  # a malformed message is the candidate's doing
                    self.kill()
                    raise WorkerError(f"the worker sent an unreadable message during {what}: {exc}", self.log_tail()) from None
            elif ready:
                raise WorkerError(self._death(f"during {what}"), self.log_tail())

    # ------------------------------------------------------------------ reports
    def _drain_reports(self) -> None:
        """Read what the worker's confinement reported: its status (first, written before any candidate code ran),
        then the attempts its audit hook refused."""
        r = self._reports
        if r is None:
            return
        try:
            # What is there now, never waiting (a report begun and not finished stays for the next call), and at
            # most so many reports a call: a candidate that floods the channel cannot hold the caller here.
            for _ in range(_MAX_REPORTS_PER_DRAIN):
                data = self._report_reader.read(time.monotonic())
                if data is None:
                    break
                try:
                    msg = json.loads(bytes(data))
                except ValueError:
                    msg = {"kind": "violation", "what": "sent an unreadable sandbox report"}
                if not isinstance(msg, dict):
                    continue
                if msg.get("kind") == "status" and not self.protections:
                    self.protections = msg
                elif msg.get("kind") == "violation" and len(self._violations) < 64:
                    self._violations.append(str(msg.get("what"))[:300])
        except wire.FrameError as exc:  # only the candidate writes such a thing: the channel is closed to it
            self._violations.append(f"sent a malformed sandbox report ({exc})"[:300])
            self._reports = None
            r.close()
        except (EOFError, OSError):
            # The channel closed. At exit that is normal; while the worker still runs, the candidate closed it.
            if self.proc.exitcode is None and not self._closed:
                self.proc.join(timeout=0.2)
                if self.proc.exitcode is None:
                    self._report_closed_early = True
            self._reports = None
            r.close()

    def violations(self) -> list[str]:
        """What the candidate tried that the sandbox refused (empty when nothing)."""
        self._drain_reports()
        out = list(self._violations)
        if self._report_closed_early:
            out.append("closed the sandbox's report channel")
        return out

    # ------------------------------------------------------------------ watchdogs
    def _check_memory(self) -> None:
        """Resident-memory watchdog (the GPU path, where an address-space limit cannot be used)."""
        rss = _rss_bytes(self.proc.pid)
        if rss > self.limits.memory_bytes + (2 << 30):
            self.kill()
            raise WorkerError(f"the worker used {rss / 2**30:.1f} GiB of memory, over its limit of "
                              f"{self.limits.memory_bytes / 2**30:.1f} GiB (killed)", self.log_tail())

    def _check_disk(self) -> None:
        """Scratch-size watchdog: the file-size limit bounds one file, this bounds them all (every 0.5 s)."""
        if not self.limits.disk_bytes or time.monotonic() < self._next_disk_check:
            return
        used, files = buildcache.disk_usage(self.scratch)
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
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = {"SIGSEGV": " (segmentation fault: an out-of-bounds access or a bad pointer in the kernel)",
                    "SIGABRT": " (abort: an assertion or a C++ exception escaping)",
                    "SIGKILL": " (killed: out of memory or a resource limit)",
                    "SIGBUS": " (bus error: misaligned or unmapped memory)",
                    "SIGFPE": " (arithmetic error, e.g. an integer division by zero)",
                    "SIGXCPU": " (the worker used up its CPU-time limit)",
                    "SIGSYS": " (a forbidden system call: the sandbox's seccomp filter)",
                    "SIGXFSZ": " (a file grew past the size limit)"}.get(name, "")
            return f"the worker crashed with {name}{hint} {when}"
        last = _last_exception(self.log_tail())
        return f"the worker exited with status {code} {when}" + (f": {last}" if last else "")

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
        if self.build_dir:
            text = text.replace(self.build_dir, "<build>")
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
        # No graceful exit: the worker holds nothing to save (its reports are in the channel, its builds published
        # once loaded), and waiting for its interpreter to shut down took 17 ms of a profiled cached CPU step.
        self._drain_reports()
        self._closed = True
        self._write_trace()
        # The process group may hold children the candidate started: kill it either way, now. On the CPU, waiting
        # for the processes to be gone, the cgroup's removal and the release (~12 ms of a cached step, in the
        # cgroup's polling) happen in the background; flush_cleanups() waits for them. A GPU worker is waited for
        # here: the next candidate must not start while a dying process still holds GPU memory.
        pid = self.proc.pid
        if pid is not None:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        if self._cgroup is not None:
            self._cgroup.signal_all()
        self.conn.close()
        if self._device.startswith("cpu"):
            REAPER.submit(self._reap)
        else:
            self._reap()

    def _reap(self) -> None:
        self.kill()
        self._release()

    def _write_trace(self) -> None:
        path = os.environ.get("KBENCH_TRACE")
        if not path or self.trace is None:
            return
        try:
            with open(path, "a") as f:
                f.write(json.dumps({"worker": self.proc.pid, "lived_s": round(time.monotonic() - self._t_created, 3),
                                    "messages": self.trace}) + "\n")
        except OSError:
            pass

    def _publish(self) -> None:
        """Publish what the worker built under its own source's directory, within ``Limits.build_bytes`` (on the
        CPU; a GPU worker has no overlay and wrote into the shared cache itself)."""
        if self.scratch is not None and self._claim is not None and \
                "build_cache_overlay" in self.protections.get("active", {}):
            self.published += buildcache.publish(self.scratch, self.build_root, os.path.basename(self._claim.path),
                                                 self.limits.build_bytes)

    def _build_over(self) -> None:
        """The build finished (or never will): publish it and let waiting workers of the same source go on."""
        if self._build_done:
            return
        self._build_done = True
        try:
            self._drain_reports()
            self._publish()
        finally:
            if self._build_event is not None:
                with _INFLIGHT_LOCK:
                    if _INFLIGHT.get(self._build_key) is self._build_event:
                        del _INFLIGHT[self._build_key]
                self._build_event.set()

    def _release(self) -> None:
        """After the last process of the worker is gone: publish its new builds, let its source's directory of the
        cache go (and keep the cache within its bound), drop its cgroup and scratch."""
        if self._cgroup is not None:
            self._cgroup.kill_all()
            self._cgroup.remove()
            self._cgroup = None
        if self._reports is not None:
            self._reports.close()
            self._reports = None
        if self._build_done:
            self._publish()  # builds made after loading (a fast-path kernel compiled in forward)
        self._build_over()
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        if self.published or self._built:  # the cache grew: back under its bound, in the background
            root, bound = self.build_root, self.limits.cache_bytes
            REAPER.submit(lambda: buildcache.enforce_bound(root, bound))
        if self.scratch is not None:
            REAPER.submit(self.scratch)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------- spare workers

class SpareWorkers:
    """One started, confined, idle worker kept ready for the next candidate, so that a step does not wait for a
    worker to start: on the CPU, the fork, confinement and imports (~30 ms); on a GPU, also CUDA's and the
    forward audit's profiler's start (~6.5 s on an H100, bench/results/throughput_h100.md), which a spare does
    while nothing of the caller's waits on it.

    A spare holds no candidate code until ``take`` assigns it one, and serves one candidate only, as every worker.
    The replacement starts when one is taken on the CPU (a start costs milliseconds, done while the taken worker
    builds), and on a GPU when the caller says its evaluation is over (``evaluation_over``), so that a spare's start,
    which launches a kernel and starts the profiler, never overlaps a timed run of this caller's; other callers'
    evaluations on the same GPU may overlap it, as any worker's start would.
    """

    def __init__(self, backend: str, device: str, build_root: str, limits: Limits):
        self._args = (backend, device, build_root, limits)
        self._refill_at_take = device.startswith("cpu")
        self._lock = threading.Lock()
        self._spare: Worker | None = None
        self._starting = False
        self._closed = False
        self.served = 0  # candidates given a spare (the rest started a worker of their own)

    def take(self, source: str) -> Worker:
        """A worker for ``source``: the spare if one is ready and alive, else a newly started one."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and time.monotonic() - spare._t_created > policy.SPARE_IDLE_S - 5:
            spare.close()  # about to leave by itself: it might go between being given the source and loading it
            spare = None
        worker = None
        if spare is not None:
            try:
                spare.assign(source)  # first: the spare starts loading while the replacement is set going
                self.served += 1
                worker = spare
            except (WorkerError, ValueError):
                spare.close()
        if self._refill_at_take:
            self.refill()
        return worker if worker is not None else Worker(source, *self._args)

    def evaluation_over(self) -> None:
        """The caller's evaluation (its timed runs included) has ended: on a GPU, the replacement starts now."""
        if not self._refill_at_take:
            self.refill()

    def refill(self) -> None:
        """Start a spare in the background, unless one is ready or starting."""
        with self._lock:
            if self._closed or self._spare is not None or self._starting:
                return
            self._starting = True
        threading.Thread(target=self._start_one, name="kbench-spare-worker", daemon=True).start()

    def _start_one(self) -> None:
        try:
            worker = Worker(None, *self._args)
        except Exception:  # noqa: BLE001 - no spare this time: the next take starts its own worker
            worker = None
        with self._lock:
            self._starting = False
            keep = worker is not None and not self._closed and self._spare is None
            if keep:
                self._spare = worker
        if worker is not None and not keep:
            worker.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()


# ---------------------------------------------------------------------- doctor


def doctor(device: str = "cpu") -> dict:
    """Start one sandboxed worker and report which protections are active on this machine (and which not, why)."""
    out: dict = {"machine": {"uid": os.geteuid(), "kernel": os.uname().release, "landlock_abi": landlock_abi(),
                             "pids_cgroup": (PidsCgroup.base() or (None, None))[0]}}
    tools = {}
    for tool in ("bwrap", "nsjail"):
        tools[tool] = shutil.which(tool) or "not installed"
    out["machine"]["tools"] = tools
    with tempfile.TemporaryDirectory(prefix="kbench-doctor-") as root:
        src = "class ModelNew:\n    pass\n"
        times = []
        for _ in range(4):  # the first one starts the fork server
            t0 = time.perf_counter()
            with Worker(src, "cpu", device, root) as w:
                w.recv(60.0, "load")
                w._drain_reports()
                status = w.protections
            times.append((time.perf_counter() - t0) * 1e3)
        out.update(status or {"active": {}, "missing": {"sandbox": "the worker sent no status"}})
        out["worker_start_ms"] = round(sorted(times[1:])[1], 1)
    out["limitations"] = list(LIMITATIONS)
    return out


def format_doctor(report: dict) -> str:
    m = report["machine"]
    lines = [f"kbench sandbox on this machine (uid {m['uid']}, kernel {m['kernel']}, Landlock ABI {m['landlock_abi']})",
             f"a sandboxed worker starts, loads a trivial candidate and is cleaned up in {report.get('worker_start_ms')} ms "
             f"(confining itself: {report.get('confine_ms')} ms)",
             "", "active:"]
    lines += [f"  + {k}: {v}" for k, v in report.get("active", {}).items()]
    lines += ["", "not active:"]
    lines += [f"  - {k}: {v}" for k, v in report.get("missing", {}).items()] or ["  (none)"]
    lines += ["", "not stopped by design or for want of a mechanism:"]
    lines += [f"  * {x}" for x in report.get("limitations", [])]
    lines += ["", "tools not used (namespaces and Landlock are applied directly): "
              + ", ".join(f"{k}: {v}" for k, v in m.get("tools", {}).items())]
    return "\n".join(lines)

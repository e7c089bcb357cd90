"""The torch.compile baseline timed off the candidates' path: after them, when the device has nothing of theirs.

With the reward measured against the eager reference (the default baseline), the compiled reference's time only
gives ``speedup_compile``, a figure shown beside the reward. Timed with the eager one, its timing added to the
reference's exclusive hold of the device and torch.compile's compile of every configuration (seconds of the host's
CPU each) to the first candidate of every task, on a fresh machine while the candidates' builds take the cores.
Here a task's compiled reference is run and timed in a reference worker of its own, in one thread for the
evaluator. The worker is behind the builds (nice 19, not the idle class: a compile starved for as long as the builds
keep the cores would run out of its timeout) whenever it holds nothing of the device: its start, which imports
torch.compile's modules (compile_gate.warm), and on a GPU the compile itself, which lets the device go; it is back
at its own priority while it holds the device (only where this process may raise it again: idle_start.py). Its run
is under a shared hold of the trusted side's places (as a run ahead's: pipeline/trusted_hold.py), its timing
under an exclusive hold taken only while no candidate holds or waits for the device (``acquire_idle``), each
configuration's as in the eager reference's timing (``Baselines._time_reference``). Until a configuration's
compiled time is known, a candidate's ``speedup_compile`` is None (pipeline/timing.py asks for every
configuration's); the times are kept in memory and in the reference cache on disk, apart from the eager entries
(their fields with ``"label": "compile"``), so that a later process has them from its first candidate.

A task wanted again while queued or being timed is not queued twice; one whose timing did not get the device
within ``IDLE_WAIT_S`` is left for its next candidate to ask again. On a GPU a timing that holds the device longer
than GIVE_WAY_S while a candidate's work waits for it gives way (its worker killed, the hold let go: ``_GiveWay``)
and is left for later too, up to GIVE_WAY_TRIES times a configuration: whatever keeps it long, a figure beside the
reward must not keep the reward's timings waiting.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections import Counter, deque
from typing import TYPE_CHECKING

from kbench_env.machine.device import Device
from kbench_env.pipeline.context import Prepared
from kbench_env.pipeline.trusted_hold import HoldNotHad, TrustedHold
from kbench_env.sandbox import idle_start
from kbench_env.sandbox.confine.proc_table import thread_states
from kbench_env.sandbox.placement import set_each_thread

if TYPE_CHECKING:
    from kbench_env.pipeline.baseline import Baselines
    from kbench_env.tasks.task import Config, Task

#: Seconds a configuration's timing waits for a device that no candidate holds or waits for, before the task is
#: left for its next candidate to want again.
IDLE_WAIT_S = 120.0
#: Tasks waiting in the queue at most (each later one is asked for again by its next candidate).
MAX_QUEUED = 4096
#: Seconds ``close`` waits for the thread once the worker it uses is closed.
CLOSE_JOIN_S = 10.0
#: Seconds between two tries of the device's shared hold, and the slices of the wait for an idle one: the waits
#: look at ``close`` in between.
POLL_S = 0.05


#: Configurations' diagnoses kept (``log``).
LOG_KEPT = 256


#: A compiled reference's exclusive hold of a GPU (seconds) past which its timing gives way once a candidate's work
#: waits for the device: the worker is killed (the hold let go) and the configuration left for a later candidate to
#: ask for again. A configuration's timing holds a GPU for a fraction of a second; a candidate's timing that waits
#: for a figure shown beside the reward waits on the reward's path.
GIVE_WAY_S = 5.0
#: Timings of one configuration given way, after which it is timed however long it holds the device (one whose
#: timing is that long by nature is timed all the same).
GIVE_WAY_TRIES = 2
#: A give-way's look at the worker's threads before it kills them: the seconds between its two reads (their CPU in
#: between), and how many of the busiest it keeps.
SNAPSHOT_GAP_S = 0.2
SNAPSHOT_THREADS = 8


#: The compile's niceness: below the builds' (builder/server.BUILD_NICE), whose builds are a step's critical path.
COMPILE_NICE = 19


def _renice(pid: int | None, value: int) -> None:
    """Every thread of process ``pid`` at niceness ``value`` (the threads and processes it starts after inherit it)."""
    set_each_thread(pid, lambda tid: os.setpriority(os.PRIO_PROCESS, tid, value))


def _set_up_steps(w) -> dict:
    """The worker's own account of the last timed block's set-up (gpu_executor's ``steps_ms`` and ``steps_usage``),
    where traced; ``steps_ms`` None where not."""
    for entry in reversed(getattr(w, "trace", None) or []):
        if isinstance(entry, dict) and "steps_ms" in entry:
            return {k: entry.get(k) for k in ("steps_ms", "steps_usage")}
    return {"steps_ms": None}


class _GaveWay(Exception):
    """A compiled reference's timing given way to a waiting candidate (``_GiveWay``)."""


def _threads_snapshot(pid: int | None, gap: float = SNAPSHOT_GAP_S) -> dict | None:
    """What process ``pid``'s threads were doing, read twice ``gap`` seconds apart (proc_table.thread_states): how
    many, their states, the kernel functions the others waited in (the commonest), and the busiest threads with
    their CPU ms over the gap, state, wait channel and system call. A timing that gives way sends no account of its
    own set-up (``steps_usage``): this says from outside whether it ran, waited in the driver or waited for a lock."""
    if pid is None:
        return None
    before = thread_states(pid)
    time.sleep(gap)
    after, tick_ms = thread_states(pid), 1e3 / os.sysconf("SC_CLK_TCK")
    rows = [{"tid": tid, "state": t["state"], "cpu_ms": round((t["ticks"] - before.get(tid, t)["ticks"]) * tick_ms),
             "wchan": t["wchan"], "syscall": t["syscall"]} for tid, t in after.items()]
    rows.sort(key=lambda r: -r["cpu_ms"])
    return {"gap_s": gap, "threads": len(rows), "states": dict(Counter(r["state"] for r in rows)),
            "waits": dict(Counter(r["wchan"] for r in rows if r["state"] != "R").most_common(6)),
            "busiest": rows[:SNAPSHOT_THREADS]}


class _GiveWay:
    """While a compiled reference holds the device alone: a thread that, once the hold has lasted ``after`` seconds
    and anyone waits for ``lock`` (``waited_for``), kills ``worker``'s processes (the timing in it fails, and the
    caller's ``finally`` lets the hold go and closes the worker, from its own thread). ``fired``: it did, ``fired_after``
    seconds after it started; ``stop`` (the timing over) keeps it from firing later; ``snapshot``: the worker's threads
    just before the kill (``_threads_snapshot``)."""

    def __init__(self, lock, worker, after: float):
        self.fired, self.fired_after, self.snapshot = False, None, None
        self._t0 = time.monotonic()
        self._done, self._mutex = threading.Event(), threading.Lock()
        self._thread = threading.Thread(target=self._watch, args=(lock, worker, after), daemon=True,
                                        name="kbench-compile-give-way")
        self._thread.start()

    def _watch(self, lock, worker, after: float) -> None:
        if self._done.wait(after):
            return
        while not self._done.wait(POLL_S):
            if lock.waited_for():
                with self._mutex:
                    if self._done.is_set():
                        return
                    self.fired, self.fired_after = True, round(time.monotonic() - self._t0, 3)
                self.snapshot = _threads_snapshot(getattr(getattr(worker, "proc", None), "pid", None))
                worker.kill()  # (the timing's thread, in the worker's recv, sees it end and closes it)
                return

    def stop(self) -> None:
        with self._mutex:
            self._done.set()
        self._thread.join(CLOSE_JOIN_S)


class _Unwatched:
    """A timing that is not watched (on the CPU, in ``time_now``, past GIVE_WAY_TRIES): it never gives way."""

    fired, fired_after, snapshot = False, None, None

    def stop(self) -> None:
        pass


class _Left(HoldNotHad):
    """The device did not come within its wait for an idle device, or the evaluator closed: the task is left for
    later (as a trusted hold not had: trusted_hold.HoldNotHad)."""


class CompileLater:
    """The compiled reference's timings of ``base``'s evaluator (``times``, ``want``), made in one thread of their
    own under ``device_lock`` (a SharedDeviceLock: ``acquire_idle`` and trusted shared holds). ``timed``: the
    configurations timed here; ``failed``: tasks whose compiled reference failed (``errors``: the last messages);
    ``gave_way``: timings given way to a waiting candidate (GIVE_WAY_S)."""

    def __init__(self, base: Baselines, device_lock):
        self.base, self.lock = base, device_lock
        self._cond = threading.Condition()
        self._queue: deque = deque()
        self._queued: set = set()  # tasks queued or being timed
        self._known: dict = {}  # Baselines.key -> the compiled reference's median (ms)
        self._thread: threading.Thread | None = None
        self._worker = None  # the reference worker in use, for ``close`` to end
        self._timing = threading.Lock()  # one task at a time: the thread's, or ``time_now``'s caller's
        self._closed = False
        self._may_renice = idle_start.may_raise()  # (lowering a niceness is undone only with CAP_SYS_NICE)
        self._gated = Device.parse(base.device).is_cuda
        self.timed = self.failed = self.left = self.gave_way = 0
        self._tries: dict = {}  # Baselines.key -> its timings given way so far (GIVE_WAY_TRIES)
        self.errors: deque = deque(maxlen=8)
        #: per configuration timed: where its time went (the run's shared hold, the wait for an idle device, the
        #: exclusive hold, the timing's set-up and its steps in the worker, block size, method, blocks), a diagnosis
        self.log: deque = deque(maxlen=LOG_KEPT)

    def fields(self, task: Task, cfg: Config) -> dict:
        """The reference cache's fields of ``cfg``'s compiled time: the eager entry's, with a label of their own."""
        return {**self.base.disk_fields(task, cfg), "label": "compile"}

    def known(self, task: Task, cfg: Config) -> float | None:
        """The compiled reference's median on ``cfg`` if timed (here, or on disk once its drift check passed)."""
        key = self.base.key(task, cfg)
        ms = self._known.get(key)
        if ms is None and self.base.disk is not None:
            hit = self.base.disk.get(self.fields(task, cfg))
            if isinstance(hit, dict) and isinstance(hit.get("compile_ms"), (int, float)):
                ms = self._known[key] = float(hit["compile_ms"])
        return ms

    def times(self, task: Task, configs: list[Config]) -> dict:
        """``{config: {"compile_ms": ms}}`` for the configurations whose compiled time is known; the task is queued
        (``want``) where one is not."""
        out = {c.name: {"compile_ms": ms} for c in configs if (ms := self.known(task, c)) is not None}
        if len(out) < len(configs):
            self.want(task, configs)
        return out

    def want(self, task: Task, configs: list[Config]) -> None:
        """Queue the task's configurations whose compiled time is not known, unless it is queued already."""
        key = (task.name, task.source_hash)
        with self._cond:
            if self._closed or key in self._queued or len(self._queue) >= MAX_QUEUED:
                return
            self._queued.add(key)
            self._queue.append((task, list(configs)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name="kbench-compile-later")
                self._thread.start()
            self._cond.notify_all()

    def time_now(self, task: Task, configs: list[Config]) -> None:
        """Time the task's compiled reference in the caller's thread (``kbench baseline``: stored before the
        process ends), holding the device as the thread does; a failure raises."""
        try:
            self._time_task(task, configs)
        except HoldNotHad:
            raise RuntimeError(f"the device did not come idle within {IDLE_WAIT_S:.0f} s to time the compiled "
                               f"reference of {task.name}") from None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait(60.0)  # (told by ``want`` and ``close``)
                if self._closed:
                    return
                task, configs = self._queue.popleft()
            try:
                self._time_task(task, configs, give_way=True)
            except HoldNotHad:
                self.left += 1
            except _GaveWay:
                self.gave_way += 1
            except Exception as exc:  # noqa: BLE001 - a figure beside the reward: the next candidate asks again
                if not self._closed:  # (``close`` ends the worker under it)
                    self.failed += 1
                    self.errors.append(f"{task.name}: {type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._queued.discard((task.name, task.source_hash))

    def _time_task(self, task: Task, configs: list[Config], give_way: bool = False) -> None:
        """``give_way``: a GPU timing held longer than GIVE_WAY_S gives way to a waiting candidate (``_GaveWay``)."""
        with self._timing:  # (what the other one timed meanwhile is known: not timed again)
            self._time_locked(task, configs, give_way and self._gated)

    def _time_locked(self, task: Task, configs: list[Config], give_way: bool) -> None:
        todo = [(i, c) for i, c in enumerate(configs) if self.known(task, c) is None]
        if not todo:
            return
        own = {}  # the worker's pid and its own niceness, read as it starts

        def started(w) -> None:
            own["pid"] = pid = getattr(getattr(w, "proc", None), "pid", None)
            try:
                own["nice"] = os.getpriority(os.PRIO_PROCESS, pid) if pid is not None else 0
            except OSError:
                own["nice"] = 0
            self._lower(pid)  # its start (torch.compile's imports: compile_gate.warm) behind the builds

        w = self.base._loaded_worker(task, compile_warm=True, started=started)
        with self._cond:
            if self._closed:
                w.close()
                return
            self._worker = w
        pid, nice = own.get("pid"), own.get("nice", 0)
        if getattr(w, "trace", ()) is None:
            w.trace = []  # (the set-up's steps in the worker, for ``log``)
        try:
            seed = secrets.randbits(62)
            for i, cfg in todo:
                if self._closed:
                    return
                prepared = {cfg.name: Prepared.made(task, cfg, seed, i, self.base.device)}
                # Run under a shared hold of the trusted side's places (no task lock: nothing of the eager side's is
                # used). On a GPU the compile lets it go (worker/compile_gate.py); on the CPU it keeps it, so that no
                # candidate's timing runs beside a compile on the same cores. The worker runs at its own priority
                # exactly while it holds the device, and behind the builds while it does not: a hold kept by a
                # process that the builds starve of the cores keeps every candidate's timing waiting.
                hold = TrustedHold(self.lock, IDLE_WAIT_S, stopped=lambda: self._closed,
                                   on_acquire=lambda: self._raise(pid, nice), on_release=lambda: self._lower(pid))
                t0 = time.monotonic()
                hold.acquire()
                try:
                    self.base._run_reference(w, task, cfg, prepared, "compile", True, hold if self._gated else None)
                finally:
                    hold.release()
                t1 = time.monotonic()
                self._acquire_idle()
                self._raise(pid, nice)  # timed at the worker's own priority, as every reference and candidate
                t2, detail = time.monotonic(), {}
                if isinstance(getattr(w, "trace", None), list):
                    w.trace.clear()
                key = self.base.key(task, cfg)
                watch = (_GiveWay(self.lock, w, GIVE_WAY_S)
                         if give_way and self._tries.get(key, 0) < GIVE_WAY_TRIES else _Unwatched())
                try:
                    got = self.base._time_reference(w, task, cfg, prepared, {f"{cfg.name}#compile"},
                                                    labels=[("compile", True)], detail=detail)
                except Exception:
                    if watch.fired:
                        self._tries[key] = self._tries.get(key, 0) + 1
                        raise _GaveWay() from None
                    raise
                finally:
                    watch.stop()
                    self.lock.release()
                    self._lower(pid)
                    self.log.append({"task": task.name, "config": cfg.name, "run_s": round(t1 - t0, 3),
                                     "idle_wait_s": round(t2 - t1, 3), "hold_s": round(time.monotonic() - t2, 3),
                                     **detail.get("compile", {}), **_set_up_steps(w),
                                     "gave_way": watch.fired, "gave_way_after_s": watch.fired_after,
                                     "gave_way_threads": watch.snapshot,
                                     "at": time.monotonic()})
                self._known[key] = got["compile_ms"]
                if self.base.disk is not None:
                    self.base.disk.put(self.fields(task, cfg), {"compile_ms": got["compile_ms"]})
                self.timed += 1
                if watch.fired:  # (killed as the timing ended: the rest left for later)
                    raise _GaveWay()
        finally:
            with self._cond:
                self._worker = None
            w.close()

    def _lower(self, pid: int | None) -> None:
        """The worker behind the builds (COMPILE_NICE), where this process may raise it again."""
        if self._may_renice:
            _renice(pid, COMPILE_NICE)

    def _raise(self, pid: int | None, nice: int) -> None:
        """The worker back at its own niceness (where it was lowered)."""
        if self._may_renice:
            _renice(pid, nice)

    def _acquire_idle(self) -> None:
        """The device alone, taken only while no candidate holds or waits for it (``acquire_idle``, in slices of
        POLL_S that look at ``close``), within IDLE_WAIT_S; else ``_Left``."""
        deadline = time.monotonic() + IDLE_WAIT_S
        while not self.lock.acquire_idle(POLL_S):
            if self._closed or time.monotonic() > deadline:
                raise _Left()

    def close(self) -> None:
        """Stop: the queue dropped, the worker in use closed, the thread waited for (at most CLOSE_JOIN_S)."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            w = self._worker
            self._cond.notify_all()
        if w is not None:
            w.close()
        if self._thread is not None:
            self._thread.join(CLOSE_JOIN_S)

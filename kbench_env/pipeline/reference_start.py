"""A task's reference worker started while the candidate builds, for the reference's preparation and timing to take.

On a GPU under shared checks, ``Baselines.prepare`` runs a task's reference configurations inside the candidate's
shared hold of the device (device_hold.py), so that the exclusive hold only times. Starting the reference's worker
there too (a process, torch's import, the device's context: seconds, more on a host whose cores are building) would
keep one of the few shared places on the device and one of the slots between the checks and the timing while the
device has nothing of it to run. So it starts beside the build, as the candidate's own worker does (spare workers,
or ``live_worker``), and ``prepare`` or ``times`` takes it when it comes (``Baselines.start`` and ``_new_worker``).

Once it is up, the same thread runs the reference ahead (``Baselines.run_ahead``): the device's calibration, under
an exclusive hold, where nobody has measured it yet, and each configuration not timed (eager, and compiled:
torch.compile's compile is seconds of the host's time) under a shared hold of the trusted side's own places. On a
fresh machine the calibration and the compiles then run while the candidates build, rather than one after another
in the check slots once they are built, where a compile also kept the waiting timings out.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from typing import TYPE_CHECKING

from kbench_env.pipeline.context import Prepared
from kbench_env.pipeline.reference_cache import ReferenceCache
from kbench_env.pipeline.trusted_hold import HoldNotHad, TrustedHold

if TYPE_CHECKING:
    from kbench_env.sandbox.worker_process import Worker
    from kbench_env.tasks.task import Config, Task

#: Seconds past a start's own deadline (the worker's load timeout) that a taker waits for its thread at most.
JOIN_GRACE_S = 30.0
#: References prepared and waiting for their timings (each worker keeps its inputs, model and compiled graph on
#: the device) past which a run ahead waits: a fresh batch has one per task, all at once.
AHEAD_READY = 8
#: Whether a run ahead also times the reference once the device is idle (else the task's first timing does it);
#: bench/rl_batch.py's ``--no-time-ahead`` turns it off to compare.
TIMES_AHEAD = True


class Started:
    """One reference worker being started in a thread of its own by ``make`` (a loaded Worker, or an exception
    within ``timeout`` seconds), then given to ``then`` in that thread where one is given (the reference run ahead:
    ``Baselines.run_ahead``). ``take`` waits for the start (not for ``then``) and hands the worker over once;
    ``close`` closes it if nobody took it, now or when its start ends. ``then`` borrows the worker with
    ``take_now`` and hands it back with ``offer``, both under the task's lock that ``take``'s callers hold, so that
    a taker never waits for ``then``'s work."""

    def __init__(self, make, timeout: float, then=None):
        self.timeout = timeout
        self._lock = threading.Lock()
        self._worker = None
        self._dropped = False  # taken or closed: a worker that comes later is closed by the thread
        self._loaded = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(make, then), daemon=True,
                                        name="kbench-reference-start")
        self._thread.start()

    def _run(self, make, then) -> None:
        try:
            w = make()
        except Exception:  # noqa: BLE001 - the taker starts a worker of its own, which says what failed
            self._loaded.set()
            return
        kept = self.offer(w)
        self._loaded.set()
        if kept and then is not None:
            try:
                then(self)
            except Exception:  # noqa: BLE001 - a run ahead that failed leaves the work to the timing, which reports
                pass

    def take(self):
        """The started worker (waiting for its start, at most its timeout and JOIN_GRACE_S), or None where it failed
        or is late: the caller then starts one itself."""
        self._loaded.wait(self.timeout + JOIN_GRACE_S)
        with self._lock:
            w, self._worker, self._dropped = self._worker, None, True
        return w

    def take_now(self):
        """The worker if it is here now (not taken, not closed), lent to the caller, who gives it to ``offer`` or
        keeps it; else None."""
        with self._lock:
            w, self._worker = (None, self._worker) if self._dropped else (self._worker, None)
        return w

    def offer(self, w) -> bool:
        """Put ``w`` (started, or lent by ``take_now``) here for a taker; closed instead if this start was taken or
        closed meanwhile. Whether it was kept."""
        with self._lock:
            if not self._dropped:
                self._worker = w
                return True
        w.close()
        return False

    @property
    def dropped(self) -> bool:
        """Taken or closed: a run ahead has nothing left to do."""
        return self._dropped

    def close(self) -> None:
        """Close the worker if it was started and not taken (or have the thread close it when it comes)."""
        with self._lock:
            w, self._worker, self._dropped = self._worker, None, True
        if w is not None:
            w.close()

    def join(self, timeout: float) -> None:
        """Wait for the thread (the start and ``then``), at most ``timeout`` seconds."""
        self._thread.join(timeout)


class StartsAhead:
    """Baselines' reference workers started beside the build, and their runs ahead (a mixin of Baselines, whose
    state it shares: ``_starts``, ``_ready``, the task locks, the calibration)."""

    def start(self, task: Task, configs: list[Config], device_lock=None) -> Started | None:
        """Start the task's reference worker now, beside the candidate's build (reference_start.py), where the
        preparation or the timing will want one: a configuration not timed (before the calibration, which checks
        the disk cache: not stored there as far as its files say), none prepared or being started, and nobody
        timing the task. With ``device_lock`` (the evaluator's SharedDeviceLock), on a GPU (``runs_ahead``),
        the worker also runs the reference ahead (``run_ahead``). The Started, to give ``end_start`` at the
        evaluation's end, or None."""
        lock = self._task_lock(task)
        if not lock.acquire(blocking=False):
            return None
        try:
            key = (task.name, task.source_hash)
            if key in self._ready or key in self._starts or key in self._running or not self._unknown(task, configs):
                return None
            ahead = device_lock is not None and self.runs_ahead
            then = (lambda s: self.run_ahead(task, configs, device_lock, s)) if ahead else None
            started = self._starts[key] = Started(lambda: self._loaded_worker(task), self.limits.build_timeout, then)
            return started
        finally:
            lock.release()

    def run_ahead(self, task: Task, configs: list[Config], device_lock, started: Started) -> None:
        """What ``prepare`` and ``times`` do, done by ``started``'s thread once its worker is up, before any
        candidate of the task is checked: each configuration not timed (before the device's calibration: not
        stored on disk, as far as its files say) run in the worker, on inputs drawn here, under a shared hold of the
        trusted side's places (shared_device_lock.py), then timed under an exclusive hold taken once no candidate's
        stage holds or waits for the device (``acquire_idle``, before other runs ahead), the device calibrated
        first where nobody has (the disk cache's drift check, in ``_times_locked``). Calibrated after the runs, not
        before: its measurements hold the device alone for seconds, and every run ahead's compile (the host's work,
        nothing held) would wait for them.
        Whatever a candidate's preparation or timing has taken first (the worker, or the task's lock) is theirs:
        this does nothing more. Locks in the stages' order: the device's, then the task's; a compile lets both go
        while inductor compiles (pipeline/trusted_hold.py), and a timing of the task that comes meanwhile waits for it
        (``wait_run_ahead``)."""
        key = (task.name, task.source_hash)
        self.ahead_times["up"].append(time.monotonic())
        if self.calibration is None:
            self._calibrate_once(None, task, configs)  # this process's known GPU calibration, if any
        if not self._ready_place(started):
            return
        hold, running = TrustedHold(device_lock, self.limits.build_timeout, task_lock=self._task_lock(task)), False
        try:  # (not had within the wait: the candidates' stages run and time the reference themselves)
            hold.acquire()
        except HoldNotHad:
            return
        try:
            todo = self._missing(task, configs) if self._unknown(task, configs) else []
            if not todo or key in self._ready or key in self._running or self._starts.get(key) is not started:
                return
            w = started.take_now()
            if w is None:
                return
            del self._starts[key]
            self._running.add(key)  # while its locks are let go for a compile: ``prepare`` leaves the task to it
            running = True
            seed = secrets.randbits(62)
            try:  # the configurations to run only, each with its own place's seeds
                run = {c.name for c in todo}
                prepared = {c.name: Prepared.made(task, c, seed, i, self.device)
                            for i, c in enumerate(configs) if c.name in run}
                ran = self._run_all(w, task, todo, prepared, hold)
                hold.acquire()  # (held again once a compile's graph runs; this only makes sure)
            except Exception:  # noqa: BLE001 - left to ``times``, which reports it
                w.close()
                return
            with self._lock:
                # a timing of the task's that came while the locks were let go timed the reference itself
                if self._closed or key in self._ready or not self._missing(task, configs):
                    w.close()
                    return
                self._ready[key] = (w, ran, prepared)
                self.ran_ahead += 1
                self.ahead_times["ran"].append(time.monotonic())
        finally:
            if running:
                with self._ready_cond:
                    self._running.discard(key)
                    self._ready_cond.notify_all()  # a timing waiting for it (``wait_run_ahead``)
            hold.release()
        if not TIMES_AHEAD:
            return
        # Timed too, once no candidate's stage holds or waits for the device: a waiting timing or check goes first
        # (the candidate's timing times the reference itself if it comes before that). Other runs ahead's shared
        # holds wait for it (their runs; their compiles hold nothing): while candidates build, the device is never
        # idle between them, so waiting for idle would leave the timing to the candidate, on its critical path.
        if not device_lock.acquire_idle(self.limits.build_timeout, before_trusted=True):
            return
        try:
            with self._task_lock(task):
                ready = self._ready.get(key)
                if ready is not None and ready[0] is w:  # not taken by a candidate's timing meanwhile
                    self._times_locked(task, configs, prepared)
                    self.timed_ahead += 1
                    self.ahead_times["timed"].append(time.monotonic())
        finally:
            device_lock.release()

    def wait_run_ahead(self, task: Task, timeout: float) -> None:
        """Wait, holding nothing, while the task's reference is being run ahead (from ``run_ahead`` taking its
        worker until the runs are done and left for the timing), at most ``timeout`` seconds: a candidate's timing
        that came meanwhile would run and compile the reference again, under its exclusive hold of the device."""
        key = (task.name, task.source_hash)
        deadline = time.monotonic() + timeout
        with self._ready_cond:
            while key in self._running and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._ready_cond.wait(min(1.0, left))

    def _ready_place(self, started: Started) -> bool:
        """Wait (at most the worker's load timeout) until fewer than AHEAD_READY references prepared by a run
        ahead or a check wait for their timings, each with its device memory; False if ``started`` was taken or
        closed meanwhile, or no place came."""
        def free() -> bool:
            return self._closed or started.dropped or len(self._ready) < AHEAD_READY

        deadline = time.monotonic() + self.limits.build_timeout
        with self._ready_cond:
            while not free() and time.monotonic() < deadline:
                self._ready_cond.wait(min(1.0, max(0.0, deadline - time.monotonic())))  # a drop is not told
            return len(self._ready) < AHEAD_READY and not (self._closed or started.dropped)

    def _unknown(self, task: Task, configs: list[Config]) -> bool:
        """Whether a configuration's reference will be timed here: ``_missing``'s once the calibration is known,
        before it whether one is not stored on disk in its calibration's epoch (ReferenceCache.stored)."""
        if self.calibration is not None:
            return bool(self._missing(task, configs))
        missing = [c for c in configs if self.key(task, c) not in self.times_by_key]
        if not missing or self.disk_root is None:
            return bool(missing)
        if self._peek is None:
            self._peek = ReferenceCache.for_device(self.disk_root, self.device, self.backend_name)
        return not self._peek.stored([self.disk_fields(task, c) for c in missing])

    def end_start(self, task: Task, started: Started) -> None:
        """At the end of the evaluation that made ``started``: closed if neither a preparation nor a timing took it
        (its candidate failed before them), so no idle worker keeps its share of the device."""
        with self._task_lock(task):
            key = (task.name, task.source_hash)
            if self._starts.get(key) is not started:
                return
            del self._starts[key]
        started.close()

    @contextlib.contextmanager
    def started_beside(self, task: Task, configs: list[Config], wanted: bool, device_lock=None):
        """Around an evaluation's stages: ``start`` where ``wanted`` (running ahead under ``device_lock`` where
        given), ``end_start`` at their end (the preparation or the timing has taken the worker, or the candidate
        ended before them)."""
        started = self.start(task, configs, device_lock) if wanted else None
        try:
            yield
        finally:
            if started is not None:
                self.end_start(task, started)

    def _new_worker(self, task: Task) -> Worker:
        """The task's reference worker: the one ``start`` started if there is one and it came up, else a new one
        (under the task's lock)."""
        started = self._starts.pop((task.name, task.source_hash), None)
        w = started.take() if started is not None else None
        return w if w is not None else self._loaded_worker(task)

"""The reference side: the reference program timed (eager, and under torch.compile when asked) in a worker of its
own under the candidate's conditions, its wall-clock re-timing, and the device's measured capacity (bandwidth,
FLOP rates, CUDA graph-node gap) that plausibility's floors use; all cached per evaluator, and the reference
timings also on disk when the evaluator has a reference cache (reference_cache.py: reused across processes and
runs, checked against this evaluator's device calibration before use). The torch.compile reference is timed with
the eager one, or, given a device lock to time it under (``compile_later``), off the candidates' path
(compile_later.py)."""

from __future__ import annotations

import contextlib
import threading
from collections import deque

from kbench_env.machine.device import Device
from kbench_env.pipeline.blocks import time_blocks
from kbench_env.pipeline.compile_later import CompileLater
from kbench_env.pipeline.gpu_blocks import time_gpu
from kbench_env.pipeline.reference_cache import ReferenceCache, best_calibration
from kbench_env.pipeline.reference_pace import ReferencePace
from kbench_env.pipeline.reference_start import StartsAhead
from kbench_env.pipeline.timing import wallclock
from kbench_env.protocol import messages as msg
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.input_draws import input_draws
from kbench_env.tasks.task import Config, Task

#: A GPU's measured capacity (bandwidth, FLOP rates, graph-node gap), kept for this process's later evaluators of
#: the same device and backend: measuring it takes seconds on a GPU, and a GPU's capacity, unlike a loaded CPU's,
#: does not change with what else the machine is doing.
GPU_CALIBRATIONS: dict = {}


class Baselines(StartsAhead):
    """One evaluator's reference timings (per task source and configuration), the device calibration and the
    figures the roofline floors are made of (``floors``: output bytes and FLOPs, plausibility's cache). ``timing``
    is the evaluator's timing parameters, which the calibration completes with the CUDA graph-node gap.
    ``disk_root``: the reference cache's folder (reference_cache.py), or None to keep timings in memory only.
    ``compile_later``: with ``compile_baseline``, the evaluator's SharedDeviceLock, under which the compiled
    reference is timed apart (``later``: compile_later.py); the eager timings are then stored as without it."""

    def __init__(self, device: str, backend_name: str, build_root: str, limits: Limits, timing: dict,
                 compile_baseline: bool, noise: float, disk_root=None, compile_later=None):
        self.device, self.backend_name, self.build_root, self.limits = device, backend_name, build_root, limits
        self.timing, self.compile_baseline, self.noise = timing, compile_baseline, noise
        self.later = CompileLater(self, compile_later) if compile_baseline and compile_later is not None else None
        self.times_by_key: dict = {}
        self.floors: dict = {}
        self.calibration: dict | None = None
        self._lock = threading.Lock()  # guards _task_locks; one lock per task keeps each reference timed once
        self._task_locks: dict = {}
        self.cal_lock = threading.Lock()
        # The settings a stored timing must have been made with (the measured graph gap, added to ``timing`` by the
        # calibration, is the drift check's to compare, not the key's).
        self.settings = {"timing": dict(timing), "noise": noise, "compile_baseline": self._compiles_with_eager(),
                         "threads": limits.threads}
        self.disk_root, self.disk = disk_root, None
        self.timed = 0  # configurations timed here (not found in memory or on disk)
        # task -> (reference worker, the runs it has done, the inputs it ran): ``prepare``'s, waiting for ``times``
        self._ready: dict = {}
        self._ready_cond = threading.Condition(self._lock)  # told when ``_ready`` shrinks (run_ahead waits on it)
        self._running: set = set()  # tasks a run ahead runs the reference of (``run_ahead``)
        self._starts: dict = {}  # task -> its reference worker being started (``start``), for the first to take
        self._peek: ReferenceCache | None = None  # the disk cache read before the calibration (``_unknown``)
        self.recalibrations = 0  # calibrations the drift check measured again
        self.pace = ReferencePace()  # the reference's recent per-call times in CPU pairings (reference_pace.py)
        self.invalidated = False  # the drift check dropped the cache's entries
        self.ran_ahead = 0  # tasks whose reference ``run_ahead`` prepared
        self.timed_ahead = 0  # of them, timed there too
        # When (time.monotonic) each run ahead's worker was up, its runs were done, its timing was done: whether the
        # references were ready before their candidates' builds ended
        self.ahead_times = {"up": deque(maxlen=4096), "ran": deque(maxlen=4096), "timed": deque(maxlen=4096)}
        # A GPU's only: on the CPU the calibration and the compiles would run on the cores the builds take
        self.runs_ahead = Device.parse(device).is_cuda
        self._closed = False

    def _task_lock(self, task: Task) -> threading.Lock:
        """The lock that keeps a task's reference timed once (``times``, ``prepare`` and ``known`` take it)."""
        with self._lock:
            return self._task_locks.setdefault((task.name, task.source_hash), threading.Lock())

    def key(self, task: Task, cfg: Config) -> tuple:
        return (task.name, task.source_hash, cfg.name, self.device, self.backend_name)

    def worker(self, task: Task, compile_warm: bool = False) -> Worker:
        """A worker running the reference as the candidate (no audit: the reference may use anything);
        ``compile_warm``: one that will compile it (torch.compile's modules imported as it starts)."""
        return Worker(task.source + "\n\nModelNew = Model\n", self.backend_name, self.device, self.build_root,
                      self.limits, audit=False, compile_warm=compile_warm)

    def _loaded_worker(self, task: Task, compile_warm: bool = False, started=None) -> Worker:
        """A reference worker with the reference loaded (closed if the load fails); ``started(worker)`` is called
        once it is started, before its load is waited for."""
        w = self.worker(task, compile_warm)
        try:
            if started is not None:
                started(w)
            expect(w.recv(self.limits.build_timeout, "reference load"), task)
        except BaseException:
            w.close()
            raise
        return w

    def times(self, task: Task, configs: list[Config], prepared: dict) -> dict:
        """Time the reference (eager, and compiled if asked) in a worker of its own, under the candidate's
        conditions; cached per configuration. Also measures the device's roofline once."""
        with self._task_lock(task):
            out = self._times_locked(task, configs, prepared)
        if self.later is None:
            return out
        compiled = self.later.times(task, configs)
        return {name: {**t, **compiled.get(name, {})} for name, t in out.items()}

    def compile_times(self, task: Task, configs: list[Config], prepared: dict) -> dict:
        """The compiled reference's times alone (a CPU pairing times the eager one itself): those known so far
        when it is timed later, else ``times``'s."""
        return self.later.times(task, configs) if self.later is not None else self.times(task, configs, prepared)

    def known(self, task: Task, configs: list[Config]) -> dict | None:
        """The reference's timings of every configuration if they are all known already (in memory, or on disk
        once the drift check has passed), else None; None too while the task's reference is being timed (no wait:
        the caller goes on without them)."""
        lock = self._task_lock(task)
        if not lock.acquire(blocking=False):
            return None
        try:
            if self.calibration is None or self._missing(task, configs):
                return None
            return {c.name: self.times_by_key[self.key(task, c)] for c in configs}
        finally:
            lock.release()

    def prepare(self, task: Task, configs: list[Config], prepared: dict) -> None:
        """What ``times`` would do before it times, done ahead (under a shared hold of the device: device_hold.py):
        take the reference's worker (``start``'s, or started now) and run each configuration whose reference is not
        timed yet (eager, and compiled: torch.compile's compile, seconds, is here), so that the device's exclusive
        hold only times.
        The worker waits for ``times`` (of this or another candidate of the task), which times with the inputs it
        ran. Nothing to do, or a failure: ``times`` does it all (and reports what failed)."""
        key = (task.name, task.source_hash)
        with self._task_lock(task):
            if self.calibration is None:
                self._calibrate_once(None, task, configs)  # this process's known GPU calibration, if any
            if self.calibration is None and self.disk_root is not None:
                return  # the disk cache is not checked yet (that needs the exclusive hold): it may hold them all
            todo = self._missing(task, configs)
            if not todo or key in self._ready or key in self._running:  # (a run ahead's: the timing's if need be)
                return
            w = None
            try:
                w = self._new_worker(task)
                ran = self._run_all(w, task, todo, prepared)
            except Exception:  # noqa: BLE001 - left to ``times``, which reports it
                if w is not None:
                    w.close()
                return
            self._ready[key] = (w, ran, prepared)

    def _times_locked(self, task: Task, configs: list[Config], prepared: dict) -> dict:
        if self.calibration is None:
            self._calibrate_once(None, task, configs)  # this process's known GPU calibration, if any
        todo = self._missing(task, configs)
        w, ran, ran_with = self._ready.pop((task.name, task.source_hash), None) or (None, set(), None)
        if w is not None:
            with self._ready_cond:
                self._ready_cond.notify_all()
        try:
            if todo or self.calibration is None:
                if w is None:
                    w = self._new_worker(task)
                self._calibrate_once(w, task, configs)
                for cfg in self._missing(task, todo):
                    names = {f"{cfg.name}#{label}" for label, _ in self._labels()}
                    times = self._time_reference(w, task, cfg, ran_with if names <= ran else prepared, ran)
                    self.times_by_key[self.key(task, cfg)] = times
                    self.timed += 1
                    self._store(task, cfg)
        finally:
            if w is not None:
                w.close()
        return {c.name: self.times_by_key[self.key(task, c)] for c in configs}

    def close(self) -> None:
        """Close the reference workers that ``prepare`` left waiting (their candidates ended before timing), and
        those started and not taken."""
        with self._lock:
            self._closed = True
            ready, self._ready = list(self._ready.values()), {}
            starts, self._starts = list(self._starts.values()), {}
            self._ready_cond.notify_all()
        for w, _, _ in ready:
            w.close()
        for started in starts:
            started.close()
        if self.later is not None:
            self.later.close()

    @contextlib.contextmanager
    def session(self, task: Task, configs: list[Config]):
        """A reference worker for paired timing on the CPU (paired.py), with the reference loaded and the device
        calibrated once per evaluator; ``prepare_paired`` runs a configuration in it before its blocks."""
        with self.worker(task) as w:
            expect(w.recv(self.limits.build_timeout, "reference load"), task)
            if self.calibration is None:
                self._calibrate_once(w, task, configs)
            yield w

    def prepare_paired(self, w: Worker, task: Task, cfg: Config, prepared: dict) -> str:
        """Run configuration ``cfg`` (eager) once in reference worker ``w``; the name its blocks go by."""
        p = prepared[cfg.name]
        name = f"{cfg.name}#eager"
        w.send({"type": msg.RUN, "config": name, "dtype": cfg.dtype, "init_seed": p.init_seed, "compile": False,
                "backward": task.backward, "reply": "none"}, {"init_inputs": p.init_inputs, "inputs": p.inputs})
        expect(w.recv(self.limits.run_timeout, "reference run (eager)"), task)
        return name

    def disk_fields(self, task: Task, cfg: Config) -> dict:
        """What a stored timing of ``cfg`` is keyed by besides the machine (reference_cache.py)."""
        try:
            shapes = task.input_shapes(cfg)
        except Exception:  # a get_inputs the meta device cannot run: sizes and source still pin the shapes
            shapes = None
        return {"task": task.name, "source": task.source_hash, "config": cfg.name, "sizes": cfg.sizes,
                "dtype": cfg.dtype, "shapes": shapes, "backward": task.backward, "settings": self.settings}

    def _missing(self, task: Task, configs: list[Config]) -> list[Config]:
        """The configurations with no timing in memory, nor on disk once the drift check has passed."""
        out = []
        for c in configs:
            k = self.key(task, c)
            if k not in self.times_by_key and self.disk is not None:
                hit = self.disk.get(self.disk_fields(task, c))
                if hit is not None:
                    self.times_by_key[k] = hit
            if k not in self.times_by_key:
                out.append(c)
        return out

    def _store(self, task: Task, cfg: Config) -> None:
        if self.disk is not None:
            self.disk.put(self.disk_fields(task, cfg), self.times_by_key[self.key(task, cfg)])

    def _calibrate_once(self, w: Worker | None, task: Task, configs: list[Config]) -> None:
        """Measure the device in reference worker ``w``, once per evaluator, whichever task comes first (without a
        worker: only take this process's calibration of the GPU, if there is one). The first calibration is the
        disk cache's drift check."""
        with self.cal_lock:
            if self.calibration is None:
                key = (self.device, self.backend_name)
                cal = GPU_CALIBRATIONS.get(key)
                if cal is None and w is None:
                    return
                dtypes = sorted({c.dtype for c in configs})

                def measure() -> dict:
                    w.send({"type": msg.CALIBRATE, "dtypes": dtypes})
                    return expect(w.recv(self.limits.time_timeout, "device calibration"), task)

                if cal is None:
                    cal = measure()
                    if Device.parse(self.device).is_cuda:
                        GPU_CALIBRATIONS[key] = cal
                if self.disk_root is not None:
                    self.disk = ReferenceCache.for_device(self.disk_root, self.device, self.backend_name)
                    # a drift is measured again before it invalidates (in this reference worker, when there is one)
                    self.disk.check(cal, remeasure=measure if w is not None else None)
                    self.recalibrations += len(self.disk.measurements) - 1
                    self.invalidated = self.invalidated or bool(self.disk.drift)
                    if len(self.disk.measurements) > 1:  # what was judged: later evaluators here reuse it
                        cal = best_calibration(self.disk.measurements)
                        if key in GPU_CALIBRATIONS:
                            GPU_CALIBRATIONS[key] = cal
                self.calibration = cal

    def _compiles_with_eager(self) -> bool:
        return self.compile_baseline and self.later is None

    def _labels(self) -> list[tuple[str, bool]]:
        return [("eager", False)] + ([("compile", True)] if self._compiles_with_eager() else [])

    def _run_all(self, w: Worker, task: Task, todo: list[Config], prepared: dict, hold=None) -> set:
        """Every label of every configuration in ``todo`` run in ``w`` (``_run_reference``): the names run."""
        ran = set()
        for cfg in todo:
            for label, compiled in self._labels():
                self._run_reference(w, task, cfg, prepared, label, compiled, hold)
                ran.add(f"{cfg.name}#{label}")
        return ran

    def _run_reference(self, w: Worker, task: Task, cfg: Config, prepared: dict, label: str, compiled: bool,
                       hold=None) -> None:
        """The reference's run of ``cfg`` in ``w`` (its model made, and compiled when asked), before its timing.
        With ``hold`` (a trusted hold: pipeline/trusted_hold.py), a compile lets them go while
        inductor compiles and takes them again before the compiled graph runs (worker/compile_gate.py)."""
        p = prepared[cfg.name]
        gate = compiled and hold is not None
        w.send({"type": msg.RUN, "config": f"{cfg.name}#{label}", "dtype": cfg.dtype, "init_seed": p.init_seed,
                "compile": compiled, "gate": gate, "backward": task.backward, "reply": "none"},
               {"init_inputs": p.init_inputs, "inputs": p.inputs})
        what, timeout = f"reference run ({label})", self.limits.run_timeout + (300 if compiled else 0)
        reply = w.recv(timeout, what)
        while gate and reply[0].get("type") == msg.READY:
            if reply[0].get("phase") == msg.COMPILING:
                hold.release()
            else:
                hold.acquire()
                w.send({"type": msg.GO})
            reply = w.recv(timeout, what)
        expect(reply, task)

    def _time_reference(self, w: Worker, task: Task, cfg: Config, prepared: dict, ran: set, labels=None,
                        detail: dict | None = None) -> dict:
        """Time ``cfg``'s reference in ``w`` (run first unless ``ran`` names it: ``prepare`` ran it), each of
        ``labels`` (default: ``_labels``). ``detail``: filled per label with how a GPU timing went (its set-up's
        seconds, block size, method, blocks), a diagnosis kept apart from the cached figures."""
        inputs = prepared[cfg.name].inputs
        out = {}
        for label, compiled in labels or self._labels():
            name = f"{cfg.name}#{label}"
            if name not in ran:
                self._run_reference(w, task, cfg, prepared, label, compiled)
            if Device.parse(self.device).is_cpu:  # this side's clock, as the candidate's (blocks.py)
                t = time_blocks(w, name, inputs, self.noise, self.timing, self.limits.time_timeout,
                                draws=input_draws(task, cfg)).timing
                h = {"median_ms": t.median_ms, "iqr_ms": t.iqr_ms}
            else:  # device events, as the candidate's; its figures bound the candidate's (gpu_blocks.py)
                g = time_gpu(w, name, inputs, self.noise, self.timing, self.limits.time_timeout, self.device,
                             backward=task.backward, draws=input_draws(task, cfg))
                h = {"median_ms": g.timing.median_ms, "iqr_ms": g.timing.iqr_ms, "gpu": g.reference_figures()}
                if detail is not None:
                    detail[label] = {"set_up_s": round(g.set_up_seconds, 3), "block": g.block, "method": g.method,
                                     "blocks": len(g.walls_ms)}
            if compiled:
                out["compile_ms"] = h["median_ms"]
            else:
                out.update(h)
        return out

    def wallclock(self, task: Task, cfg: Config, prepared: dict, seed: int) -> float:
        """The reference's per-call wall-clock time on configuration ``cfg`` (timing.wallclock), cached."""
        cached = self.times_by_key[self.key(task, cfg)].get("wall_ms")
        if cached is not None:
            return cached
        p = prepared[cfg.name]
        with self.worker(task) as w:
            expect(w.recv(self.limits.build_timeout, "reference load"), task)
            w.send({"type": msg.RUN, "config": cfg.name, "dtype": cfg.dtype, "init_seed": p.init_seed,
                    "backward": task.backward, "reply": "none"}, {"init_inputs": p.init_inputs, "inputs": p.inputs})
            expect(w.recv(self.limits.run_timeout, "reference run"), task)
            wall = wallclock(w, cfg.name, p.inputs, seed, self.noise, self.limits.time_timeout)
        self.times_by_key[self.key(task, cfg)]["wall_ms"] = wall
        self._store(task, cfg)
        return wall

    def recalibrate(self, task: Task, configs: list[Config]) -> None:
        """Measure the device again (in a reference worker) and keep, per figure, the best rate measured so far:
        load can only make a measured rate lower than the device's, so the highest is the closest to it (the
        floors are made from the calibration of the moment: plausibility.floor)."""
        with self.worker(task) as w:
            expect(w.recv(self.limits.build_timeout, "reference load"), task)
            w.send({"type": msg.CALIBRATE, "dtypes": sorted({c.dtype for c in configs})})
            fresh = expect(w.recv(self.limits.time_timeout, "device calibration"), task)
        with self.cal_lock:
            cal = dict(self.calibration)
            cal["bandwidth"] = max(cal["bandwidth"], fresh["bandwidth"])
            cal["flops"] = {k: max(v, fresh["flops"].get(k, 0.0)) for k, v in cal["flops"].items()}
            cal["flops"].update({k: v for k, v in fresh["flops"].items() if k not in cal["flops"]})
            self.calibration = cal
            key = (self.device, self.backend_name)
            if key in GPU_CALIBRATIONS:
                GPU_CALIBRATIONS[key] = cal


def expect(reply, task: Task) -> dict:
    """The header of a reference worker's reply; an error reply raises (the reference must not fail)."""
    header, _ = reply
    if header["type"] == msg.ERROR:
        raise RuntimeError(f"the reference of {task.name} failed ({header['stage']}): {header['message']}")
    return header

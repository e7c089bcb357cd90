"""The Evaluator: the one component that turns (task, candidate source, device) into an EvalResult.

Stages: screen (parent, milliseconds) -> build and load (sandboxed worker) -> run every configuration on fresh
random inputs (worker) and compare with the reference (parent), with a runtime audit of what forward executed ->
time candidate and reference under the same conditions, every timed call on fresh inputs with its output checked
-> plausibility checks (roofline floor, independent re-timing of large speedups) -> reward. Everything else (env,
agents, training, CLI) calls this; nothing else compiles, runs or times candidate code. It never raises for
anything a candidate does: every failure is a result.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import secrets
import time
import asyncio
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import torch

from kbench_env.pipeline import integrity
from kbench_env.pipeline import screen as screen_mod
from kbench_env.backends import get_backend
from kbench_env.pipeline.compare import compare_outputs
from kbench_env.devicelock import DeviceLock, gpu_lock_path
from kbench_env.pipeline.result import ConfigResult, EvalResult
from kbench_env.pipeline.reward import get_reward_fn
from kbench_env.sandbox.policy import Limits
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.spares import SpareWorkers
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.task import DTYPES, Config, Task, describe_value, geomean
from kbench_env.pipeline.timed_checks import TimedChecks as _TimedChecks

#: Kernel-name prefixes of PyTorch's own GPU kernels (not the candidate's) for the decoy check.
TORCH_KERNEL_PREFIXES = ("void at::", "at::", "void (anonymous namespace)::", "Memcpy", "Memset", "cudnn", "sm80_",
                         "sm90_", "cutlass", "ampere_", "volta_", "turing_", "gemv", "gemm", "void cublas",
                         "cublas", "void gemv", "nvjet")


#: Outputs smaller than this never get a bandwidth floor (they can live in cache).
ROOFLINE_MIN_BYTES = 256 << 20


#: A GPU's measured capacity (bandwidth, FLOP rates, graph-node gap), kept for this process's later evaluators of
#: the same device and backend: measuring it takes seconds on a GPU, and a GPU's capacity, unlike a loaded CPU's,
#: does not change with what else the machine is doing.
_GPU_CALIBRATIONS: dict = {}


class _ParentThreads:
    """torch's intra-op thread count in this process, lowered while an evaluation holds a CPU device and restored
    after. torch keeps the count per thread (OpenMP's) and as the default of threads to come: each holder restores
    its own thread's count, and the last one out the count found by the first one in, so overlapping holders (two
    Evaluators' evaluations in threads) leave the process as it was."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._before = 0

    @contextlib.contextmanager
    def lowered(self, n: int):
        with self._lock:
            if self._holders == 0:
                self._before = torch.get_num_threads()
            self._holders += 1
            own = torch.get_num_threads()
            torch.set_num_threads(max(1, min(n, own)))
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                torch.set_num_threads(own if self._holders else self._before)


_PARENT_THREADS = _ParentThreads()


def default_cache_dir() -> Path:
    return Path(os.environ.get("KBENCH_CACHE") or Path.home() / ".cache" / "kbench")


def resolve_device(device: str = "auto") -> str:
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _seeds(seed: int, index: int) -> tuple[int, int]:
    """(input seed, init seed) of stream ``index`` for an evaluation seed."""
    h = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(h[:4], "little"), int.from_bytes(h[4:8], "little")


class Evaluator:
    """Evaluates candidates for tasks on one device with one backend.

    Args:
        device: "auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:1".
        backend: kernel language; default "cpu" on the CPU and "cuda" on a GPU.
        reward: a preset name from reward.PRESETS or a callable over the EvalResult.
        baseline: "eager" or "compile": the reference the reward's speedup is measured against.
        limits: sandbox limits and per-stage timeouts (sandbox.Limits).
        cache_dir: where builds are kept (default $KBENCH_CACHE or ~/.cache/kbench); shared by all workers.
        input_sets: input sets the timed calls are derived from (perturbed copies of the checked inputs, made in
            the worker; each call gets a further perturbed fresh copy).
        noise: relative size of the per-call perturbation of the timed inputs.
        check_calls: how many timed calls, chosen at random afterwards, have their outputs checked (the first and
            the last timed call always are).
        timing: keyword arguments for timing.time_calls (warmup, min_reps, max_reps, min_seconds).
        time_candidates: set False to skip timing (correctness only; speedup stays None).
        compile_baseline: also time the reference under torch.compile (default: on for GPUs, off on the CPU;
            the environment variable KBENCH_COMPILE_BASELINE=0 or 1 sets the default).
        reverify_above: speedups above this are re-timed by an independent method (wall clock from this process).
        roofline: flag times below the device's measured bandwidth / FLOP-rate floor.
        build_workers: candidates in flight at once in ``evaluate_many`` (builds overlap; the device is shared
            one candidate at a time). Default: the number of CPU cores.
        spare_worker: keep one started, confined, idle worker ready for the next candidate (sandbox.SpareWorkers;
            on a GPU it has CUDA started). Off with False or KBENCH_SPARE_WORKER=0.
    """

    def __init__(self, device: str = "auto", backend: str | None = None, reward="tiered", baseline: str = "eager",
                 limits: Limits | None = None, cache_dir: str | Path | None = None, input_sets: int = 3,
                 noise: float = 1e-2, check_calls: int = 4, timing: dict | None = None,
                 time_candidates: bool = True, compile_baseline: bool | None = None, reverify_above: float = 10.0,
                 roofline: bool = True, build_workers: int | None = None, spare_worker: bool | None = None):
        self.device = resolve_device(device)
        self.backend_name = backend or ("cpu" if self.device.startswith("cpu") else "cuda")
        self.backend = get_backend(self.backend_name)
        self.reward_fn = get_reward_fn(reward)
        if baseline not in ("eager", "compile"):
            raise ValueError("baseline must be 'eager' or 'compile'")
        self.baseline = baseline
        self.limits = limits or Limits()
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.build_root = str((self.cache_dir / "builds" / self.backend_name).resolve())
        os.makedirs(self.build_root, exist_ok=True)
        self.input_sets = max(1, input_sets)
        self.noise = noise
        self.check_calls = check_calls
        self.timing = dict(timing or {})
        self.time_candidates = time_candidates
        if compile_baseline is None and os.environ.get("KBENCH_COMPILE_BASELINE", "") in ("0", "1"):
            compile_baseline = os.environ["KBENCH_COMPILE_BASELINE"] == "1"  # a run-wide switch, e.g. smoke runs
        self.compile_baseline = (not self.device.startswith("cpu")) if compile_baseline is None else compile_baseline
        if baseline == "compile":
            self.compile_baseline = True
        self.reverify_above = reverify_above
        self.roofline = roofline
        self.build_workers = build_workers or max(1, os.cpu_count() or 1)
        # Run and time one candidate at a time on this device: on a GPU across processes too (devicelock.py).
        if self.device.startswith("cuda"):
            self._device_lock = DeviceLock(lambda: gpu_lock_path(self.cache_dir / "locks", self.device))
        else:
            self._device_lock = threading.Lock()
        self._ref_lock = threading.Lock()  # guards _ref_locks; one lock per task keeps each reference timed once
        self._ref_locks: dict = {}
        self._cal_lock = threading.Lock()
        self._ref_times: dict = {}
        self._calibration: dict | None = None
        self._rng = random.Random()
        if spare_worker is None:
            spare_worker = os.environ.get("KBENCH_SPARE_WORKER", "1") != "0"
        self._spares = None
        if spare_worker:
            self._spares = SpareWorkers(self.backend_name, self.device, self.build_root, self.limits)
            weakref.finalize(self, self._spares.close)

    def close(self) -> None:
        """Stop the spare worker (it also leaves by itself after sandbox.SPARE_IDLE_S idle)."""
        if self._spares is not None:
            self._spares.close()

    def __deepcopy__(self, memo):
        """Copies of an env share its Evaluator (gymnasium deep-copies make() kwargs, e.g. in check_env)."""
        return self

    # ------------------------------------------------------------------ public API
    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        """Evaluate one action (source text or an LLM reply with a code block) on ``task``."""
        t0 = time.perf_counter()
        result = EvalResult(task=task.name, backend=self.backend_name, device=self.device, baseline=self.baseline)
        try:
            self._evaluate(task, action, seed, result)
        except Exception as exc:  # an evaluator bug must not take the caller down; it is reported, not hidden
            result.error = f"internal evaluator error: {type(exc).__name__}: {exc}"
            result.error_stage = result.error_stage or "internal"
            result.correct = False
        result.eval_seconds = round(time.perf_counter() - t0, 4)
        result.reward = float(self.reward_fn(result))
        return result

    def evaluate_many(self, items: list, max_workers: int | None = None, seed: int | None = None,
                      progress=None) -> list[EvalResult]:
        """Evaluate ``[(task, action), ...]``; results in the same order.

        Up to ``max_workers`` candidates are in flight at once (default: the build pool size, see ``build_workers``):
        their builds run concurrently on the CPU cores while running and timing take the device one candidate at a
        time, so a timing never overlaps another candidate's run. ``progress(done, total, result)`` is called as
        each result arrives.
        """
        results: list = [None] * len(items)
        for done, (i, r) in enumerate(self.evaluate_iter(items, max_workers, seed), 1):
            results[i] = r
            if progress is not None:
                progress(done, len(items), r)
        return results

    def evaluate_iter(self, items: list, max_workers: int | None = None, seed: int | None = None):
        """Yield ``(index, EvalResult)`` for ``[(task, action), ...]`` as the evaluations finish."""
        n = max_workers or self.build_workers
        if n <= 1 or len(items) <= 1:
            for i, (t, a) in enumerate(items):
                yield i, self.evaluate(t, a, seed)
            return
        with ThreadPoolExecutor(max_workers=n) as pool:
            futures = {pool.submit(self.evaluate, t, a, seed): i for i, (t, a) in enumerate(items)}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()

    async def aevaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        """``evaluate`` for asyncio callers (runs in a thread; many may be awaited at once)."""
        return await asyncio.to_thread(self.evaluate, task, action, seed)

    async def aevaluate_many(self, items: list, seed: int | None = None) -> list[EvalResult]:
        sem = asyncio.Semaphore(self.build_workers)

        async def one(t, a):
            async with sem:
                return await self.aevaluate(t, a, seed)

        return list(await asyncio.gather(*(one(t, a) for t, a in items)))

    # ------------------------------------------------------------------ stages
    def _evaluate(self, task: Task, action, seed, result: EvalResult) -> None:
        try:
            source = screen_mod.extract_source(action)
            result.source_hash = hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()[:16]
            screen_mod.screen(source, self.backend)
        except screen_mod.ScreenError as exc:
            result.error, result.error_stage = str(exc), "screen"
            return
        result.stage = "screened"
        configs = task.configs_for(self.device)
        if not configs:
            result.error, result.error_stage = f"task {task.name} has no configuration for {self.device}", "screen"
            return
        seed = secrets.randbits(62) if seed is None else seed
        try:
            worker = (self._spares.take(source) if self._spares is not None else
                      Worker(source, self.backend_name, self.device, self.build_root, self.limits))
            with worker:
                try:
                    self._run_stages(task, configs, seed, worker, result)
                finally:
                    result.worker_seconds = round(worker.busy_seconds, 4)
                    _flag_sandbox_violations(worker, result)
        except WorkerError as exc:
            timing_failed = result.stage == "correct"
            result.error = str(exc)
            result.error_stage = "timing" if timing_failed else (result.error_stage or ("build" if not result.compiled else "run"))
            result.log_tail = _tail(exc.log_tail)
            result.correct = False
        finally:
            if self._spares is not None:
                self._spares.evaluation_over()

    def _run_stages(self, task: Task, configs: list[Config], seed: int, worker: Worker, result: EvalResult) -> None:
        with _phase(result, "build"):
            self._build(worker, result)  # concurrent with other candidates' builds and runs
        if not result.compiled:
            return
        with _phase(result, "device_wait"):
            self._device_lock.acquire()
        try:
            with self._trusted_threads():
                timed: dict = {}  # configuration -> _TimedChecks
                with _phase(result, "check"):
                    prepared = self._check(task, configs, seed, worker, result, timed)
                if not result.correct or not self.time_candidates:
                    return
                self._time(task, configs, prepared, seed, worker, result, timed)
                if result.stage == "timed" and not result.integrity_flags:
                    with _phase(result, "plausibility"):
                        self._plausibility(task, configs, prepared, seed, worker, result)
        finally:
            self._device_lock.release()

    def _trusted_threads(self):
        """While this evaluation holds a CPU device, this process's torch computes (references, input sets,
        comparisons) on the cores the worker does not use (``Limits.threads`` are the worker's): with the default
        of one thread per core, the two processes' threads outnumbered the cores and waited on each other. A GPU
        evaluation keeps the count."""
        if not self.device.startswith("cpu"):
            return contextlib.nullcontext()
        return _PARENT_THREADS.lowered((os.cpu_count() or 1) - self.limits.threads)

    def _build(self, worker: Worker, result: EvalResult) -> None:
        header, _ = worker.recv(self.limits.build_timeout, "build and load")
        if header["type"] == "error":
            result.error, result.error_stage = header["message"], header["stage"]
            result.log_tail = _tail(worker.log_tail())
            return
        result.compiled = True
        result.stage = "built"
        self._note_reports(result, header)
        result.build_seconds = round(header["build_seconds"], 3)
        result.cached_build = header.get("cached")
        for key, phase in (("warmup_seconds", "worker_warmup"), ("cuda_start_seconds", "worker_cuda_start")):
            if header.get(key):
                _add_phase(result, phase, float(header[key]))

    def _note_reports(self, result: EvalResult, header, config: str | None = None) -> bool:
        """What the worker reported of the candidate with a reply: harness functions it replaced
        (integrity.HarnessGuard) and tensor subclasses forward returned (their values may be computed when read,
        after the timed region). Each is an integrity flag; True if there was any."""
        if not isinstance(header, dict):
            return False
        where = f" on configuration {config!r}" if config else ""
        found = False
        if header.get("harness_patched"):
            found = True
            self._flag(result, "harness_patched: the candidate replaced functions the worker times or checks with ("
                               + ", ".join(map(str, header["harness_patched"][:8])) + f"){where}; timing and checks "
                               "are not to be touched")
        if header.get("lazy_output"):
            found = True
            self._flag(result, f"lazy_output: forward returned tensor subclasses "
                               f"({', '.join(map(str, header['lazy_output'][:4]))}){where}; return plain torch.Tensor "
                               f"outputs, computed by the time forward returns")
        if found:
            result.correct = False
        return found

    def _flag(self, result: EvalResult, flag: str) -> None:
        kind = flag.split(":", 1)[0]
        if not any(f.split(":", 1)[0] == kind for f in result.integrity_flags):
            result.integrity_flags.append(flag)

    def _check(self, task: Task, configs: list[Config], seed: int, worker: Worker, result: EvalResult,
               timed: dict) -> dict:
        """Run every configuration in the worker and compare on this side. Returns per-config prepared data.

        Pipelined: configuration k+1's run goes to the worker as soon as configuration k's output is back, and k's
        output is judged while the worker runs k+1; the reference output of k and the inputs of k+1 are made while
        the worker runs k. Judgements, and so the first failing configuration's message, follow the configurations'
        order, as when each waited for the one before. On the CPU, while all is correct so far, the checks of
        configuration k's timed outputs are prepared into ``timed`` while the worker runs k too (untimed: work beside
        a timed run would disturb its timing)."""
        prepared: dict = {}
        verdict = {"all_ok": True, "ran_any": False}
        nxt = self._instantiate(task, configs[0], seed, 0, prepared)
        self._send_run(task, nxt, prepared, worker, result)
        for i in range(len(configs)):
            cur, nxt = nxt, None
            cfg = cur[0]
            mod, init_inputs, init_seed, inputs = prepared[cfg.name]
            with _phase(result, "reference_outputs"):  # while the worker runs the candidate (nothing is timed)
                ref = task.reference_output(mod, init_inputs, inputs, cfg, init_seed, self.device)
            if i + 1 < len(configs):
                nxt = self._instantiate(task, configs[i + 1], seed, i + 1, prepared)
            if self.device.startswith("cpu") and verdict["all_ok"] and self.time_candidates:
                with _phase(result, "timed_output_prep"):  # ahead of the verdict: dropped if it fails
                    timed[cfg.name] = self._timed_checks(task, cfg, i, seed, prepared)
                    timed[cfg.name].prepare()
            reply = worker.recv(self.limits.run_timeout, f"forward on configuration {cfg.name!r}",
                                expect_bytes=integrity.output_bytes(ref))
            try:
                if nxt is not None:
                    self._send_run(task, nxt, prepared, worker, result)
            finally:  # judged even when the worker is gone, as before the pipelining
                self._judge(task, cur, reply, ref, result, verdict)
        result.stage = "ran" if verdict["ran_any"] else "built"
        if verdict["all_ok"] and not result.integrity_flags:
            result.correct, result.stage = True, "correct"
        return prepared

    def _instantiate(self, task: Task, cfg: Config, seed: int, i: int, prepared: dict) -> tuple:
        """Configuration ``i``'s reference module, init inputs and inputs (into ``prepared``); returns
        ``(cfg, ConfigResult)``."""
        in_seed, init_seed = _seeds(seed, i)
        mod, init_inputs, inputs = task.instantiate(cfg, in_seed, self.device)
        prepared[cfg.name] = (mod, init_inputs, init_seed, inputs)
        return cfg, ConfigResult(name=cfg.name, held_out=cfg.held_out, dtype=cfg.dtype,
                                 inputs=[describe_value(x) for x in inputs])

    def _send_run(self, task: Task, run: tuple, prepared: dict, worker: Worker, result: EvalResult) -> None:
        """Send a configuration's correctness run to the worker; its ConfigResult joins ``result``."""
        cfg, cr = run
        result.configs.append(cr)
        _, init_inputs, init_seed, inputs = prepared[cfg.name]
        worker.send({"type": "run", "config": cfg.name, "dtype": cfg.dtype, "init_seed": init_seed,
                     "backward": task.backward, "tolerance": task.tolerance},
                    {"init_inputs": init_inputs, "inputs": inputs})

    def _judge(self, task: Task, run: tuple, reply: tuple, ref, result: EvalResult, verdict: dict) -> None:
        """Judge one configuration's correctness run: the worker's reply against the reference output ``ref``.
        Updates ``verdict`` (all_ok, ran_any), the configuration's ConfigResult and ``result``."""
        cfg, cr = run
        header, payload = reply
        self._note_reports(result, header, cfg.name)
        if header["type"] == "error":
            cr.correct, cr.error = False, header["message"]
            verdict["all_ok"] = False
            if result.error is None:
                result.error = f"configuration {_label(cfg, cr)}: {header['message']}"
                result.error_stage = "run"
            return
        if not (isinstance(payload, dict) and "out" in payload):
            raise WorkerError(f"the worker's reply on configuration {cfg.name!r} carried no output")
        verdict["ran_any"] = True
        mismatch, figures = compare_outputs(payload["out"], ref, DTYPES[cfg.dtype], task.tolerance)
        cr.norm_err, cr.max_err = figures["norm_err"], figures["max_err"]
        cr.correct = mismatch is None
        if mismatch is not None:
            cr.error = mismatch.message
            verdict["all_ok"] = False
            if result.error is None:
                result.error = f"configuration {_label(cfg, cr)}: {mismatch.message}"
                result.error_stage = "correctness"
        elif header.get("nondeterministic"):
            self._flag(result, f"nondeterministic: a second run on the same inputs of configuration "
                               f"{cfg.name!r} gave a different output ({str(header['nondeterministic'])[:300]})")
        if header.get("inputs_modified"):
            self._flag(result, f"inputs_modified: forward wrote into its inputs on configuration {cfg.name!r}")
        _add_phase(result, "worker_audit", float((header.get("audit") or {}).get("overhead_s") or 0.0))
        for flag in integrity.audit_flags(header["audit"], cfg.name, TORCH_KERNEL_PREFIXES):
            self._flag(result, flag)
        if header.get("flags_changed"):
            self._flag(result, "precision_flags_changed: the candidate changed pinned precision settings ("
                               + "; ".join(header["flags_changed"]) + ")")

    def _time(self, task: Task, configs: list[Config], prepared: dict, seed: int, worker: Worker,
              result: EvalResult, timed: dict) -> None:
        with _phase(result, "reference_timing"):
            ref_times = self._reference_times(task, configs, prepared, seed)
        with _phase(result, "timing"):
            self._time_candidate(task, configs, prepared, seed, worker, result, ref_times, timed)

    def _time_candidate(self, task: Task, configs: list[Config], prepared: dict, seed: int, worker: Worker,
                        result: EvalResult, ref_times: dict, timed: dict) -> None:
        for i, cfg in enumerate(configs):
            cr = result.configs[i]
            checks = timed.get(cfg.name) or self._timed_checks(task, cfg, i, seed, prepared)
            made = checks.timed_inputs
            worker.send({"type": "time", "config": cfg.name, "backward": task.backward, "params": self.timing,
                         "seed": made.seed, "noise": self.noise, "base_seed": made.base_seed, "sets": self.input_sets,
                         "fingerprint_seed": checks.fingerprint.seed})
            header, payload = worker.recv(self.limits.time_timeout, f"timing of configuration {cfg.name!r}")
            if self._note_reports(result, header, cfg.name):
                return
            if header["type"] == "error":
                result.error = f"configuration {_label(cfg, cr)} failed while being timed: {header['message']}"
                result.error_stage = "timing"
                result.correct = False
                return
            with _phase(result, "timed_output_checks"):
                rows = payload.get("fingerprints") if isinstance(payload, dict) else None
                reported = integrity.Reported(rows, header.get("fingerprint_counts"))
                wrong = checks.first_wrong(reported, self._rng, self.check_calls)
            if wrong is not None:
                self._flag(result, f"timed_output_wrong: the output of timed call {wrong} on configuration "
                                   f"{cfg.name!r} does not match the reference for its inputs, although the "
                                   f"correctness run passed (cached, stale or deferred results): {checks.why}")
                result.correct = False
                return
            cr.candidate_ms, cr.candidate_spread_ms = header["median_ms"], header["iqr_ms"]
            rt = ref_times[cfg.name]
            cr.reference_ms, cr.reference_spread_ms = rt["median_ms"], rt["iqr_ms"]
            cr.compile_ms = rt.get("compile_ms")
            cr.speedup = cr.reference_ms / max(cr.candidate_ms, 1e-9)
        result.candidate_ms = geomean([c.candidate_ms for c in result.configs])
        result.reference_ms = geomean([c.reference_ms for c in result.configs])
        result.speedup = geomean([c.speedup for c in result.configs])
        if all(c.compile_ms for c in result.configs):
            result.speedup_compile = geomean([c.compile_ms / max(c.candidate_ms, 1e-9) for c in result.configs])
        result.stage = "timed"

    def _plausibility(self, task: Task, configs: list[Config], prepared: dict, seed: int, worker: Worker,
                      result: EvalResult) -> None:
        """Roofline floor on every configuration; independent re-timing of implausibly large speedups."""
        if self.roofline and self._calibration:
            below = self._below_floor(task, configs, prepared, result)
            if below:
                # The calibration is one measurement, possibly taken while the machine was busy (a CPU evaluator
                # calibrated under load put the floor of honest matrix products 2.4x too high): a time under the
                # floor is re-verified against a fresh calibration before it is flagged.
                self._recalibrate(task, configs)
                below = self._below_floor(task, configs, prepared, result)
            for cfg, cr, floor_ms, why in below:
                self._flag(result, f"below_roofline: {cr.candidate_ms:.4f} ms on configuration {cfg.name!r} is "
                                   f"under half the device's floor of {floor_ms:.4f} ms ({why})")
        if result.speedup is not None and result.speedup > self.reverify_above and not result.integrity_flags:
            i = max(range(len(configs)), key=lambda k: result.configs[k].speedup or 0)
            cfg, cr = configs[i], result.configs[i]
            _, _, _, inputs = prepared[cfg.name]
            wall_ms = _wallclock(worker, cfg.name, inputs, seed, self.noise, self.limits.time_timeout)
            ref_wall = self._ref_times[self._ref_key(task, cfg)].get("wall_ms")
            if ref_wall is None:
                ref_wall = self._reference_wallclock(task, cfg, prepared, seed)
            wall_speedup = ref_wall / max(wall_ms, 1e-9)
            if wall_speedup < 0.5 * cr.speedup:
                self._flag(result, f"speedup_not_reverified: {cr.speedup:.1f}x on configuration {cfg.name!r} was "
                                   f"re-timed by wall clock from the trusted side at {wall_speedup:.1f}x")

    def _below_floor(self, task: Task, configs: list[Config], prepared: dict, result: EvalResult) -> list:
        """The configurations whose candidate time is under half the device's floor: (config, its result, floor
        in ms, how the floor was made)."""
        out = []
        for cfg, cr in zip(configs, result.configs):
            floor_ms, why = self._floor(task, cfg, prepared)
            if floor_ms > 0.02 and cr.candidate_ms < 0.5 * floor_ms:
                out.append((cfg, cr, floor_ms, why))
        return out

    def _recalibrate(self, task: Task, configs: list[Config]) -> None:
        """Measure the device again (in a reference worker) and keep, per figure, the best rate measured so far:
        load can only make a measured rate lower than the device's, so the highest is the closest to it. The
        floors made from the old calibration are dropped."""
        with self._reference_worker(task) as w:
            _expect(w.recv(self.limits.build_timeout, "reference load"), task)
            w.send({"type": "calibrate", "dtypes": sorted({c.dtype for c in configs})})
            fresh = _expect(w.recv(self.limits.time_timeout, "device calibration"), task)
        with self._cal_lock:
            cal = dict(self._calibration)
            cal["bandwidth"] = max(cal["bandwidth"], fresh["bandwidth"])
            cal["flops"] = {k: max(v, fresh["flops"].get(k, 0.0)) for k, v in cal["flops"].items()}
            cal["flops"].update({k: v for k, v in fresh["flops"].items() if k not in cal["flops"]})
            self._calibration = cal
            key = (self.device, self.backend_name)
            if key in _GPU_CALIBRATIONS:
                _GPU_CALIBRATIONS[key] = cal
            for k in [k for k in list(self._ref_times) if k and k[0] == "floor"]:
                self._ref_times.pop(k, None)

    def _floor(self, task: Task, cfg: Config, prepared: dict) -> tuple[float, str]:
        """The least time the configuration can take on this device (cached): output bytes at the measured copy
        bandwidth, and the reference's matrix-product FLOPs at the measured matmul rate."""
        key = ("floor",) + self._ref_key(task, cfg)
        if key not in self._ref_times:
            cal = self._calibration
            mod, init_inputs, init_seed, inputs = prepared[cfg.name]
            model = task.make_model(mod, init_inputs, init_seed, DTYPES[cfg.dtype], self.device)
            out = task.reference_output(mod, init_inputs, inputs, cfg, init_seed, self.device, upcast=False)
            out_bytes = integrity.output_bytes(out)
            flops = integrity.count_flops(model, inputs) if not task.backward else 0
            rate = cal["flops"].get(cfg.dtype) or cal["flops"].get("float32")
            # Outputs that fit in cache are written faster than memory bandwidth: the byte floor applies only to
            # outputs well past any last-level cache.
            byte_floor = out_bytes / cal["bandwidth"] if out_bytes >= ROOFLINE_MIN_BYTES else 0.0
            floor_ms = 1e3 * max(byte_floor, flops / rate if rate else 0.0)
            why = f"{out_bytes} output bytes at {cal['bandwidth'] / 1e9:.1f} GB/s, {flops:.3g} FLOP"
            self._ref_times[key] = (floor_ms, why)
        return self._ref_times[key]

    def _timed_checks(self, task: Task, cfg: Config, i: int, seed: int, prepared: dict) -> "_TimedChecks":
        """The checks of configuration ``i``'s timed outputs, with the seeds its timing request carries."""
        inputs = integrity.TimedInputs(prepared[cfg.name][3], _base_seed(seed, i), self.input_sets,
                                       _seeds(seed, 5000 + i)[0], self.noise)
        fingerprint = integrity.Fingerprint(_seeds(seed, 7000 + i)[0])
        return _TimedChecks(task, cfg, prepared[cfg.name], self.device, inputs, fingerprint)

    # ------------------------------------------------------------------ reference side
    def _ref_key(self, task: Task, cfg: Config) -> tuple:
        return (task.name, task.source_hash, cfg.name, self.device, self.backend_name)

    def _reference_worker(self, task: Task) -> Worker:
        return Worker(task.source + "\n\nModelNew = Model\n", self.backend_name, self.device, self.build_root,
                      self.limits, audit=False)

    def _reference_times(self, task: Task, configs: list[Config], prepared: dict, seed: int) -> dict:
        """Time the reference (eager, and compiled if asked) in a worker of its own, under the candidate's
        conditions; cached per configuration. Also measures the device's roofline once."""
        with self._ref_lock:
            lock = self._ref_locks.setdefault((task.name, task.source_hash), threading.Lock())
        with lock:
            return self._reference_times_locked(task, configs, prepared, seed)

    def _reference_times_locked(self, task: Task, configs: list[Config], prepared: dict, seed: int) -> dict:
        todo = [c for c in configs if self._ref_key(task, c) not in self._ref_times]
        if todo or self._calibration is None:
            with self._reference_worker(task) as w:
                _expect(w.recv(self.limits.build_timeout, "reference load"), task)
                with self._cal_lock:  # once per evaluator, whichever task comes first
                    if self._calibration is None:
                        key = (self.device, self.backend_name)
                        cal = _GPU_CALIBRATIONS.get(key)
                        if cal is None:
                            dtypes = sorted({c.dtype for c in configs})
                            w.send({"type": "calibrate", "dtypes": dtypes})
                            cal = _expect(w.recv(self.limits.time_timeout, "device calibration"), task)
                            if self.device.startswith("cuda"):
                                _GPU_CALIBRATIONS[key] = cal
                        if cal.get("graph_gap_ms"):  # CUDA: correct graph timings for the node gap
                            self.timing.setdefault("gap_ms", cal["graph_gap_ms"])
                        self._calibration = cal
                for cfg in todo:
                    i = configs.index(cfg)
                    self._ref_times[self._ref_key(task, cfg)] = self._time_reference(w, task, cfg, prepared, seed, i)
        return {c.name: self._ref_times[self._ref_key(task, c)] for c in configs}

    def _time_reference(self, w: Worker, task: Task, cfg: Config, prepared: dict, seed: int, i: int) -> dict:
        mod, init_inputs, init_seed, inputs = prepared[cfg.name]
        out = {}
        for label, compiled in (("eager", False), ("compile", True)):
            if compiled and not self.compile_baseline:
                continue
            name = f"{cfg.name}#{label}"
            w.send({"type": "run", "config": name, "dtype": cfg.dtype, "init_seed": init_seed, "compile": compiled,
                    "backward": task.backward, "reply": "none"}, {"init_inputs": init_inputs, "inputs": inputs})
            _expect(w.recv(self.limits.run_timeout + (300 if compiled else 0), f"reference run ({label})"), task)
            w.send({"type": "time", "config": name, "backward": task.backward, "params": self.timing,
                    "seed": _seeds(seed, 7000 + i)[0], "noise": self.noise,
                    "base_seed": _base_seed(seed, i), "sets": self.input_sets})
            h = _expect(w.recv(self.limits.time_timeout, f"reference timing ({label})"), task)
            if compiled:
                out["compile_ms"] = h["median_ms"]
            else:
                out.update(median_ms=h["median_ms"], iqr_ms=h["iqr_ms"])
        return out

    def _reference_wallclock(self, task: Task, cfg: Config, prepared: dict, seed: int) -> float:
        mod, init_inputs, init_seed, inputs = prepared[cfg.name]
        with self._reference_worker(task) as w:
            _expect(w.recv(self.limits.build_timeout, "reference load"), task)
            w.send({"type": "run", "config": cfg.name, "dtype": cfg.dtype, "init_seed": init_seed,
                    "backward": task.backward, "reply": "none"}, {"init_inputs": init_inputs, "inputs": inputs})
            _expect(w.recv(self.limits.run_timeout, "reference run"), task)
            wall = _wallclock(w, cfg.name, inputs, seed, self.noise, self.limits.time_timeout)
        self._ref_times[self._ref_key(task, cfg)]["wall_ms"] = wall
        return wall


def _base_seed(seed: int, i: int) -> int:
    """Seed of configuration ``i``'s timing input sets: the same for the candidate and the reference."""
    return _seeds(seed, 1000 + 100 * i)[0]


@contextlib.contextmanager
def _phase(result: EvalResult, name: str):
    """Add the wall time of the block to ``result.phase_seconds[name]``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _add_phase(result, name, time.perf_counter() - t0)


def _add_phase(result: EvalResult, name: str, seconds: float) -> None:
    result.phase_seconds[name] = round(result.phase_seconds.get(name, 0.0) + seconds, 4)


def _flag_sandbox_violations(worker: Worker, result: EvalResult) -> None:
    """What the sandbox refused the candidate (the worker's reports, see sandbox.Worker.violations) becomes one
    ``sandbox_violation`` integrity flag, so the attempt is paid as an exploit whatever else the candidate did."""
    seen = worker.violations()
    if seen and not any(f.startswith("sandbox_violation") for f in result.integrity_flags):
        more = f" (and {len(seen) - 3} more)" if len(seen) > 3 else ""
        result.integrity_flags.append("sandbox_violation: the candidate tried to " + "; ".join(seen[:3]) + more)


def _wallclock(worker: Worker, config: str, inputs: list, seed: int, noise: float, timeout: float,
               calls: int = 20) -> float:
    """Per-call time measured by this process's clock around ``calls`` back-to-back calls in the worker."""
    worker.send({"type": "wallclock", "config": config, "calls": calls, "seed": seed, "noise": noise},
                {"inputs": inputs})
    header, _ = worker.recv(timeout, "re-timing (inputs)")
    if header["type"] == "error":
        raise WorkerError(f"re-timing failed: {header['message']}")
    t0 = time.perf_counter()
    worker.send({"type": "go"})
    header, _ = worker.recv(timeout, "re-timing")
    return (time.perf_counter() - t0) * 1e3 / calls


def _expect(msg, task: Task) -> dict:
    header, _ = msg
    if header["type"] == "error":
        raise RuntimeError(f"the reference of {task.name} failed ({header['stage']}): {header['message']}")
    return header


def _label(cfg: Config, cr: ConfigResult) -> str:
    return f"{cfg.name!r}" + (" (held out)" if cfg.held_out else "") + f" with inputs {', '.join(cr.inputs)}"


def _tail(text: str, max_lines: int = 30) -> str | None:
    if not text:
        return None
    lines = text.strip().splitlines()
    return "\n".join(lines[-max_lines:])

"""The Evaluator: the one component that turns (task, candidate source, device) into an EvalResult.

It holds the stage order and the evaluator-wide state (device lock, spare workers, builder, reference baselines);
each stage is a module of its own: screen (parent, milliseconds) -> build (the trusted builder compiles,
kbench_env/builder; the sandboxed worker loads) -> check (run every configuration on fresh random inputs in the
worker and compare with the reference here, with a runtime audit of what forward executed) -> timing (candidate
and reference, ``baseline``, under the same conditions, every timed call on fresh inputs written by this side and
sampled calls' outputs read and checked here; on the CPU by this process's clock around each block of the stopped
worker, ``blocks``; on a GPU by the worker's device events bounded by this process's clock, through CUDA IPC,
``gpu_blocks``) -> plausibility (roofline
floor, independent re-timing of large speedups) -> reward. Everything else (env, agents, training, CLI) calls
this; nothing else compiles, runs or times candidate code. It never raises for anything a candidate does: every
failure is a result. The stages that run candidate code on the device hold its lock as pipeline/device_hold.py
says (timing always alone on it).
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import time
import weakref
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from kbench_env.backends import get_backend
from kbench_env.builder.ray_builds import make_builder
from kbench_env.machine.cache_dir import default_cache_dir
from kbench_env.machine.device import Device, resolve_device
from kbench_env.pipeline import formats
from kbench_env.pipeline import rules as rules_mod
from kbench_env.pipeline import screen as screen_mod
from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.build import build, start_worker
from kbench_env.pipeline.device_hold import device_stages, make_device_lock, shared_checks_setting
from kbench_env.pipeline.reference_cache import resolve_root
from kbench_env.pipeline.reports import flag_builds, flag_record_switches, flag_sandbox_violations
from kbench_env.pipeline.result import EvalResult, hash_source, phase, trim_log
from kbench_env.pipeline.reward import get_reward_fn
from kbench_env.pipeline.threads import trusted_threads
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.spares import SpareWorkers
from kbench_env.tasks.task import Config, Task


class Evaluator:
    """Evaluates candidates for tasks on one device with one backend.

    Args:
        device: "auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:1".
        backend: kernel language; default "cpu" on the CPU and "cuda" on a GPU.
        reward: a preset name from reward.PRESETS or a callable over the EvalResult.
        baseline: "eager" or "compile": the reference the reward's speedup is measured against.
        limits: sandbox limits and per-stage timeouts (sandbox.Limits).
        cache_dir: where builds are kept (default $KBENCH_CACHE or ~/.cache/kbench); shared by all workers.
        input_sets: accepted and kept on the evaluator; it does not shape the timing: every timed call's inputs
            are drawn per block by this side (revealed_inputs.py, gpu_blocks.py).
        noise: relative size of the per-call perturbation of the timed inputs.
        check_calls: timed calls per block whose outputs this side reads and checks (chosen after the block ran).
        timing: the timing's stopping rule (warmup, min_reps, max_reps, min_seconds; blocks.py, gpu_blocks.py;
            on the CPU, paired: ci_width, pair_seconds, block_seconds, paired.py).
        time_candidates: set False to skip timing (correctness only; speedup stays None).
        compile_baseline: also time the reference under torch.compile (default: on for GPUs, off on the CPU;
            the environment variable KBENCH_COMPILE_BASELINE=0 or 1 sets the default).
        reverify_above: speedups above this are re-timed by an independent method (wall clock from this process).
        roofline: flag times below the device's measured bandwidth / FLOP-rate floor.
        build_workers: candidates in flight at once in ``evaluate_many`` (default: the number of CPU cores).
        spare_worker: keep started, confined, idle workers ready for the next candidates, one per evaluation in
            flight (sandbox.SpareWorkers; on a GPU they have CUDA started), at most a number that the host's cores
            and memory allow (``KBENCH_SPARE_WORKERS`` sets it), or at most this number when it is one. Each serves
            one candidate. Off with False or KBENCH_SPARE_WORKER=0.
        rules: "strict" or "kernelbench": what forward may run besides the candidate's own kernels (rules.py).
        reference_cache: reference timings kept on disk across processes and runs: True, False or a folder; by
            default on for GPUs, off on the CPU (why: pipeline/reference_cache.resolve_root).
        format: the action format candidates are held to: "kernelbench", "fast" or "triton" (formats.py).
        remote_builds: "ray" or "ray:<address>": builds as Ray tasks on a cluster's CPU nodes (builder/ray_builds.py).
        shared_checks: candidates' correctness checks share the device (up to shared_device_lock.SHARED_CAP at
            once per Evaluator) instead of holding it one at a time; timing, reference timing and plausibility still
            have it to themselves, excluding every other holder in this and other processes. It trades device
            memory (several candidates' checks, and checked candidates waiting for their timing, at once) for less
            time waiting on the device. Default: on for GPUs, off on the CPU (device_hold.shared_checks_setting
            says why); KBENCH_SHARED_CHECKS=0 or 1 sets the default.
    """

    def __init__(self, device: str = "auto", backend: str | None = None, reward="tiered", baseline: str = "eager",
                 limits: Limits | None = None, cache_dir: str | Path | None = None, input_sets: int = 3,
                 noise: float = 1e-2, check_calls: int = 4, timing: dict | None = None,
                 time_candidates: bool = True, compile_baseline: bool | None = None, reverify_above: float = 10.0,
                 roofline: bool = True, build_workers: int | None = None, spare_worker: bool | int | None = None,
                 rules: str = rules_mod.DEFAULT, reference_cache=None, format: str = formats.DEFAULT,
                 remote_builds: str | None = None, shared_checks: bool | None = None):
        self.rules, self.device = rules_mod.check_rules(rules), resolve_device(device)
        self.format, self.backend_name = formats.resolve(format, backend, self.device)
        self.backend = get_backend(self.backend_name)
        self.reward_fn = get_reward_fn(reward)
        if baseline not in ("eager", "compile"):
            raise ValueError("baseline must be 'eager' or 'compile'")
        self.baseline = baseline
        self.limits = limits or Limits()
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.build_root = str((self.cache_dir / "builds" / self.backend_name).resolve())
        os.makedirs(self.build_root, exist_ok=True)
        self.input_sets, self.noise, self.check_calls = max(1, input_sets), noise, check_calls
        self.timing, self.time_candidates = dict(timing or {}), time_candidates
        if compile_baseline is None and os.environ.get("KBENCH_COMPILE_BASELINE", "") in ("0", "1"):
            compile_baseline = os.environ["KBENCH_COMPILE_BASELINE"] == "1"  # a run-wide switch, e.g. smoke runs
        self.compile_baseline = (not Device.parse(self.device).is_cpu) if compile_baseline is None else compile_baseline
        if baseline == "compile":
            self.compile_baseline = True
        self.reverify_above, self.roofline = reverify_above, roofline
        self.build_workers = build_workers or max(1, os.cpu_count() or 1)
        # Compiles the sources of the kinds of build the format allows, where no candidate code runs (builder/)
        self.builder = make_builder(self.backend_name, self.device, self.build_root, self.limits, self.build_workers,
                                    formats.builder_kinds(self.format), remote_builds)
        weakref.finalize(self, self.builder.close)
        # Run and time one candidate at a time on this device (on a GPU across processes too), or with
        # shared_checks let checks share it while timing has it alone (device_hold.py).
        self.shared_checks = shared_checks_setting(shared_checks, self.device)
        self._device_lock, self._device_slots = make_device_lock(self.device, self.cache_dir / "locks",
                                                                 self.shared_checks)
        self.baselines = Baselines(self.device, self.backend_name, self.build_root, self.limits, self.timing,
                                   self.compile_baseline, self.noise, self.input_sets,
                                   resolve_root(reference_cache, self.device, self.cache_dir))
        self._rng = random.Random()
        if spare_worker is None:
            spare_worker = os.environ.get("KBENCH_SPARE_WORKER", "1") != "0"
        self._spares = None
        if spare_worker:
            cap = None if spare_worker is True else int(spare_worker)
            self._spares = SpareWorkers(self.backend_name, self.device, self.build_root, self.limits, self.builder,
                                        cap=cap)
            weakref.finalize(self, self._spares.close)

    def close(self) -> None:
        """Stop the spare workers (they also leave by themselves after sandbox.SPARE_IDLE_S idle) and the builder."""
        if self._spares is not None:
            self._spares.close()
        self.baselines.close()
        self.builder.close()

    def __deepcopy__(self, memo):
        """Copies of an env share its Evaluator (gymnasium deep-copies make() kwargs, e.g. in check_env)."""
        return self

    # ------------------------------------------------------------------ public API
    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        """Evaluate one action (source text or an LLM reply with a code block) on ``task``. A task without a
        configuration for this device raises TaskError: the task's error, not a result charged to the action."""
        task.require_configs(self.device)
        t0 = time.perf_counter()
        result = EvalResult(task.name, self.backend_name, self.device, baseline=self.baseline, rules=self.rules,
                            format=self.format, held_out_count=sum(c.held_out for c in task.configs_for(self.device)))
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

    # ------------------------------------------------------------------ the stage order
    def _evaluate(self, task: Task, action, seed, result: EvalResult) -> None:
        try:
            source = screen_mod.extract_source(action)
            result.source_hash = hash_source(source)
            formats.screen_action(source, self.backend, self.format)
        except screen_mod.ScreenError as exc:
            result.error, result.error_stage = str(exc), "screen"
            return
        result.stage = "screened"
        flag_record_switches(source, result)  # it still runs: its feedback shows the switch refused
        configs = task.configs_for(self.device)
        seed = secrets.randbits(62) if seed is None else seed
        try:
            with start_worker(self, source) as worker:
                try:
                    self._run_stages(task, configs, seed, worker, result)
                finally:
                    result.worker_seconds = round(worker.busy_seconds, 4)
                    flag_sandbox_violations(worker, result)
                    flag_builds(self.rules, worker, result)  # builds made after the build stage (in forward)
        except WorkerError as exc:
            timing_failed = result.stage == "correct"
            result.error = str(exc)
            result.error_stage = "timing" if timing_failed else (result.error_stage or ("build" if not result.compiled else "run"))
            result.log_tail = trim_log(exc.log_tail)
            result.correct = False
        finally:
            if self._spares is not None:
                self._spares.evaluation_over()

    def _run_stages(self, task: Task, configs: list[Config], seed: int, worker, result: EvalResult) -> None:
        with phase(result, "build"):
            build(worker, result, self.limits.build_timeout)  # concurrent with other candidates' builds and runs
        if not result.compiled or flag_builds(self.rules, worker, result):
            return  # a build flagged by its symbols does not run
        device_stages(self, task, configs, seed, worker, result)

    def _trusted_threads(self):
        """torch's thread count in this process while the evaluation holds the device (threads.trusted_threads)."""
        return trusted_threads(self.device, self.limits.threads)

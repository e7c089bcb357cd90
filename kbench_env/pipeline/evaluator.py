"""The Evaluator: the one component that turns (task, candidate source, device) into an EvalResult.

It holds the stage order (``Evaluator._evaluate``, top to bottom), the options (``config``: an EvaluatorConfig,
kbench_env/config) and the evaluator-wide state (device lock, spare workers, builder, reference baselines). Each
stage is a module of its own, and each after the build takes the evaluation's StageContext (context.py):
screen (parent, milliseconds) -> build (the trusted builder compiles, kbench_env/builder; the sandboxed worker
loads) -> check (run every configuration on fresh random inputs in the worker and compare with the reference
here, with a runtime audit of what forward executed) -> timing (candidate and reference, ``baseline``, under the
same conditions, every timed call on fresh inputs written by this side and sampled calls' outputs read and
checked here; on the CPU by this process's clock around each block of the stopped worker, ``blocks``; on a GPU by
the worker's device events bounded by this process's clock, through CUDA IPC, ``gpu_blocks``) -> plausibility
(roofline floor, independent re-timing of large speedups) -> reward. Everything else (env, agents, training, CLI)
calls this; nothing else compiles, runs or times candidate code. It never raises for anything a candidate does:
every failure is a result. The stages that run candidate code on the device hold its lock as
pipeline/device_hold.py says (timing always alone on it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import time
import weakref
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from kbench_env.backends import get_backend
from kbench_env.builder.ray_builds import make_builder
from kbench_env.config import EvaluatorConfig
from kbench_env.machine.cache_dir import default_cache_dir
from kbench_env.machine.device import Device, resolve_device
from kbench_env.pipeline import attempts, formats
from kbench_env.pipeline import rules as rules_mod
from kbench_env.pipeline import screen as screen_mod
from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.build import build, live_worker
from kbench_env.pipeline.check import check
from kbench_env.pipeline.context import StageContext
from kbench_env.pipeline.device_hold import DeviceHold, make_device_lock, shared_checks_setting
from kbench_env.pipeline.plausibility import plausibility
from kbench_env.pipeline.quiet import LIVE
from kbench_env.pipeline.reference_cache import resolve_root
from kbench_env.pipeline.reports import flag_builds, flag_record_switches
from kbench_env.pipeline.result import EvalResult, hash_source, phase, trim_log
from kbench_env.pipeline.reward import get_reward_fn
from kbench_env.pipeline.timing import close_ahead, is_paired, judge_deferred, set_up_ahead, time_stage
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.spares import SpareWorkers
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.task import Task


def resolve(config: EvaluatorConfig) -> EvaluatorConfig:
    """``config`` with every option decided: the device named, the format and backend checked against it, the
    options left to the device decided for it (config/evaluator_config.py), the limits, the cache folder and the build
    workers filled in, the rules and the baseline checked."""
    device = resolve_device(config.device)
    fmt, backend = formats.resolve(config.format, config.backend, device)
    t, r = config.timing, config.resources
    if t.baseline not in ("eager", "compile"):
        raise ValueError("baseline must be 'eager' or 'compile'")
    compile_baseline = (not Device.parse(device).is_cpu) if t.compile_baseline is None else bool(t.compile_baseline)
    cache_dir = Path(r.cache_dir) if r.cache_dir else default_cache_dir()
    shared_checks = shared_checks_setting(r.shared_checks, device)
    is_cpu = Device.parse(device).is_cpu
    later = not is_cpu if t.compile_later is None else bool(t.compile_later)
    # (a GPU's lock without shared checks has no idle hold to time it under: device_hold.make_device_lock)
    later = later and compile_baseline and t.baseline == "eager" and (is_cpu or shared_checks)
    timing = dataclasses.replace(t, params=dict(t.params or {}),
                                 compile_baseline=compile_baseline or t.baseline == "compile", compile_later=later,
                                 reference_cache=resolve_root(t.reference_cache, device, cache_dir) or False)
    resources = dataclasses.replace(r, limits=r.limits or Limits(), cache_dir=cache_dir,
                                    build_workers=r.build_workers or max(1, os.cpu_count() or 1),
                                    shared_checks=shared_checks)
    integrity = dataclasses.replace(config.integrity, rules=rules_mod.check_rules(config.integrity.rules))
    return dataclasses.replace(config, device=device, backend=backend, format=fmt, timing=timing,
                               integrity=integrity, resources=resources)


class Evaluator:
    """Evaluates candidates for tasks on one device with one backend, with the options of ``config``
    (kbench_env.config.EvaluatorConfig, which documents each). Keyword options make the config, or change the
    given one: ``Evaluator(device="cpu", spare_worker=False)`` is ``Evaluator(EvaluatorConfig.from_options(
    device="cpu", spare_worker=False))``. ``self.config`` holds the options as decided for this device
    (``resolve``); the ones read most are attributes too."""

    def __init__(self, config: EvaluatorConfig | None = None, **options):
        if config is not None and not isinstance(config, EvaluatorConfig):
            raise TypeError(f"Evaluator(config): an EvaluatorConfig, not {type(config).__name__} (options go by "
                            f"name: Evaluator(device=...))")
        self.config = resolve((config or EvaluatorConfig()).replace(**options))
        self.backend = get_backend(self.backend_name)
        self.reward_fn = get_reward_fn(self.config.reward)
        self.build_root = str((self.cache_dir / "builds" / self.backend_name).resolve())
        os.makedirs(self.build_root, exist_ok=True)
        self.timing = dict(self.config.timing.params)  # completed by the calibration (baseline.Baselines)
        # Compiles the sources of the kinds of build the format allows, where no candidate code runs (builder/)
        self.builder = make_builder(self.backend_name, self.device, self.build_root, self.limits, self.build_workers,
                                    formats.builder_kinds(self.format), self.config.resources.remote_builds)
        weakref.finalize(self, self.builder.close)
        # Run and time one candidate at a time on this device (on a GPU across processes too), or with
        # shared_checks let checks share it while timing has it alone (device_hold.py).
        self._device_lock, self._device_slots = make_device_lock(self.device, self.shared_checks)
        t = self.config.timing
        self.baselines = Baselines(self.device, self.backend_name, self.build_root, self.limits, self.timing,
                                   self.compile_baseline, t.noise, t.reference_cache or None,
                                   self._device_lock if t.compile_later else None)
        spare = self.config.resources.spare_worker
        self._spares = None
        if spare:
            self._spares = SpareWorkers(self.backend_name, self.device, self.build_root, self.limits, self.builder,
                                        cap=None if spare is True else int(spare),
                                        gate=LIVE.starting if Device.parse(self.device).is_cpu else None)
            weakref.finalize(self, self._spares.close)

    # The options read most, as attributes (read-only: the config is the one record of them)
    device = property(lambda self: self.config.device)
    backend_name = property(lambda self: self.config.backend)
    format = property(lambda self: self.config.format)
    rules = property(lambda self: self.config.integrity.rules)
    baseline = property(lambda self: self.config.timing.baseline)
    time_candidates = property(lambda self: self.config.timing.time_candidates)
    compile_baseline = property(lambda self: self.config.timing.compile_baseline)
    noise = property(lambda self: self.config.timing.noise)
    check_calls = property(lambda self: self.config.timing.check_calls)
    reverify_above = property(lambda self: self.config.integrity.reverify_above)
    roofline = property(lambda self: self.config.integrity.roofline)
    limits = property(lambda self: self.config.resources.limits)
    cache_dir = property(lambda self: self.config.resources.cache_dir)
    build_workers = property(lambda self: self.config.resources.build_workers)
    shared_checks = property(lambda self: self.config.resources.shared_checks)

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
        seed = secrets.randbits(62) if seed is None else seed  # (a second run draws the first's inputs again)
        result = attempts.run_stages(  # once more where the device's memory ran out outside the candidate
            lambda: EvalResult(task.name, self.backend_name, self.device, baseline=self.baseline, rules=self.rules,
                               format=self.format,
                               held_out_count=sum(c.held_out for c in task.configs_for(self.device))),
            lambda result: self._evaluate(task, action, seed, result), self.device,
            self._spares.shed if self._spares is not None else None)
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

    def device_hold(self) -> DeviceHold:
        """How an evaluation holds this evaluator's device (device_hold.py): a new hold for each evaluation."""
        return DeviceHold(self._device_lock, self._device_slots, self.device, self.limits.threads)

    def _worker_for(self, source: str) -> Worker:
        """The candidate's worker: a spare given ``source`` where spares are kept, else a new one."""
        if self._spares is not None:
            return self._spares.take(source)
        return Worker(source, self.backend_name, self.device, self.build_root, self.limits, builder=self.builder)

    # ------------------------------------------------------------------ the stage order
    def _evaluate(self, task: Task, action, seed, result: EvalResult) -> None:
        """The stages in their order: screen, build, check, timing, plausibility (``evaluate`` adds the reward).
        Those after the build run candidate code on the device and hold it as ``hold`` says (device_hold.py):
        the checks alone or shared with other candidates' checks, the timing and plausibility always alone."""
        try:
            source = screen_mod.extract_source(action)
            result.source_hash = hash_source(source)
            formats.screen_action(source, self.backend, self.format)
        except screen_mod.ScreenError as exc:
            result.error, result.error_stage = str(exc), "screen"
            return
        result.stage = "screened"
        flag_record_switches(source, result)  # it still runs: its feedback shows the switch refused
        timed, hold = self.time_candidates, self.device_hold()
        try:
            with live_worker(lambda: self._worker_for(source), self.device, self.rules, result) as worker, hold:
                ctx = StageContext(self.config, self.timing, self.baselines, hold, task, task.configs_for(self.device),
                                   seed, worker, result)
                prepares = timed and hold.shared and not is_paired(ctx)  # the reference prepared beside the checks
                try:  # its worker started beside the build
                    with self.baselines.started_beside(task, ctx.configs, prepares, hold.lock):
                        self._stages(ctx, hold, timed, prepares)
                finally:
                    close_ahead(ctx)  # set-ups made ahead that no timing used, unmapped before the worker ends
        except WorkerError as exc:
            result.error = str(exc)
            result.error_stage = "timing" if result.stage == "correct" else (
                result.error_stage or ("build" if not result.compiled else "run"))
            result.log_tail = trim_log(exc.log_tail)
            result.correct = False
        finally:
            if self._spares is not None:
                self._spares.evaluation_over()

    def _stages(self, ctx: StageContext, hold: DeviceHold, timed: bool, prepares: bool) -> None:
        """The stages after the worker started: build, check, timing, plausibility, judging (``_evaluate``)."""
        worker, result, task = ctx.worker, ctx.result, ctx.task
        with phase(result, "build"):
            build(worker, result, self.limits.build_timeout)  # beside other candidates' builds and runs
        if not result.compiled or flag_builds(self.rules, worker, result):
            return  # a build flagged by its symbols does not run
        with hold.checks(result):
            with hold.threads(), phase(result, "check"):
                check(ctx)
            if result.correct and prepares:
                with phase(result, "reference_prepare"):  # the reference's runs (and its start, unless started)
                    self.baselines.prepare(task, ctx.configs, ctx.prepared)
                with hold.threads(), phase(result, "timing_prepare"):  # timed blocks set up, beside checks
                    set_up_ahead(ctx)
        if not result.correct or not timed:
            return
        if prepares:
            with phase(result, "reference_wait"):  # its run ahead's compiles, not again under the timing's hold
                self.baselines.wait_run_ahead(task, self.limits.build_timeout)
        with hold.timing(result), hold.threads():
            deferred = time_stage(ctx)
            if result.stage == "timed" and not result.integrity_flags:
                with phase(result, "plausibility"):
                    plausibility(ctx)
        with hold.judging(result, deferred), hold.threads():
            judge_deferred(deferred, result)  # the timed outputs read and kept to judge (deferred_checks.py)

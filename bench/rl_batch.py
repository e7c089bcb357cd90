"""A GRPO-like batch: N tasks x M *distinct* candidates each (different kernels, not variants of one kernel's
constants), evaluated by the Evaluator with its default settings (integrity checks included) through
``evaluate_iter``, all candidates in flight at once as a trainer's step would submit them; run twice on one cache
folder: cold (empty build and reference caches) then warm (the same batch again, caches filled).

Candidates come from the repository, in the action format ``--format`` names (the Evaluator holds them to it):
each task's shipped solution (kbench_env.tasks.suite.solution_path: tasks/solutions/<folder>/), its honest
variants (tests/data/honest_variants/<folder>/, written differently: other loop orders, summations, blockings),
the batch's own candidates (bench/data/rl_batch/<folder>/<level>/<task>__<variant>.py: different samples of a
policy: other launch shapes, vector widths, reductions, passes, fused or unfused epilogues, a naive one) and, on
the CPU in the KernelBench format, the solutions of bench/data/kernelbench_cpu for the tasks they solve. The
folder is the backend's own (cpu, cuda) for the KernelBench format, ``fast_<backend>`` for the fast format
(``extern "C"`` kernels through kbench_env.fastpath) and ``triton`` for Triton. Identical sources count once.
Tasks are taken most-candidates first, alternating between levels; a task offers at most the candidates it has.

Reports per pass: candidates per minute (batch wall clock), p50/p95 step latency (one candidate's evaluation,
submission to result), device hold per candidate (check, reference timing, timing, plausibility: the phases that
hold the device lock), split into the correctness checks and the exclusive hold (reference timing, timing and
plausibility; the trusted side's reading of timed outputs, ``timed_output_checks``, is inside ``timing``), build
CPU-seconds (the builder process and the compilers it ran, from /proc/<pid>/stat, since the builder is a child of
the fork server and not of this process; ``getrusage(RUSAGE_CHILDREN)`` of this process is reported beside it),
and the results (correct, flagged, failed with the first error). ``--naive K`` sets the naive way beside the
passes: K of the candidates, one fresh process each, one after another (bench/naive_eval.py). With ``--out``,
every evaluation is appended to ``<out>.jsonl`` as it finishes, and a run cut short (SIGTERM from a time limit,
Ctrl-C) still writes its report, the cut pass's figures over the evaluations finished by then.

    python bench/rl_batch.py --device cpu --tasks 2 --per-task 2                  # small, as in CI
    python bench/rl_batch.py --device cuda --format fast --out bench/results/rl_batch_fast_h100.md
    python bench/rl_batch.py --device cuda --tasks 8 --per-task 8 --out bench/results/rl_batch_h100.md
    python bench/rl_batch.py --device cuda --tasks 8 --per-task 8 --shared-checks off  # one at a time
    python bench/rl_batch.py --device cuda --tasks 8 --per-task 1 --consecutive 5   # reference re-timings
    python bench/rl_batch.py --device cuda --gpus 2 --cross 4 --serve    # over 2 GPUs of the host; the same
                                         # candidates timed on each GPU; the batch once more through kbench serve

With ``--gpus N`` the candidates go through the local executor (one Evaluator per GPU, each with its builder and
its device lock, caches shared on disk), as a trainer's step would; per device it reports how many candidates ran
there and its idle fraction (1 - the device hold of its candidates / the pass's wall clock; under
``--shared-checks``, where checks overlap, the time the device lock was held at all, from the lock).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from rl_batch_candidates import candidates_folder, catalogue, pick  # noqa: E402  (bench/ is on the path now)

from kbench_env.sandbox.cpu_tally import STAGES, TALLY, since  # noqa: E402
from kbench_env.sandbox.cpu_tally import process_cpu_seconds as proc_cpu_seconds  # noqa: E402

#: The phases of an evaluation that hold the device (Evaluator._evaluate): the correctness checks, the start and
#: first runs of a reference not yet timed and the judging of timed outputs read during the timing (shared with
#: other candidates' checks under ``--shared-checks``) and the rest, which holds the device alone in either mode
#: (``timed_output_checks`` is part of ``timing``'s wall time, so it is not added again).
CHECK_PHASES = ("check", "reference_prepare", "timing_prepare", "deferred_output_checks")
EXCLUSIVE_PHASES = ("reference_timing", "timing", "plausibility")
DEVICE_PHASES = CHECK_PHASES + EXCLUSIVE_PHASES


def host_busy_seconds() -> float | None:
    """CPU-seconds the host's cores have spent busy so far, every process's (/proc/stat's first line: all but idle
    and iowait)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # user..steal less idle, iowait


def worker_stages(tally: dict) -> str:
    """A pass's workers' CPU time (sandbox/cpu_tally.py, the workers that closed in it), as one line: per role how
    many, how many read, and per worker read the mean of the whole and of each stage the worker reported."""
    parts = []
    for role, t in tally.items():
        if not t["workers"]:
            continue
        line = f"{role.replace('_', ' ')} {t['workers']:.0f} ({t['measured']:.0f} read)"
        if t["measured"]:
            line += f": {t['total'] / t['measured']:.2f} a worker"
        if t["staged"]:
            line += f"; stages of {t['staged']:.0f}: " + ", ".join(f"{s} {t[s] / t['staged']:.2f}" for s in STAGES)
        parts.append(line)
    return "; ".join(parts) or "none closed"


def workers_cpu_seconds() -> float | None:
    """CPU-seconds spent so far by every process in kbench's worker cgroups (the candidates' workers and the spares,
    those gone included: cgroup v2 keeps a removed child's usage in its parent's cpu.stat); None where the workers'
    cgroups are not v2 (v1's pids hierarchy counts no CPU) or there are none."""
    from kbench_env.sandbox.confine.cgroup import PidsCgroup

    base = PidsCgroup.base()
    if base is None or base[1] != 2:
        return None
    try:
        for line in Path(base[0], "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        return None
    return None


class BuilderCPU:
    """Samples the evaluator's builder process (which may be restarted) and keeps the CPU seconds per pid, from the
    pass's start (a training run's builder lives on from step to step: what it spent before is not this pass's)."""

    def __init__(self, builder):
        self.builder, self.seen, self._stop = builder, {}, threading.Event()
        pid = builder.pid
        self.before = {pid: proc_cpu_seconds(pid) or 0.0} if pid else {}
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def sample(self) -> None:
        pid = self.builder.pid
        if pid:
            s = proc_cpu_seconds(pid)
            if s is not None:
                self.seen[pid] = max(s, self.seen.get(pid, 0.0))

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self.sample()

    def stop(self) -> float:
        self.sample()
        self._stop.set()
        self._t.join()
        return sum(s - self.before.get(pid, 0.0) for pid, s in self.seen.items())


def builder_caches(evaluators: list) -> dict:
    """The builders' cache counters so far (builder/pch.COUNTS, summed over the evaluators): what the last reply of
    each builder said (its process's own count: a builder restarted after idling counts from 0 again)."""
    total: dict = {}
    for ev in evaluators:
        last = next((h["pch"] for h in reversed(ev.builder.history) if h.get("pch")), {})
        for k, v in last.items():
            total[k] = total.get(k, 0) + v
    return total


def _served(before: dict, after: dict) -> str | None:
    """The pass's own counts (a counter that fell: the builder restarted, its count is the pass's), as one line."""
    if not after:
        return None
    names = {"made": "heads made", "reused": "heads reused", "waited": "of them waited for",
             "objects_reused": "binding objects reused", "host_made": "host starts made",
             "host_reused": "host starts reused", "host_waited": "of them waited for"}
    return ", ".join(f"{names.get(k, k)} {v - before.get(k, 0) if v >= before.get(k, 0) else v}"
                     for k, v in after.items())


def pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


class RowLog:
    """The run's records appended to ``<out>.jsonl`` as they come: a header per run, every evaluation as it finishes,
    every pass's summary. The file is only ever appended to (earlier runs stay), and a run cut short (a device
    call's time limit: SIGTERM, or Ctrl-C) keeps every finished evaluation and writes its report from them."""

    def __init__(self, path: Path | None):
        self.path, self.rows = path, []

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.record(row)

    def record(self, obj: dict) -> None:
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(obj, default=str) + "\n")


def devices_for(device: str, gpus: int, per_gpu: int = 1) -> list[str]:
    """The devices a pass spreads over: ``gpus`` GPUs of this host (cuda:0 ...), or ``device`` itself; each named
    ``per_gpu`` times (the process executor then runs that many processes on it, sharing its lock)."""
    if device.startswith("cuda") and gpus > 1:
        return [f"cuda:{i}" for i in range(gpus) for _ in range(per_gpu)]
    return [device] * per_gpu


def make_executor(devices: list[str], cache_dir: Path, options: dict, processes: bool = False):
    """The local executor (one Evaluator per device) or, with ``processes``, the process executor."""
    from kbench_env.executors.local import LocalExecutor
    from kbench_env.executors.processes import ProcessExecutor

    return (ProcessExecutor if processes else LocalExecutor)(device=devices, cache_dir=cache_dir, **options)


def run_pass(label: str, items: list, devices: list[str], cache_dir: Path, seed: int, options: dict,
             log: RowLog, processes: bool = False, executor=None, in_flight: int | None = None) -> dict:
    """One pass of the batch through the local executor: one Evaluator per device (its own builder and device
    lock, the build and reference caches shared on disk), every candidate in flight at once. ``processes``: the
    process executor instead (one process per device, executors/processes.py), whose builders this process
    cannot see: no build CPU-seconds then. ``executor``: one made already (``make_executor``) and kept open after
    the pass (a training run's next step: its spare workers, builder and references in memory carry over).
    ``in_flight``: candidates in flight at once (default: all of the pass's)."""
    from kbench_env.tasks.suite import resolve_task

    tasks = {t: resolve_task(t) for t, _, _ in items}
    children0, self0 = _cpu_s(resource.RUSAGE_CHILDREN), _cpu_s(resource.RUSAGE_SELF)
    host0, workers0 = host_busy_seconds(), workers_cpu_seconds()
    tally0 = TALLY.snapshot()
    t0_ns = time.monotonic_ns()
    ex = executor or make_executor(devices, cache_dir, options, processes)
    evaluators = [] if processes else ex.evaluators  # the process executor's are in its processes, out of reach
    cpus = [BuilderCPU(ev.builder) for ev in evaluators]
    caches0 = builder_caches(evaluators)
    refs0 = reference_figures(evaluators)  # (an executor kept from step to step counts from its start)
    # (a training run's executor carries its locks from step to step: each pass counts its own time held)
    held0 = [getattr(getattr(ev, "_device_lock", None), "held_seconds", None) or 0.0 for ev in evaluators]
    rows, t0, mono0 = [], time.perf_counter(), time.monotonic()
    try:
        for i, r in ex.evaluate_iter([(tasks[t], src) for t, _, src in items], max_workers=in_flight or len(items),
                                     seed=seed):
            for c in cpus:
                c.sample()
            task, cand, _ = items[i]
            hold = sum(r.phase_seconds.get(p, 0.0) for p in DEVICE_PHASES)
            exclusive = sum(r.phase_seconds.get(p, 0.0) for p in EXCLUSIVE_PHASES)
            rows.append({"pass": label, "task": task, "candidate": cand, "source_hash": r.source_hash,
                         "device": r.device, "format": r.format, "correct": r.correct,
                         "flags": r.integrity_flags, "error": r.error, "speedup": r.speedup,
                         "speedup_compile": r.speedup_compile,
                         "cached_build": r.cached_build,
                         "step_s": r.eval_seconds, "device_hold_s": round(hold, 4),
                         "exclusive_hold_s": round(exclusive, 4), "check_s": round(hold - exclusive, 4),
                         "phases": r.phase_seconds,
                         # (the timed block's calls: with the inputs' sizes, what a set-up ahead would take)
                         "configs": [[c.name, c.candidate_ms, c.timed_block_calls] for c in r.configs],
                         "done_s": round(time.perf_counter() - t0, 3)})
            log.add(rows[-1])
            print(f"  [{label} {len(rows)}/{len(items)}] {task} {cand} on {r.device}: "
                  f"{'correct' if r.correct else 'FAILED'} {r.eval_seconds:.1f} s"
                  f"{'' if r.speedup is None else f', {r.speedup:.2f}x'}"
                  f"{'' if r.correct else f' ({(r.error or str(r.integrity_flags))[:160]})'}", flush=True)
        wall = time.perf_counter() - t0
        build_cpu = sum(c.stop() for c in cpus) if cpus else None
        ref_cache = evaluators[0].baselines.disk_root is not None if evaluators else None
        # Under shared checks the holds overlap: the lock's own count of the time it was held at all is the figure.
        locks = [ev._device_lock for ev in evaluators]  # noqa: SLF001
        held = {d: None if getattr(lock, "held_seconds", None) is None else lock.held_seconds - h0
                for d, lock, h0 in zip(devices, locks, held0)}
        refs = {k: v - (refs0.get(k) or 0) if isinstance(v, int) else v
                for k, v in reference_figures(evaluators, mono0).items()}
    finally:
        if executor is None:
            ex.close()
    child_cpu = _cpu_s(resource.RUSAGE_CHILDREN) - children0
    # this process (the trusted side: its threads check, compare and pack for every candidate) over the pass's wall
    own_cpu = _cpu_s(resource.RUSAGE_SELF) - self0
    host1, workers1 = host_busy_seconds(), workers_cpu_seconds()
    # Where a pass's CPU went, per candidate: the host's busy seconds split into the builder's, the workers', this
    # process's and the rest (the forkserver, the system, other processes).
    n = max(1, len(rows))
    split = {"builds": build_cpu, "workers": None if None in (workers0, workers1) else workers1 - workers0,
             "trusted": own_cpu}
    host_cpu = None if None in (host0, host1) else host1 - host0
    if host_cpu is not None and None not in split.values():
        split["other"] = host_cpu - sum(split.values())
    return {**pass_summary(label, rows, devices, wall, held), **refs,
            "gpu_idle_waiting": idle_waiting((t0_ns, time.monotonic_ns())),
            "builder_caches": _served(caches0, builder_caches(evaluators)),
            "ahead_timeline": ahead_timeline(evaluators, mono0),
            "build_cpu_s": None if build_cpu is None else round(build_cpu, 2),
            "build_cpu_per_candidate_s": None if build_cpu is None else round(build_cpu / max(1, len(rows)), 2),
            "children_cpu_s": round(child_cpu, 2), "trusted_cpu_s": round(own_cpu, 2),
            "workers_cpu_s": None if split["workers"] is None else round(split["workers"], 2),
            "worker_stages": None if processes else worker_stages(since(tally0, TALLY.snapshot())),
            "host_cpu_s": None if host_cpu is None else round(host_cpu, 2),
            "cpu_per_candidate": None if host_cpu is None else
            ", ".join([f"host {host_cpu / n:.2f}"] + [f"{k} {'-' if v is None else f'{v / n:.2f}'}"
                                                       for k, v in split.items()]),
            "reference_cache": ref_cache}


def step_source(src: str, step: int) -> str:
    """``src`` made new for training step ``step``: a comment put into its kernel code (before the first
    ``__global__`` or ``#include``, so that the compiled text changes and its build is not found cached), or, where
    it has neither (Python kernels), a comment line at its end."""
    mark = f"/* kbench rl_batch step {step} */ "
    at = min((i for i in (src.find("__global__"), src.find("#include")) if i >= 0), default=-1)
    return src[:at] + mark + src[at:] if at >= 0 else src + f"\n# kbench rl_batch step {step}\n"


def _cpu_s(who: int) -> float:
    """User and system CPU-seconds of ``who`` (resource.RUSAGE_SELF or RUSAGE_CHILDREN) so far."""
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def reference_figures(evaluators: list, since: float | None = None) -> dict:
    """The pass's reference work over its evaluators (none for the process executor: out of reach): configurations
    whose reference was timed (not found in memory or on disk), whether a drift check invalidated the disk cache,
    how many calibrations it measured again, the tasks whose reference ran ahead beside the build
    (reference_start.py), and the spare workers that served a candidate."""
    if not evaluators:
        return {}
    spares = [ev._spares for ev in evaluators if ev._spares is not None]  # noqa: SLF001
    return {"reference_timed": sum(ev.baselines.timed for ev in evaluators),
            "reference_invalidated": sum(ev.baselines.invalidated for ev in evaluators),
            "recalibrations": sum(ev.baselines.recalibrations for ev in evaluators),
            "ran_ahead": sum(ev.baselines.ran_ahead for ev in evaluators),
            "timed_ahead": sum(ev.baselines.timed_ahead for ev in evaluators),
            "compile_later": compile_later_figures(evaluators, since),
            "compile_later_log": compile_later_log(evaluators, since),
            "spares_served": sum(p.served for p in spares) if spares else None}


def compile_later_figures(evaluators: list, since: float | None = None) -> str | None:
    """The compiled references timed off the candidates' path (pipeline/compile_later.py) over the pass's
    evaluators: configurations timed, tasks left for a later candidate (no idle device in time) and failed, then
    the exclusive holds of the configurations timed after ``since`` (their median, and where the longest's time
    went); None where no evaluator times them so."""
    laters = _laters(evaluators)
    if not laters:
        return None
    text = (f"timed {sum(x.timed for x in laters)}, left {sum(x.left for x in laters)}, "
            f"failed {sum(x.failed for x in laters)}, gave way {sum(getattr(x, 'gave_way', 0) for x in laters)}")
    log = compile_later_log(evaluators, since)
    if log:
        holds = [e["hold_s"] for e in log]
        top = max(log, key=lambda e: e["hold_s"])
        text += (f"; exclusive hold a configuration median {statistics.median(holds):.2f} s, longest "
                 f"{top['hold_s']:.2f} s ({top['task']} {top['config']}: set-up {top.get('set_up_s')} s, "
                 f"steps {top.get('steps_ms')} ms, their CPU ms (thread, process), switches (waited, preempted), "
                 f"threads {top.get('steps_usage')}, {top.get('blocks')} blocks of {top.get('block')}, "
                 f"{top.get('method')}"
                 + (f"; given way, its threads then: {top['gave_way_threads']}" if top.get("gave_way_threads") else "")
                 + ")")
    return text


def compile_later_log(evaluators: list, since: float | None = None) -> list:
    """The configurations' diagnoses that the evaluators' compile_later threads kept (CompileLater.log), those
    timed after ``since`` (time.monotonic) where given."""
    return [dict(e) for x in _laters(evaluators) for e in list(getattr(x, "log", ()))
            if since is None or e.get("at", 0) >= since]


def _laters(evaluators: list) -> list:
    """The evaluators' compile_later threads (pipeline/compile_later.py), where they have one."""
    return [x for ev in evaluators if (x := getattr(ev.baselines, "later", None)) is not None]


def ahead_timeline(evaluators: list, t0: float) -> str | None:
    """When the pass's references run ahead (reference_start.py) had their worker up, their runs done and their
    timing done, in seconds into the pass (``t0``, time.monotonic): whether they were ready before the candidates'
    builds ended. None without an evaluator in reach or a run ahead in the pass."""
    parts = []
    for what, key in (("workers up", "up"), ("runs done", "ran"), ("timed", "timed")):
        at = sorted(t - t0 for ev in evaluators for t in list(ev.baselines.ahead_times[key]) if t >= t0)
        if at:
            parts.append(f"{what} {len(at)} at {at[0]:.1f}-{at[-1]:.1f} (median {statistics.median(at):.1f})")
    return "; ".join(parts) or None


def idle_waiting(window: tuple[int, int]) -> str | None:
    """Per GPU, the fraction of the time some candidate waited for it while nobody held it, within ``window``
    (CLOCK_MONOTONIC ns), from the hold log (``KBENCH_DEVICE_HOLD_LOG``; None without one)."""
    log = os.environ.get("KBENCH_DEVICE_HOLD_LOG")
    if not log or not Path(log).exists():
        return None
    from hold_overlap import idle_while_waiting, read_holds

    holds = read_holds(log)
    out = []
    for lock in sorted({h["lock"] for h in holds}):
        got = idle_while_waiting([h for h in holds if h["lock"] == lock], window)
        if got["idle_fraction"] is not None:
            out.append(f"{Path(lock).stem[-8:]}: {got['idle_fraction']:.3f} ({got['idle_s']:.1f} of "
                       f"{got['waiting_s']:.1f} s)")
    return ", ".join(out) or None


def build_waves(rows: list) -> str | None:
    """When the pass's builds ended (seconds into the pass) and, of those whose builder's own seconds are known (the
    ``builder`` phase), how many waited for a place in the builder (the build phase less the builder's seconds and
    the worker's start), how long, and when they ended; None where no row has the phase."""
    known = [r for r in rows if (r.get("phases") or {}).get("builder") and "build" in r["phases"]]
    if not known:
        return None

    def span(xs) -> str:
        return f"{min(xs):.1f}-{max(xs):.1f}" if xs else "-"

    # (end in the pass, wait for a place) of each build
    builds = [(r["done_s"] - r["step_s"] + r["phases"]["build"],
               r["phases"]["build"] - r["phases"]["builder"] - r["phases"].get("worker_warmup", 0.0)) for r in known]
    waited = [(end, wait) for end, wait in builds if wait > 1.0]
    return (f"{len(builds)} end {span([end for end, _ in builds])}; {len(waited)} waited for a place "
            f"{span([wait for _, wait in waited])} s, ended {span([end for end, _ in waited])}")


def pass_summary(label: str, rows: list, devices: list[str], wall: float, held: dict | None = None) -> dict:
    """A pass's figures from its rows (``held``: per device, the time its lock was held, where the lock counts it)."""
    held = held or {}
    if not rows:
        return {"pass": label, "devices": devices, "candidates": 0, "wall_s": round(wall, 2)}
    steps = [r["step_s"] for r in rows]
    timed = [r["exclusive_hold_s"] for r in rows if "timing" in (r.get("phases") or {})]
    per_device = {d: [r for r in rows if r["device"] == d] for d in devices}
    idle = {d: round(1 - (held.get(d) if held.get(d) is not None else sum(r["device_hold_s"] for r in rs)) / wall, 3)
            for d, rs in per_device.items()}
    return {"pass": label, "devices": devices, "candidates": len(rows), "wall_s": round(wall, 2),
            "per_minute": round(60 * len(rows) / wall, 2), "step_p50_s": round(pct(steps, .5), 2),
            "step_p95_s": round(pct(steps, .95), 2),
            "device_hold_p50_s": round(statistics.median([r["device_hold_s"] for r in rows]), 3),
            "exclusive_hold_p50_s": round(statistics.median([r["exclusive_hold_s"] for r in rows]), 3),
            "exclusive_hold_timed_p50_s": round(statistics.median(timed), 3) if timed else None,
            "exclusive_hold_sum_s": round(sum(r["exclusive_hold_s"] for r in rows), 2),
            "timing_again_s": round(sum((r.get("phases") or {}).get("timing_again", 0.0) for r in rows), 2),
            "check_p50_s": round(statistics.median([r["check_s"] for r in rows]), 3), "build_waves": build_waves(rows),
            "correct": sum(r["correct"] for r in rows), "flagged": sum(bool(r["flags"]) for r in rows),
            "with_compile": sum(r.get("speedup_compile") is not None for r in rows),
            "per_device": ", ".join(f"{d}: {len(rs)}" for d, rs in per_device.items()),
            "gpu_idle": ", ".join(f"{d}: {v:.2f}" for d, v in idle.items())}


def cross_device(items: list, devices: list[str], cache_dir: Path, seed: int, options: dict, k: int) -> dict:
    """The first ``k`` candidates evaluated once on every device (all devices at once, warm caches): per
    candidate and configuration, how far apart the devices' times are (max / min - 1)."""
    from kbench_env.executors.local import LocalExecutor
    from kbench_env.tasks.suite import resolve_task

    chosen = items[:k]
    exs = [LocalExecutor(device=[d], cache_dir=cache_dir, **options) for d in devices]
    try:
        from concurrent.futures import ThreadPoolExecutor

        def on(ex):
            return [ex.evaluate(resolve_task(t), src, seed) for t, _, src in chosen]

        with ThreadPoolExecutor(len(exs)) as pool:
            per_dev = list(pool.map(on, exs))
    finally:
        for ex in exs:
            ex.close()
    rows = []
    for j, (t, cand, _) in enumerate(chosen):
        for cfg_i, cfg in enumerate(per_dev[0][j].configs):
            ms = [res[j].configs[cfg_i].candidate_ms if len(res[j].configs) > cfg_i else None for res in per_dev]
            if all(m for m in ms):
                rows.append({"task": t, "candidate": cand, "config": cfg.name, "ms": ms,
                             "apart": max(ms) / min(ms) - 1})
    apart = [r["apart"] for r in rows]
    print(f"  cross-device: {len(rows)} timings, apart median {statistics.median(apart):.2%}, "
          f"max {max(apart):.2%}" if rows else "  cross-device: nothing timed", flush=True)
    return {"rows": rows, "median_apart": statistics.median(apart) if apart else None,
            "max_apart": max(apart) if apart else None}


def naive_pass(items: list, device: str, cache_dir: Path, k: int) -> dict:
    """``k`` of the batch's candidates, spread over its tasks, evaluated the naive way (bench/naive_eval.py)."""
    from naive_eval import run_naive

    from kbench_env.tasks.suite import resolve_task

    chosen = items[::max(1, len(items) // k)][:k]
    got = run_naive([(resolve_task(t).source, src) for t, _, src in chosen], device, cache_dir / "naive")
    for (t, cand, _), r in zip(chosen, got["rows"]):
        print(f"  [naive] {t} {cand}: {r['latency_s']:.1f} s, "
              f"{'correct' if r.get('correct') else 'FAILED ' + str(r.get('error') or 'wrong output')}", flush=True)
    lat = [r["latency_s"] for r in got["rows"]]
    return {"pass": f"naive ({len(chosen)}, serial)", "naive": True, "candidates": len(chosen),
            "wall_s": got["wall_s"], "per_minute": got["per_minute"], "step_p50_s": got["latency_p50_s"],
            "step_p95_s": round(pct(lat, .95), 2), "correct": got["correct"],
            "rows": [{"task": t, "candidate": cand, **r} for (t, cand, _), r in zip(chosen, got["rows"])]}


def serve_pass(items: list, devices: list[str], cache_dir: Path, seed: int, timing: str,
               shared_checks: str = "default", backend: str | None = None) -> dict:
    """The batch through ``kbench serve`` on localhost (its /batch endpoint, results streamed), the server on
    the same devices and caches, with a spare worker as in-process: the serving layer's cost against the
    in-process warm pass."""
    import asyncio

    from kbench_env.serving.aclient import AsyncKBenchClient
    from tests.serving_server import TOKEN, ServerProcess

    n = str(len(items))
    srv = ServerProcess("--device", "cuda" if len(devices) > 1 else devices[0],
                        *(["--backend", backend] if backend else []), "--timing", timing, "--queue", n,
                        "--per-client", n, "--max-batch", n, "--workers", n,
                        env={"KBENCH_CACHE": str(cache_dir), "KBENCH_SPARE_WORKER": "1",
                             **({} if shared_checks == "default"
                                else {"KBENCH_SHARED_CHECKS": "1" if shared_checks == "on" else "0"})})

    async def go():
        async with AsyncKBenchClient(srv.url, TOKEN, timeout=3600) as c:
            t0 = time.perf_counter()
            res = await c.evaluate_many([(t, src) for t, _, src in items], seed=seed)
            return time.perf_counter() - t0, res

    try:
        wall, res = asyncio.run(go())
    finally:
        srv.stop()
    ok = sum(bool((r or {}).get("correct")) for r in res)  # a result line says whether it was correct
    print(f"  [served] {len(res)} results in {wall:.1f} s, {ok} correct", flush=True)
    return {"pass": "warm, served", "candidates": len(res), "wall_s": round(wall, 2),
            "per_minute": round(60 * len(res) / wall, 2), "correct": ok}


def report(args, chosen: list, passes: list[dict]) -> str:
    lines = [f"# rl_batch: {sum(len(c) for _, c in chosen)} distinct {args.format}-format candidates over "
             f"{len(chosen)} tasks on {args.device} ({time.strftime('%Y-%m-%d')})", "",
             "Tasks: " + ", ".join(f"{t} ({len(c)})" for t, c in chosen), "",
             "| figure | " + " | ".join(p["pass"] for p in passes) + " |", "|---|" + "---|" * len(passes)]
    figures = [("candidates per minute", "per_minute"), ("batch wall clock (s)", "wall_s"),
               ("step latency p50 (s)", "step_p50_s"), ("step latency p95 (s)", "step_p95_s"),
               ("device hold per candidate, median (s)", "device_hold_p50_s"),
               ("exclusive device hold per candidate (reference timing, timing, plausibility), median (s)",
                "exclusive_hold_p50_s"),
               ("exclusive device hold per timed candidate, median (s)", "exclusive_hold_timed_p50_s"),
               ("exclusive device holds, sum (s)", "exclusive_hold_sum_s"),
               ("of them, timings after a configuration's first (a bound paid, a short run), sum (s)",
                "timing_again_s"),
               ("correctness checks per candidate, median (s)", "check_p50_s"),
               ("builds: when they ended (s into the pass), of them those that waited for a builder's place",
                "build_waves"),
               ("build CPU-seconds, builder and compilers", "build_cpu_s"),
               ("the builder's caches (builder/pch.py)", "builder_caches"),
               ("build CPU-seconds per candidate", "build_cpu_per_candidate_s"),
               ("CPU-seconds of reaped children (getrusage)", "children_cpu_s"),
               ("CPU-seconds of this process, the trusted side (getrusage)", "trusted_cpu_s"),
               ("CPU-seconds of the workers and spares (kbench's cgroup v2 cpu.stat)", "workers_cpu_s"),
               ("workers' CPU-seconds by role, a worker: start (fork, confinement, CUDA, profiler), load, serve "
                "(checks, audit, timing) (sandbox/cpu_tally.py)", "worker_stages"),
               ("CPU-seconds the host's cores were busy (/proc/stat)", "host_cpu_s"),
               ("CPU-seconds per candidate: the host's, of them builds, workers, trusted side, other",
                "cpu_per_candidate"),
               ("correct", "correct"), ("flagged", "flagged"),
               ("candidates with a speedup against torch.compile", "with_compile"),
               ("compiled references timed off the candidates' path: configurations, tasks left, failed (since the "
                "evaluator started); this pass's exclusive holds (pipeline/compile_later.py)", "compile_later"),
               ("reference cache on disk", "reference_cache"),
               ("reference configurations timed (re-timings: not found in memory or on disk)", "reference_timed"),
               ("reference cache invalidated by the drift check", "reference_invalidated"),
               ("calibrations measured again by the drift check", "recalibrations"),
               ("tasks whose reference ran ahead beside the build", "ran_ahead"),
               ("of them, timed there too", "timed_ahead"),
               ("references run ahead: when their workers were up, runs done, timed (s into the pass)",
                "ahead_timeline"),
               ("candidates served by a spare worker", "spares_served"),
               ("candidates per device", "per_device"), ("GPU idle fraction (1 - device hold / wall)", "gpu_idle"),
               ("GPU idle while a candidate waits for it (hold log)", "gpu_idle_waiting")]
    for name, key in figures:
        lines.append(f"| {name} | " + " | ".join(str(p.get(key, "-")) for p in passes) + " |")
    lines += ["", f"Command: `python bench/rl_batch.py --device {args.device} --format {args.format}"
                  f"{f' --backend {args.backend}' if args.backend else ''} --gpus {args.gpus} --tasks {args.tasks} "
                  f"--per-task {args.per_task} --passes {args.passes} --timing {args.timing} "
                  f"--reference-cache {args.reference_cache}"
                  f"{f' --cross {args.cross}' if args.cross else ''}{' --serve' if args.serve else ''}"
                  f"{f' --shared-checks {args.shared_checks}' if args.shared_checks != 'default' else ''}"
                  f"{f' --shared-cap {args.shared_cap}' if args.shared_cap else ''}"
                  f"{f' --ahead-share {args.ahead_share}' if args.ahead_share else ''}"
                  f"{' --no-time-ahead' if args.no_time_ahead else ''}"
                  f"{f' --build-workers {args.build_workers}' if args.build_workers else ''}"
                  f"{f' --in-flight {args.in_flight}' if args.in_flight else ''}"
                  f"{f' --defer-share {args.defer_share}' if args.defer_share else ''}"
                  f"{' --processes' if args.processes else ''}"
                  f"{f' --per-gpu {args.per_gpu}' if args.per_gpu > 1 else ''}"
                  f"{f' --naive {args.naive}' if args.naive else ''}"
                  f"{f' --timings-log {args.timings_log}' if args.timings_log else ''}`"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from kbench_env.pipeline.formats import FORMATS
    from kbench_env.pipeline.formats import resolve as resolve_format

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default=None, help="the Evaluator's backend (default: by format and device: "
                    "cpu or cuda, triton for --format triton)")
    ap.add_argument("--format", default="kernelbench", choices=FORMATS,
                    help="the candidates' action format, held to by the Evaluator (format=): kernelbench "
                         "(load_inline; tasks/solutions/<backend>), fast (extern \"C\" kernels through "
                         "kbench_env.fastpath; fast_<backend>) or triton (GPU only)")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--per-task", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=None, help="cache folder (default: a fresh temporary one: a cold start)")
    ap.add_argument("--timing", default="default", choices=["default", "quick"],
                    help="timing repetitions: the Evaluator's defaults, or few (as kbench run --timing quick; "
                         "the integrity checks are the same)")
    ap.add_argument("--reference-cache", default="default", choices=["default", "on", "off"],
                    help="reference timings on disk (default: the Evaluator's, on for GPUs and off on the CPU)")
    ap.add_argument("--processes", action="store_true", help="the process executor: one process per device, each "
                    "with its own Evaluator (kbench_env/executors/processes.py), instead of one process for all")
    ap.add_argument("--per-gpu", type=int, default=1, help="processes per GPU (with --processes): each its own "
                    "Evaluator and trusted side, the GPU's lock shared between them (checks side by side, each timing "
                    "alone)")
    ap.add_argument("--gpus", type=int, default=1, help="spread the batch over this many GPUs of the host "
                    "(cuda:0 ...), one Evaluator each, as the local executor does")
    ap.add_argument("--passes", default="cold,warm", help="which passes, in order: cold (empty caches), warm (the "
                    "same caches again), steady (empty build cache, the references of the cache folder: a training "
                    "run's steady state, every source new), train (--steps batches through one executor, --gap "
                    "seconds apart, every step's sources new: a trainer's evaluator, its spare workers ready)")
    ap.add_argument("--steps", type=int, default=3, help="the train pass's steps: batches through one executor")
    ap.add_argument("--gap", type=float, default=20.0, help="seconds between the train pass's steps (the policy's "
                    "generation, when the executor's spare workers are started)")
    ap.add_argument("--consecutive", type=int, default=0, help="instead: this many processes one after another on "
                    "one cache folder, each evaluating the batch once (bench/rl_batch_consecutive.py): the "
                    "reference re-timings of each (0 after the first when the reference cache survives)")
    ap.add_argument("--summary-json", default=None, help="also write the passes' summaries here as JSON")
    ap.add_argument("--cross", type=int, default=0, help="then time the first K candidates on every device and "
                    "report how far apart the devices' times are")
    ap.add_argument("--serve", action="store_true", help="then run the batch once more through `kbench serve` on "
                    "localhost (warm caches) and compare its wall clock with the in-process warm pass")
    ap.add_argument("--naive", type=int, default=0, help="then evaluate K of the candidates (spread over the tasks) "
                    "the naive way, one fresh process each, serially (bench/naive_eval.py), beside the passes")
    ap.add_argument("--shared-checks", default="default", choices=["default", "on", "off"], nargs="?", const="on",
                    help="the Evaluator's shared_checks: correctness checks share the device, timing holds it alone "
                         "(default: the Evaluator's, on for GPUs and off on the CPU; the bare flag: on)")
    ap.add_argument("--shared-cap", type=int, default=None, help="checks on a device at once under shared checks "
                    "(machine/shared_device_lock.SHARED_CAP; default: the library's)")
    ap.add_argument("--ahead-share", type=float, default=None, help="the device's memory share of the timed blocks "
                    "set up ahead (pipeline/timing.AHEAD_SHARE; default: the library's)")
    ap.add_argument("--no-time-ahead", action="store_true", help="a reference run ahead beside the build is not "
                    "also timed there (the task's first timing times it): to compare")
    ap.add_argument("--defer-share", type=float, default=None, help="the device's memory share of the kept timed-"
                    "output checks (pipeline/deferred_checks.DEFER_SHARE; default: the library's)")
    ap.add_argument("--build-workers", type=int, default=None, help="builds at once in each evaluator's builder "
                    "(the Evaluator's build_workers; default: the host's cores), to compare: whether fewer at once, "
                    "each with more cores, finish one after another and feed the device sooner")
    ap.add_argument("--in-flight", default=None, help="comma-separated candidates in flight at once for the train "
                    "pass's steps, taken in turn (16,24: steps 1, 3, ... 16, steps 2, 4, ... 24; default: all of a "
                    "step's): with --build-workers at least the largest, an A/B of the builds at once on one host")
    ap.add_argument("--timings-log", default=None, help="append every GPU timing's figures against its bound here "
                    "(JSONL, bench/timing_log.py): why a bound was paid and a candidate timed again")
    ap.add_argument("--out", default=None, help="Markdown report (written also when the run is cut by SIGTERM or "
                    "Ctrl-C); every evaluation is appended beside it to .jsonl as it finishes")
    args = ap.parse_args(argv)
    try:  # the format's backend on this device; a format the device cannot run: one line, no batch
        _, backend = resolve_format(args.format, args.backend, args.device)
    except ValueError as e:
        print(f"rl_batch: {e}", file=sys.stderr)
        return 2
    chosen = pick(catalogue(backend, args.format), args.tasks, args.per_task)
    items = [(t, label, src) for t, cands in chosen for label, src in cands]
    if not items:
        print(f"rl_batch: no {args.format}-format candidates for the {backend} backend (looked under "
              f"tasks/solutions/{candidates_folder(args.format, backend)} and "
              f"bench/data/rl_batch/{candidates_folder(args.format, backend)})", file=sys.stderr)
        return 2
    print(f"rl_batch: {len(items)} distinct {args.format}-format candidates over {len(chosen)} tasks on "
          f"{args.device}", flush=True)
    cache = Path(args.cache_dir or tempfile.mkdtemp(prefix="kbench-rl-batch-"))
    from kbench_apps.runner import TIMING_PRESETS

    options = {}
    if TIMING_PRESETS[args.timing]:
        options["timing"] = TIMING_PRESETS[args.timing]
    if args.reference_cache != "default":
        options["reference_cache"] = args.reference_cache == "on"
    if args.shared_checks != "default":
        options["shared_checks"] = args.shared_checks == "on"
    if args.shared_cap:
        from kbench_env.machine import shared_device_lock

        shared_device_lock.SHARED_CAP = args.shared_cap
    if args.ahead_share:
        from kbench_env.pipeline import timing

        timing.AHEAD_SHARE = args.ahead_share
    if args.no_time_ahead:
        from kbench_env.pipeline import reference_start

        reference_start.TIMES_AHEAD = False
    if args.defer_share:
        from kbench_env.pipeline import deferred_checks

        deferred_checks.DEFER_SHARE = args.defer_share
    if args.build_workers:
        options["build_workers"] = args.build_workers
    if args.timings_log:
        from timing_log import install

        install(args.timings_log)
    options["backend"], options["format"] = backend, args.format
    if args.consecutive:
        from rl_batch_consecutive import consecutive

        return consecutive(args, argv if argv is not None else sys.argv[1:], cache)
    if args.per_gpu > 1 and not args.processes:
        ap.error("--per-gpu needs --processes (several trusted processes share a GPU only through the process "
                 "executor)")
    run = Run(args, chosen, items, devices_for(args.device, args.gpus, args.per_gpu), options)
    signal.signal(signal.SIGTERM, run.cut)
    signal.signal(signal.SIGINT, run.cut)
    try:
        return run.all(cache)
    except KeyboardInterrupt:
        return 130


class Run:
    """One invocation: its passes in order, each summary logged as it is made, the report written at the end or,
    cut by SIGTERM or Ctrl-C, at once from what had finished."""

    def __init__(self, args, chosen: list, items: list, devices: list[str], options: dict):
        self.args, self.chosen, self.items, self.devices, self.options = args, chosen, items, devices, options
        self.out = Path(args.out) if args.out else None
        self.log = RowLog(self.out.with_suffix(".jsonl") if self.out else None)
        self.log.record({"run": vars(args), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                         "candidates": len(items)})
        self.passes, self.extra, self.label, self.t0 = [], [], None, 0.0

    @contextmanager
    def stage(self, label: str):
        self.label, self.t0 = label, time.perf_counter()
        try:
            yield
        finally:
            self.label = None

    def add(self, summary: dict) -> dict:
        """A finished pass: into the log (with its rows, where it has them of its own) and the report."""
        self.log.record({"summary": summary})
        summary.pop("rows", None)
        self.passes.append(summary)
        return summary

    def all(self, cache: Path) -> int:
        """The passes ``--passes`` names, then the served pass, the naive way and the cross-device timings."""
        a, items = self.args, self.items
        for label in [p for p in a.passes.split(",") if p]:
            where, options = cache, self.options
            if label == "train":  # a training run's steps: one executor, every step's sources new
                self.train(cache)
                continue
            if label == "steady":  # a training run's steady state: references timed (the cold pass's), builds not
                where = Path(tempfile.mkdtemp(prefix="kbench-rl-steady-"))
                options = {**options, "reference_cache": str(cache / "reference")}
            with self.stage(label):
                self.add(run_pass(label, items, self.devices, where, a.seed, options, self.log,
                                  processes=a.processes))
        if a.serve:
            warm = next((p for p in self.passes if p["pass"] == "warm"), self.passes[-1])
            with self.stage("warm, served"):
                served = self.add(serve_pass(items, self.devices, cache, a.seed, a.timing, a.shared_checks,
                                             self.options["backend"]))
            self.extra.append(f"Through HTTP (`kbench serve`, /batch, the same devices and caches): "
                              f"{served['wall_s']} s against {warm['wall_s']} s in-process "
                              f"({served['wall_s'] / warm['wall_s'] - 1:+.1%}), {served['correct']} of "
                              f"{served['candidates']} correct."
                              + ("" if a.format == "kernelbench" else " The server holds candidates to its own "
                                 "format, kernelbench, which accepts fast-path and Triton kernels too (kbench serve "
                                 "has no --format)."))
        if a.naive:
            with self.stage("naive"):
                self.add(naive_pass(items, self.devices[0], cache, a.naive))
        if a.cross:
            cross = cross_device(items, self.devices, cache, a.seed, self.options, a.cross)
            self.log.record({"cross_device": cross})
            if cross["rows"]:
                self.extra.append(f"The same candidates on every device ({len(self.devices)}): "
                                  f"{len(cross['rows'])} configuration timings, devices apart by "
                                  f"{cross['median_apart']:.2%} median, {cross['max_apart']:.2%} at most (max / min "
                                  "- 1 of the candidate's time).")
        self.write()
        return 0 if all(p["candidates"] == len(items) for p in self.passes if not p.get("naive")) else 1

    def train(self, cache: Path) -> None:
        """``--steps`` batches through one executor, ``--gap`` seconds apart (a policy's generation), each batch's
        sources made new (``step_source``): what a trainer's evaluator sees from its second step on, its spare
        workers refilled between steps to the last batch's peak, the references in memory (from the cache folder's
        reference cache at the first step, where the cold pass kept one), every build cold (an empty build folder)."""
        a = self.args
        in_flight = [int(n) for n in a.in_flight.split(",") if n] if a.in_flight else []
        where = Path(tempfile.mkdtemp(prefix="kbench-rl-train-"))
        options = dict(self.options)
        if (cache / "reference").is_dir():  # (the cold pass kept its references: on a GPU by default)
            options["reference_cache"] = str(cache / "reference")
        ex = make_executor(self.devices, where, options, a.processes)
        try:
            for k in range(1, a.steps + 1):
                if k > 1:
                    time.sleep(a.gap)
                items = [(t, cand, step_source(src, k)) for t, cand, src in self.items]
                flying = in_flight[(k - 1) % len(in_flight)] if in_flight else None
                label = f"train {k}" + (f" ({flying} in flight)" if flying else "")
                with self.stage(label):
                    self.add(run_pass(label, items, self.devices, where, a.seed, options, self.log,
                                      processes=a.processes, executor=ex, in_flight=flying))
        finally:
            ex.close()

    def write(self, note: str = "") -> None:
        text = (report(self.args, self.chosen, self.passes) + "".join(f"\n{e}\n" for e in self.extra)
                + (f"\n{note}\n" if note else ""))
        print(text, flush=True)
        if self.out:
            self.out.write_text(text)
        if self.args.summary_json:
            Path(self.args.summary_json).write_text(json.dumps(self.passes, default=str, indent=1))

    def cut(self, signum, frame):
        """A time limit or Ctrl-C: the report of what finished, then unwind (a second signal ends the process)."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        done = [r for r in self.log.rows if r["pass"] == self.label]
        if self.label is not None:
            self.passes.append(pass_summary(f"{self.label} (cut)", done, self.devices, time.perf_counter() - self.t0))
        self.write(f"Cut by signal {signum} ({signal.Signals(signum).name}) during the {self.label or 'closing'} "
                   f"pass: its figures count only the {len(done)} evaluations it had finished.")
        raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

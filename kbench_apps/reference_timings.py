"""``kbench baseline``: a suite's reference timings (eager, and torch.compile where the evaluator times it) measured
ahead of time into the reference cache (kbench_env/pipeline/reference_cache.py), so that the first candidate of
each task in later runs does not pay for them. One line per task shows progress; every configuration is stored
as soon as it is timed, so a killed run, run again, times only what is missing (``cached`` counts what it found).

The timings are keyed by the evaluator's settings: precompute with the ``--timing`` preset the runs will use.
"""

from __future__ import annotations

import time

from kbench_apps.runner import TIMING_PRESETS
from kbench_env.config import environ
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.precompute import time_reference
from kbench_env.tasks.suite import load_suite


def cmd_baseline(args) -> int:
    timing = TIMING_PRESETS.get(args.timing)
    env = environ.get("KBENCH_REFERENCE_CACHE")
    folder = args.cache or (env if isinstance(env, str) else None)
    ev = Evaluator(device=args.device, backend=args.backend, spare_worker=False, reference_cache=folder or True,
                   **({"timing": timing} if timing else {}))
    try:
        tasks = load_suite(args.suite, dtype=args.dtype)
        root = ev.baselines.disk_root
        print(f"kbench baseline: {len(tasks)} tasks of {args.suite!r} on {ev.device} ({ev.backend_name} backend, "
              f"torch.compile baseline {'on' if ev.compile_baseline else 'off'}) into {root}", flush=True)
        totals = {"timed": 0, "cached": 0, "skipped": 0}
        for n, task in enumerate(tasks, 1):
            t0 = time.perf_counter()
            try:
                timed, cached = time_reference(ev.baselines, ev.device_hold(), task, args.seed)
            except ValueError as exc:  # no configuration for this device (TaskError)
                totals["skipped"] += 1
                print(f"[{n}/{len(tasks)}] {task.name}: skipped ({exc})", flush=True)
                continue
            totals["timed"] += timed
            totals["cached"] += cached
            print(f"[{n}/{len(tasks)}] {task.name}: {timed} configurations timed, {cached} cached "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
        if ev.baselines.disk is not None:
            d = ev.baselines.disk
            drift = f"; the calibration had drifted ({'; '.join(d.drift)}), so older entries were dropped" \
                if d.drift else ""
            print(f"done: {totals['timed']} timed, {totals['cached']} cached, {totals['skipped']} tasks skipped; "
                  f"machine {d.machine_id}, epoch {d.epoch}{drift}", flush=True)
        if ev.device == "cpu":
            print("note: evaluators on the CPU read this cache only with reference_cache=True or "
                  "KBENCH_REFERENCE_CACHE=1 (off by default there: see Evaluator)", flush=True)
    finally:
        ev.close()
    return 0


def add_parser(sub, device_help: str, dtype_arg: dict, formatter=None) -> None:
    b = sub.add_parser("baseline", help="precompute a suite's reference timings into the reference cache",
                       **({"formatter_class": formatter} if formatter else {}))
    b.add_argument("--suite", default="default", help="suite name, level, folder, file or comma list")
    b.add_argument("--device", default="auto", help=device_help)
    b.add_argument("--backend", default=None, help="cpu, cuda or triton (default from the device)")
    b.add_argument("--timing", default="default", choices=sorted(TIMING_PRESETS),
                   help="the timing preset the runs that will read these timings use (part of the key)")
    b.add_argument("--cache", default=None, help="reference cache folder (default <cache dir>/reference, or "
                                                 "$KBENCH_REFERENCE_CACHE when that is a folder)")
    b.add_argument("--seed", type=int, default=0, help="seed of the inputs the references are timed on")
    b.add_argument("--dtype", **dtype_arg)
    b.set_defaults(fn=cmd_baseline)

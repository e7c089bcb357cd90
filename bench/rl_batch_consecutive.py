"""``rl_batch.py --consecutive N``: N processes one after another on one machine and one cache folder, each
evaluating the batch once, as N training runs (or restarts) would; per process, the reference configurations it
timed (a re-timing: not found in memory or on disk), whether its drift check invalidated the reference cache, the
calibrations it measured again, and its rate. The first process fills the caches; when the reference cache
survives, the others time nothing (issue #36's target: 0 re-timings in 5 consecutive processes).

Ends with the stored calibration of each machine id under the cache (its epoch, and per figure the spread of its
rounds: how repeatable a GPU's calibration is, backends/gpu_calibration.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child_argv(argv: list[str], cache: Path, summary: Path, i: int) -> list[str]:
    """rl_batch's own arguments less --consecutive, --out and --cache-dir and --passes, for process ``i``."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("--consecutive", "--out", "--cache-dir", "--passes", "--summary-json"):
            skip = "=" not in arg
            continue
        out.append(arg)
    return [sys.executable, str(HERE / "rl_batch.py"), *out, "--cache-dir", str(cache), "--passes", f"process{i}",
            "--summary-json", str(summary)]


def calibrations(cache: Path) -> list[dict]:
    """Each machine id's stored calibration under ``cache``: epoch, figures, and per figure the spread of its
    rounds ((max - min) / median), where the calibration kept them."""
    rows = []
    for path in sorted((cache / "reference").glob("*/calibration.json")):
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        cal = stored.get("calibration") or {}
        spread = {}
        for name, vals in (cal.get("rounds") or {}).items():
            vals = sorted(vals)
            if vals:
                spread[name] = round((vals[-1] - vals[0]) / vals[len(vals) // 2], 4)
        rows.append({"machine": path.parent.name, "epoch": stored.get("epoch"), "bandwidth": cal.get("bandwidth"),
                     "flops": cal.get("flops"), "graph_gap_ms": cal.get("graph_gap_ms"),
                     "measurements": cal.get("measurements", 1), "round_spread": spread})
    return rows


def consecutive(args, argv: list[str], cache: Path) -> int:
    """Run the processes, print and write (``--out``) the table; exit status 1 if a process failed."""
    rows, failed = [], 0
    for i in range(1, args.consecutive + 1):
        summary = Path(tempfile.mkstemp(prefix=f"kbench-consecutive-{i}-", suffix=".json")[1])
        t0 = time.perf_counter()
        print(f"rl_batch --consecutive: process {i} of {args.consecutive}", flush=True)
        rc = subprocess.run(_child_argv(argv, cache, summary, i), check=False).returncode
        try:
            passes = json.loads(summary.read_text() or "[]")
        except (OSError, ValueError):
            passes = []
        p = passes[0] if passes else {}
        rows.append({"process": i, "rc": rc, "wall_s": round(time.perf_counter() - t0, 1),
                     "candidates": p.get("candidates"), "correct": p.get("correct"),
                     "per_minute": p.get("per_minute"), "reference_timed": p.get("reference_timed"),
                     "reference_invalidated": p.get("reference_invalidated"),
                     "recalibrations": p.get("recalibrations")})
        failed += rc != 0
    cals = calibrations(cache)
    lines = [f"# rl_batch --consecutive {args.consecutive}: {args.format} format, {args.tasks} tasks x "
             f"{args.per_task} on {args.device} ({time.strftime('%Y-%m-%d')}), one cache folder", "",
             "| process | exit | wall (s) | candidates | correct | per minute | reference configurations timed | "
             "invalidated | calibrations measured again |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['process']} | {r['rc']} | {r['wall_s']} | {r['candidates']} | {r['correct']} | "
                     f"{r['per_minute']} | {r['reference_timed']} | {r['reference_invalidated']} | "
                     f"{r['recalibrations']} |")
    later = [r["reference_timed"] for r in rows[1:]]
    lines += ["", f"Re-timings after the first process: {sum(x or 0 for x in later)} "
                  f"({', '.join(str(x) for x in later) or '-'})", "", "Stored calibrations:"]
    lines += [f"- {c['machine']}: epoch {c['epoch']}, best of {c['measurements']} measurement(s); "
              f"bandwidth {c['bandwidth']:.4g} B/s, flops {c['flops']}, graph gap {c['graph_gap_ms']} ms; "
              f"spread of the rounds {c['round_spread']}" for c in cals if c.get("bandwidth")]
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text)
        with open(Path(args.out).with_suffix(".jsonl"), "a") as f:
            f.write(json.dumps({"consecutive": rows, "calibrations": cals}, default=str) + "\n")
    return 1 if failed else 0

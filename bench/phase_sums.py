"""Where a trainer step's time went, from bench/rl_batch.py's rows and the device-hold log: per pass, each phase
(``phases`` of a row: kbench_env/pipeline/result.py) summed over the candidates, with its median and largest; per
stretch of the hold log (the steps: runs of holds with no gap of ``--gap`` seconds between them), the time the
device was held alone (timings), held only shared (checks and set-ups ahead: no timing could run) and its longest
shared stretches with when they began. A step's wall time is about its exclusive holds plus its shared-only
stretches (the hold log shows no overlap of the two); the longest shared stretches are what kept timings waiting.
The time between one timing's end and the next's start is split by the next timing's wait for the device (the
log's "wait" of the same thread, ending as its hold began): before the wait began no candidate had asked to be
timed (its checks and set-ups were not done); after, a timing waited for the shared holders to leave.

    python bench/phase_sums.py runs/rl_batch_fast_train.jsonl                      # every pass's phases
    python bench/phase_sums.py rows.jsonl --holds runs/holds_steady.jsonl --pass "train 2" --top 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hold_overlap import _length, _union, read_holds  # noqa: E402 - bench/'s own module, beside this one


def read_rows(path) -> list[dict]:
    """The rows of candidates (those with a ``pass``), a torn line skipped."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "pass" in row:
            rows.append(row)
    return rows


def phase_sums(rows: list[dict]) -> dict:
    """Per pass: {"candidates": n, "phases": {phase: {"n", "sum", "median", "max"}}}, phases by their sum, largest
    first."""
    out = {}
    for name in dict.fromkeys(r["pass"] for r in rows):
        got = defaultdict(list)
        mine = [r for r in rows if r["pass"] == name]
        for r in mine:
            for phase, seconds in (r.get("phases") or {}).items():
                if isinstance(seconds, (int, float)):
                    got[phase].append(float(seconds))
        phases = {p: {"n": len(v), "sum": sum(v), "median": statistics.median(v), "max": max(v)}
                  for p, v in sorted(got.items(), key=lambda kv: -sum(kv[1]))}
        out[name] = {"candidates": len(mine), "phases": phases}
    return out


def stretches(holds: list[dict], gap_s: float = 2.0, top: int = 5) -> list[dict]:
    """The hold log cut where nothing was held for ``gap_s`` seconds (a trainer's steps), each with its span, the
    device held alone and held only shared (seconds), and its ``top`` longest shared-only stretches (start into
    the stretch, seconds)."""
    held = [h for h in holds if h.get("mode") in ("exclusive", "shared")]
    if not held:
        return []
    t0 = min(h["start_ns"] for h in held)
    out = []
    for lo, hi in stretch_bounds(held, gap_s):
        inside = [h for h in held if lo <= h["start_ns"] < hi]
        alone = _union([(h["start_ns"], h["end_ns"]) for h in inside if h["mode"] == "exclusive"])
        shared = _union([(h["start_ns"], h["end_ns"]) for h in inside if h["mode"] == "shared"])
        only = _minus(shared, alone)
        longest = sorted(only, key=lambda s: s[0] - s[1])[:top]
        out.append({"start_s": (lo - t0) / 1e9, "span_s": (hi - lo) / 1e9, "alone_s": _length(alone) / 1e9,
                    "shared_only_s": _length(only) / 1e9, "shared_only_stretches": len(only),
                    "longest_shared_only": [((a - lo) / 1e9, (b - a) / 1e9) for a, b in longest],
                    **between_timings(holds, lo, hi)})
    return out


def stretch_bounds(holds: list[dict], gap_s: float = 2.0) -> list[tuple[int, int]]:
    """(start, end) in ns of each run of holds (shared or exclusive) with no gap of ``gap_s`` seconds between them."""
    out: list = []
    for a, b in _union([(h["start_ns"], h["end_ns"]) for h in holds if h.get("mode") in ("exclusive", "shared")]):
        if out and a - out[-1][1] <= gap_s * 1e9:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


#: How far a wait's logged end may be from its exclusive hold's start (ns): the wait is logged once the lock is
#: taken, a few microseconds after the hold's own start.
WAIT_MATCH_NS = 5_000_000


def waits_by_thread(holds: list[dict]) -> dict:
    """The log's waits for the device, by (pid, thread)."""
    waits = defaultdict(list)
    for h in holds:
        if h.get("mode") == "wait":
            waits[(h.get("pid"), h.get("thread"))].append(h)
    return waits


def wait_start(hold: dict, waits: dict) -> int | None:
    """When the exclusive ``hold``'s thread began waiting for it (ns): its wait that ended as the hold began
    (device_hold.py logs the wait once the lock is taken); None where none was logged (the trusted side's holds)."""
    mine = [w["start_ns"] for w in waits.get((hold.get("pid"), hold.get("thread")), ())
            if abs(w["end_ns"] - hold["start_ns"]) <= WAIT_MATCH_NS]
    return min(mine) if mine else None


def between_timings(holds: list[dict], lo: int, hi: int) -> dict:
    """The gaps between consecutive exclusive holds starting in [lo, hi): their count and seconds, split into
    ``not_asked_s`` (no timing waited yet), ``draining_s`` (the next timing waited for shared holders to leave) and
    ``unmatched_s`` (an exclusive hold with no wait of its thread logged: the trusted side's own holds)."""
    ex = sorted((h for h in holds if h.get("mode") == "exclusive" and lo <= h["start_ns"] < hi),
                key=lambda h: h["start_ns"])
    waits = waits_by_thread(holds)
    got = {"gaps": 0, "between_s": 0.0, "not_asked_s": 0.0, "draining_s": 0.0, "unmatched_s": 0.0}
    for prev, h in zip(ex, ex[1:]):
        a, b = prev["end_ns"], h["start_ns"]
        if b <= a:
            continue
        got["gaps"] += 1
        got["between_s"] += (b - a) / 1e9
        asked = wait_start(h, waits)
        if asked is None:
            got["unmatched_s"] += (b - a) / 1e9
            continue
        asked = max(a, min(b, asked))
        got["not_asked_s"] += (asked - a) / 1e9
        got["draining_s"] += (b - asked) / 1e9
    return got


def _minus(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``spans`` (disjoint, sorted) outside every interval of ``cut`` (disjoint, sorted)."""
    out = []
    for a, b in spans:
        for c, d in cut:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", help="bench/rl_batch.py's rows (JSONL)")
    ap.add_argument("--holds", help="the device-hold log of the same run (KBENCH_DEVICE_HOLD_LOG)")
    ap.add_argument("--pass", dest="only", help="one pass only (e.g. 'train 2')")
    ap.add_argument("--top", type=int, default=0, help="phases shown per pass (default: all)")
    ap.add_argument("--gap", type=float, default=2.0, help="seconds with nothing held that end a stretch")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    sums = phase_sums(read_rows(a.rows))
    if a.only:
        sums = {k: v for k, v in sums.items() if k == a.only}
    held = stretches(read_holds(a.holds), a.gap) if a.holds else []
    if a.json:
        print(json.dumps({"passes": sums, "stretches": held}, indent=1))
        return 0
    for name, p in sums.items():
        print(f"{name}: {p['candidates']} candidates")
        for phase, f in list(p["phases"].items())[:a.top or None]:
            print(f"  {phase:32s} n={f['n']:4d} sum={f['sum']:9.3f} median={f['median']:8.3f} max={f['max']:8.3f}")
    for i, s in enumerate(held, 1):
        print(f"stretch {i} at {s['start_s']:.1f} s: {s['span_s']:.2f} s, held alone {s['alone_s']:.2f} s, "
              f"held only shared {s['shared_only_s']:.2f} s in {s['shared_only_stretches']}; longest shared only: "
              + ", ".join(f"{d:.2f} s at {t:.1f}" for t, d in s["longest_shared_only"]))
        print(f"  between timings: {s['gaps']} gaps, {s['between_s']:.2f} s: no timing asked {s['not_asked_s']:.2f} s, "
              f"a timing waiting for shared holders to leave {s['draining_s']:.2f} s, no wait logged "
              f"{s['unmatched_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

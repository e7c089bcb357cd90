"""Did any exclusive hold of a GPU overlap another hold of the same GPU? Read from a device-hold log.

With ``KBENCH_DEVICE_HOLD_LOG=<file>`` every process's device locks append each hold of a GPU's lock file as it
ends (kbench_env/machine/device_lock.py ``log_hold``): lock file (one per physical GPU), mode (exclusive: a candidate's checks
and timing, reference timing, plausibility; shared: correctness checks under ``shared_checks``), pid, thread, and
start and end on CLOCK_MONOTONIC. A logged hold lies inside the real one (logged after the ``flock`` is had and
before it is dropped), so an overlap found here is a real one; GPU work done outside the lock (a worker's start)
is not in the log, which is what a profiler's trace would add.

Per GPU and mode it also lists the longest holds with when they began and who held them (``longest``): a hold that
kept every timing waiting, and its thread's other holds in the log, say which work it was.

The log also has the candidates' waits for a GPU (mode ``wait``, kbench_env/pipeline/device_hold.py: from asking
for the lock to having it): ``idle_while_waiting`` is the time some candidate waited while nobody held the GPU,
over the time some candidate waited (the scheduler's loss: a device left idle while work was queued for it).

    python bench/hold_overlap.py runs/holds.jsonl          # a table per GPU; exit 1 if an exclusive hold overlapped
    python bench/hold_overlap.py runs/holds.jsonl --json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def read_holds(path) -> list[dict]:
    """The log's holds, in the order written; a torn last line (a process killed mid-write) is skipped."""
    holds = []
    for line in Path(path).read_text().splitlines():
        try:
            h = json.loads(line)
        except json.JSONDecodeError:
            continue
        if {"lock", "mode", "start_ns", "end_ns"} <= set(h):
            holds.append(h)
    return holds


def overlaps(holds: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs (exclusive hold, another hold of the same lock file) whose times intersect."""
    found = []
    by_lock = defaultdict(list)
    for h in holds:
        if h["mode"] != "wait":  # a wait holds nothing
            by_lock[h["lock"]].append(h)
    for group in by_lock.values():
        group.sort(key=lambda h: h["start_ns"])
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if b["start_ns"] >= a["end_ns"]:
                    break
                if "exclusive" in (a["mode"], b["mode"]):
                    found.append((a, b) if a["mode"] == "exclusive" else (b, a))
    return found


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(intervals: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in intervals)


def idle_while_waiting(group: list[dict], window: tuple[int, int] | None = None) -> dict:
    """One GPU's records: seconds some candidate waited (``waiting_s``), of them with no holder at all
    (``idle_s``), and their ratio (``idle_fraction``; None without waits); within ``window`` (ns) if given."""
    lo, hi = window or (-(1 << 62), 1 << 62)

    def clip(h):
        return max(h["start_ns"], lo), min(h["end_ns"], hi)

    waits = _union([c for c in map(clip, (h for h in group if h["mode"] == "wait")) if c[0] < c[1]])
    held = _union([c for c in map(clip, (h for h in group if h["mode"] != "wait")) if c[0] < c[1]])
    idle, j = 0, 0
    for a, b in waits:  # the waits' time not covered by any hold
        covered = 0
        while j < len(held) and held[j][1] <= a:
            j += 1
        k = j
        while k < len(held) and held[k][0] < b:
            covered += min(b, held[k][1]) - max(a, held[k][0])
            k += 1
        idle += (b - a) - covered
    waiting = _length(waits)
    return {"waiting_s": round(waiting / 1e9, 3), "idle_s": round(idle / 1e9, 3),
            "idle_fraction": round(idle / waiting, 4) if waiting else None}


def summary(holds: list[dict]) -> dict:
    """Per lock file: holds by mode, seconds held, the span from first start to last end, and the overlaps."""
    out = {}
    bad = overlaps(holds)
    for lock in sorted({h["lock"] for h in holds}):
        everything = [h for h in holds if h["lock"] == lock]
        group = [h for h in everything if h["mode"] != "wait"]
        span = (max(h["end_ns"] for h in everything) - min(h["start_ns"] for h in everything)) / 1e9
        out[lock] = {
            "exclusive": sum(h["mode"] == "exclusive" for h in group),
            "shared": sum(h["mode"] == "shared" for h in group),
            "processes": len({h.get("pid") for h in group}),
            "held_s": round(sum(h["end_ns"] - h["start_ns"] for h in group) / 1e9, 3),
            "busy_s": round(_length(_union([(h["start_ns"], h["end_ns"]) for h in group])) / 1e9, 3),
            "span_s": round(span, 3),
            "overlaps": sum(1 for a, _ in bad if a["lock"] == lock),
            "waits": sum(h["mode"] == "wait" for h in everything),
            **idle_while_waiting(everything),
        }
    return out


def longest(holds: list[dict], n: int = 5) -> dict:
    """Per lock file and mode (exclusive, shared), its ``n`` longest holds, longest first: seconds, start in seconds
    from the log's first start on that lock, pid and thread (which holder kept every timing waiting, and when)."""
    out = {}
    for lock in sorted({h["lock"] for h in holds}):
        mine = [h for h in holds if h["lock"] == lock]
        t0 = min(h["start_ns"] for h in mine)
        out[lock] = {
            mode: [{"s": round((h["end_ns"] - h["start_ns"]) / 1e9, 3), "at_s": round((h["start_ns"] - t0) / 1e9, 1),
                    "pid": h.get("pid"), "thread": h.get("thread")}
                   for h in sorted((h for h in mine if h["mode"] == mode),
                                   key=lambda h: h["start_ns"] - h["end_ns"])[:n]]
            for mode in ("exclusive", "shared")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the KBENCH_DEVICE_HOLD_LOG file")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    holds = read_holds(args.log)
    table = summary(holds)
    if args.json:
        print(json.dumps(table, indent=1))
    else:
        print(f"{len(holds)} holds in {args.log}")
        for lock, row in table.items():
            print(f"  {Path(lock).name}: {row['exclusive']} exclusive, {row['shared']} shared, "
                  f"{row['processes']} process(es), held {row['held_s']:.1f} s (busy {row['busy_s']:.1f} s) of "
                  f"{row['span_s']:.1f} s, overlaps with an exclusive hold: {row['overlaps']}; {row['waits']} waits, "
                  f"idle {row['idle_s']:.1f} s of {row['waiting_s']:.1f} s with a candidate waiting"
                  f" ({row['idle_fraction'] if row['idle_fraction'] is not None else '-'})")
        for lock, modes in longest(holds).items():
            for mode, top in modes.items():
                if top:
                    print(f"    longest {mode}: " + ", ".join(
                        f"{h['s']:.2f} s at {h['at_s']:.1f} s (pid {h['pid']} thread {h['thread']})" for h in top))
    return 1 if any(row["overlaps"] for row in table.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""A picture of one trainer step's device holds (PNG): when each timing asked for the device, when it had it, and
what held the device between timings; from the device-hold log (KBENCH_DEVICE_HOLD_LOG, bench/rl_batch.py's runs).

The top lane is the device: held alone (a timing), held only shared (checks and set-ups ahead, no timing could run),
or held by nobody. Below it, one lane per thread that held the device alone, in the order of its first timing: its
wait for the device (from when it asked) and its exclusive hold. A gap on the device lane with no waiting thread
below it is time in which no candidate was ready to be timed (bench/phase_sums.py's "no timing asked"); a wait that
starts before the gap is a timing held back by the shared holders leaving.

    python bench/hold_timeline.py runs/holds_steady.jsonl --stretch 3 --out step2.png   # the third stretch
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hold_overlap import _union, read_holds  # noqa: E402 - bench/'s own modules, beside this one
from phase_sums import _minus, stretch_bounds, wait_start, waits_by_thread  # noqa: E402


def lanes(holds: list[dict], lo: int, hi: int) -> dict:
    """What the picture draws, in seconds from ``lo``: ``device`` {"alone", "shared_only"} spans, and per thread that
    held the device alone in [lo, hi) (in the order of its first hold) its ``waits`` and ``holds``."""
    inside = [h for h in holds if lo <= h["start_ns"] < hi]
    alone = _union([(h["start_ns"], h["end_ns"]) for h in inside if h.get("mode") == "exclusive"])
    shared = _union([(h["start_ns"], h["end_ns"]) for h in inside if h.get("mode") == "shared"])

    def s(span):
        return ((span[0] - lo) / 1e9, (span[1] - lo) / 1e9)

    threads: dict = {}
    waits = waits_by_thread(holds)
    for h in sorted((h for h in inside if h.get("mode") == "exclusive"), key=lambda h: h["start_ns"]):
        lane = threads.setdefault((h.get("pid"), h.get("thread")), {"waits": [], "holds": []})
        lane["holds"].append(s((h["start_ns"], h["end_ns"])))
        asked = wait_start(h, waits)
        if asked is not None:
            lane["waits"].append(s((asked, h["start_ns"])))
    return {"span_s": (hi - lo) / 1e9, "device": {"alone": [s(x) for x in alone],
                                                   "shared_only": [s(x) for x in _minus(shared, alone)]},
            "threads": list(threads.values())}


def draw(got: dict, out: Path, title: str = "") -> None:
    """``lanes``' figures as a PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    n = len(got["threads"])
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.22 * (n + 2)))

    def bars(y, spans, color, label=None):
        ax.broken_barh([(a, b - a) for a, b in spans], (y - 0.4, 0.8), facecolors=color, label=label)

    bars(n + 1, got["device"]["alone"], "tab:red", "held alone (a timing)")
    bars(n + 1, got["device"]["shared_only"], "tab:blue", "held only shared (checks, set-ups ahead)")
    for i, lane in enumerate(got["threads"]):
        y = n - i
        bars(y, lane["waits"], "0.8", "a timing waiting for the device" if i == 0 else None)
        bars(y, lane["holds"], "tab:red")
    ax.set_yticks([n + 1] + [n - i for i in range(n)], ["device"] + [f"thread {i + 1}" for i in range(n)],
                  fontsize=6)
    ax.set_xlim(0, got["span_s"])
    ax.set_xlabel("seconds into the stretch")
    ax.set_title(title or "device holds", fontsize=9)
    ax.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("holds", help="the device-hold log (JSONL)")
    ap.add_argument("--stretch", type=int, default=0, help="which stretch (1 = the first; default: the last)")
    ap.add_argument("--gap", type=float, default=2.0, help="seconds with nothing held that end a stretch")
    ap.add_argument("--out", required=True, help="the PNG to write")
    a = ap.parse_args(argv)
    holds = read_holds(a.holds)
    bounds = stretch_bounds(holds, a.gap)
    if not bounds:
        print("no holds in the log", file=sys.stderr)
        return 1
    k = a.stretch - 1 if a.stretch else len(bounds) - 1
    if not 0 <= k < len(bounds):
        print(f"the log has {len(bounds)} stretches", file=sys.stderr)
        return 1
    got = lanes(holds, *bounds[k])
    draw(got, Path(a.out), f"{Path(a.holds).name}, stretch {k + 1} of {len(bounds)}: {got['span_s']:.1f} s, "
                           f"{len(got['threads'])} threads timed")
    print(f"{a.out}: stretch {k + 1} of {len(bounds)}, {got['span_s']:.1f} s, {len(got['threads'])} threads timed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

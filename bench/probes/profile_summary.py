"""What the trusted process's threads spend their time on, from a py-spy profile in its folded ("raw") form
(bench/gpu_session.sh steady with PROFILE=idle or PROFILE=gil): per function, the samples of the stacks it is in
(inclusive, each stack counted once per function) and those it is the leaf of (self), over every thread; which
threads they are (by name, the thread ids dropped).

    python bench/probes/profile_summary.py profile.txt                 # the top 40 functions
    python bench/probes/profile_summary.py profile.txt --under time_gpu --top 25   # only stacks through time_gpu

With PROFILE=idle a sample is a thread's wall time (waiting included): inclusive samples over the run's samples per
thread say where the candidates' threads wait. With PROFILE=gil a sample is the thread that held the interpreter:
their sum over the samples the run took says how busy the interpreter was.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def read(path) -> list[tuple[str, list[str], int]]:
    """(thread name, frames from the root, samples) per folded line."""
    out = []
    for line in Path(path).read_text().splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        frames = m["stack"].split(";")
        thread = re.sub(r"^thread \(\d+\):? ?", "", frames[0]) if frames[0].startswith("thread") else ""
        body = frames[1:] if frames[0].startswith("thread") else frames
        thread = (body[0] if not thread and body else thread) or "?"
        out.append((re.sub(r"[-_ ]?\d+$|\(.*\)$", "", thread).strip() or thread, body, int(m["count"])))
    return out


def function(frame: str) -> str:
    """``name (file.py:line)`` without its line: one function, wherever in it the sample fell."""
    return re.sub(r":\d+\)$", ")", frame)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--under", default=None, help="only the stacks through a function whose name holds this text")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args(argv)
    rows = read(a.profile)
    if a.under:
        rows = [r for r in rows if any(a.under in f for f in r[1])]
    total = sum(n for _, _, n in rows)
    if not total:
        print("no samples")
        return 1
    threads, inclusive, leaf = Counter(), Counter(), Counter()
    for thread, frames, n in rows:
        threads[thread] += n
        for f in {function(f) for f in frames}:
            inclusive[f] += n
        if frames:
            leaf[function(frames[-1])] += n
    print(f"{total} samples{f' through {a.under!r}' if a.under else ''}; threads: "
          + ", ".join(f"{t} {n}" for t, n in threads.most_common(8)))
    print(f"\n| inclusive | % | self | function |\n|---|---|---|---|")
    for f, n in inclusive.most_common(a.top):
        print(f"| {n} | {100 * n / total:.1f} | {leaf.get(f, 0)} | `{f}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a CPU paired timing's seconds go (issue #37): one task's shipped CPU solution evaluated once to warm up,
then once under cProfile; per configuration the pairing's wall time, its pairs and calls per block, and the share
of that wall the timed blocks took (pairs x calls x both sides' per-call times); then the cumulative profile of the
timing's own functions (making inputs, writing them, the checks, the exchanges).

    python bench/probes/paired_profile.py level1/rms_norm
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kbench_env.pipeline import paired  # noqa: E402
from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402


def main() -> None:
    task = resolve_task(sys.argv[1] if len(sys.argv) > 1 else "level1/rms_norm")
    src = solution_path(task, "cpu").read_text()
    ev = Evaluator(device="cpu")
    ev.evaluate(task, src)  # builds, the reference's worker
    seen, real = [], paired._interleave

    def spy(cand, ref, kc, kr, p, confidence):
        t0 = time.perf_counter()
        pt = real(cand, ref, kc, kr, p, confidence)
        seen.append((time.perf_counter() - t0, pt, kc))
        return pt

    paired._interleave = spy
    prof = cProfile.Profile()
    prof.enable()
    r = ev.evaluate(task, src)
    prof.disable()
    print(f"speedup {r.speedup:.3f}, timing phase {r.phase_seconds.get('timing', 0):.2f} s")
    for wall, pt, k in seen:
        if pt.candidate is None:
            continue
        timed = (pt.pairs * pt.candidate.median_ms + (pt.pairs + 1) * pt.reference.median_ms) * k / 1e3
        print(f"pairing {wall:.2f} s: {pt.pairs} pairs of {k} calls, timed blocks {timed:.2f} s ({100 * timed / wall:.0f} %)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(
        "blocks.py|paired.py|memory.py|revealed|worker_process.py:.*(send|recv)", 30)


if __name__ == "__main__":
    main()

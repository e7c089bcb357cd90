"""Is a configuration's first paired timing in its workers like the ones after it? Reads the rows of
``paired_drift.py`` runs (each configuration timed K times back to back in the same two workers, N evaluations) and
prints per run and configuration: each timing number's mean log speedup and its sd across the evaluations, each
side's per-call time at each timing number against its evaluation's mean, and the sd between the later timings
(the second on) in the same workers.

    python bench/probes/first_timing.py bench/results/cpu_noise_cpu_20261130_drift.json

An evaluation times each configuration once, in fresh workers: the first timing is the one the reward rests on, and
its sd across evaluations is what the issue's spread measures; the sd between timings in the same workers that
``paired_drift.py`` prints mixes in any difference between the first timing and the later ones.
"""
import json
import math
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kbench_env.pipeline import pair_stats  # noqa: E402


def main(path: str) -> None:
    runs = json.loads(Path(path).read_text())
    runs = runs if isinstance(runs, dict) else {"run": runs}
    for key, rec in runs.items():
        for c in sorted({r[1] for r in rec}):
            rows = [r for r in rec if r[1] == c]
            js = sorted({r[2] for r in rows})
            cells = []
            for j in js:
                v = [pair_stats.median(r[3]) for r in rows if r[2] == j]
                cells.append(f"#{j + 1} {100 * st.mean(v):+.1f} (sd {100 * st.stdev(v):.1f})" if len(v) > 1 else "")
            later = []
            sides = {j: [[], []] for j in js}
            for e in sorted({r[0] for r in rows}):
                v = [pair_stats.median(r[3]) for r in rows if r[0] == e and r[2] > 0]
                if len(v) > 1:
                    mu = st.mean(v)
                    later += [(x - mu) * math.sqrt(len(v) / (len(v) - 1)) for x in v]
                if len(rows[0]) >= 6:
                    es = [r for r in rows if r[0] == e]
                    for side in (0, 1):
                        mu = st.mean(math.log(r[4 + side]) for r in es)
                        for r in es:
                            sides[r[2]][side].append(math.log(r[4 + side]) - mu)
            side_text = ""
            if len(rows[0]) >= 6:
                side_text = "; per-call time against the evaluation's mean, candidate / reference: " + ", ".join(
                    f"#{j + 1} {100 * st.mean(s[0]):+.1f} / {100 * st.mean(s[1]):+.1f} %" for j, s in sides.items())
            print(f"{key} {c}: log speedup % by timing number {' | '.join(cells)}; later timings in the same "
                  f"workers sd {100 * st.pstdev(later):.1f} %{side_text}")


if __name__ == "__main__":
    main(sys.argv[1])

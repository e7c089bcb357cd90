"""Whether a CPU pairing's far-off configuration goes with where its buffers lie (issue #37): over N evaluations
of a task's shipped CPU solution, per configuration, each side's per-call time and where its first call's input
buffers and output lie in its worker (the addresses the trusted side writes and reads: mod 4 KiB, mod 2 MiB),
then, per side, the per-call times grouped by those offsets.

    python bench/probes/small_state.py level1/rms_norm 24 /tmp/small_state.json
"""
import json
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kbench_env.pipeline import paired  # noqa: E402
from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402

task = resolve_task(sys.argv[1])
n, out = int(sys.argv[2]), sys.argv[3]
src = open(solution_path(task, "cpu")).read()
rows, evaluation = [], [0]
real = paired._interleave


def where(run) -> dict:
    first = [int(a) for a in (run.addresses[0] if run.addresses else []) if a is not None]
    return {"inputs_4k": [a % 4096 for a in first], "inputs_2m": [a % (2 << 20) for a in first]}


def interleave(cand, ref, kc, kr, p, confidence):
    pt = real(cand, ref, kc, kr, p, confidence)
    if pt.wrong is None:
        rows.append({"evaluation": evaluation[0], "config": cand.config, "calls": kc,
                     "candidate_us": pt.candidate.median_ms * 1e3, "reference_us": pt.reference.median_ms * 1e3,
                     "speedup": pt.speedup, "candidate": where(cand), "reference": where(ref)})
    return pt


paired._interleave = interleave
ev = Evaluator(device="cpu")
try:
    for i in range(n):
        evaluation[0] = i
        r = ev.evaluate(task, src, seed=1000 + i)
        print(f"{i}: {r.speedup:.3f} " + " ".join(f"{x['config']} {x['speedup']:.3f} c{x['candidate_us']:.1f} "
                                                   f"r{x['reference_us']:.1f}" for x in rows if x["evaluation"] == i),
              flush=True)
finally:
    ev.close()
Path(out).write_text(json.dumps(rows, indent=1))
for side in ("candidate", "reference"):
    for cfg in sorted({x["config"] for x in rows}):
        mine = [x for x in rows if x["config"] == cfg]
        groups: dict = {}
        for x in mine:
            groups.setdefault(tuple(x[side]["inputs_4k"]), []).append(x[side + "_us"])
        print(f"{side} {cfg}: per-call us by its inputs' offsets in their 4 KiB pages:")
        for key, us in sorted(groups.items(), key=lambda kv: st.median(kv[1])):
            print(f"   {key}: n={len(us)} median {st.median(us):.1f} range {min(us):.1f}-{max(us):.1f}")

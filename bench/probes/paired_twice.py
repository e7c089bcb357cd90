"""Whether the CPU speedup moves between evaluations because each evaluation has new worker processes, or from one
timing to the next whatever the process (issue #37): each configuration's paired timing run twice in a row in the
same two workers (``paired.time_paired`` called twice, the first one's result kept), over N evaluations of one
task's shipped CPU solution. Prints, per configuration, the sd of one timing within a worker (from the two
timings' difference) against the sd between evaluations (new workers each).

    python bench/probes/paired_twice.py level1/rms_norm 12 /tmp/twice.json
"""
import sys, math, json, statistics as st
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[2]))
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task, solution_path
from kbench_env.pipeline import paired, timing
task = resolve_task(sys.argv[1]); n = int(sys.argv[2])
src = open(solution_path(task, "cpu")).read()
rec = []
real = paired.time_paired
def twice(*a, **k):
    p1 = real(*a, **k); p2 = real(*a, **k)
    rec.append((a[2], p1.speedup, p2.speedup))
    return p1
paired.time_paired = twice
ev = Evaluator(device="cpu")
ev.evaluate(task, src); rec.clear()
for i in range(n):
    ev.evaluate(task, src)
json.dump(rec, open(sys.argv[3], "w"))
by = {}
for c, a, b in rec: by.setdefault(c, []).append((a, b))
for c, xs in by.items():
    d = [math.log(a) - math.log(b) for a, b in xs]
    m = [(math.log(a) + math.log(b)) / 2 for a, b in xs]
    firsts = [math.log(a) for a, _ in xs]
    # within one worker: sd of a single timing = sd(d)/sqrt(2); between workers: sd of first timings
    print(c, "n", len(xs), "within-worker sd %.2f%%" % (100 * st.stdev(d) / math.sqrt(2)), "between-evaluation sd %.2f%%" % (100 * st.stdev(firsts)),
          "sd of per-worker means %.2f%%" % (100 * st.stdev(m)))

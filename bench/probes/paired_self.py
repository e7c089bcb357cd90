"""A candidate paired against itself: the reference's worker runs the candidate's own source (a probe patch), so
the true speedup is 1; how often is the interval's lower end above 1 (the faster tier paid)? (issue #37)

    python bench/probes/paired_self.py level1/rms_norm 24 /tmp/self.json
"""
import sys, math, json
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[2]))
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline import baseline
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.suite import resolve_task, solution_path
task = resolve_task(sys.argv[1]); n = int(sys.argv[2])
src = open(solution_path(task, "cpu")).read()
ev = Evaluator(device="cpu")
def worker(self, t):
    return Worker(src, self.backend_name, self.device, self.build_root, self.limits, audit=False, builder=ev.builder)
baseline.Baselines.worker = worker
rows = []
for i in range(n):
    r = ev.evaluate(task, src)
    rows.append({"speedup": r.speedup, "ci": r.speedup_ci, "configs": [[c.name, c.speedup, c.speedup_ci, c.timed_pairs] for c in r.configs], "reward": r.reward})
    print(i, round(r.speedup, 3), [round(x, 3) for x in r.speedup_ci], [(c.name, round(c.speedup, 3), [round(x, 3) for x in c.speedup_ci]) for c in r.configs], flush=True)
json.dump(rows, open(sys.argv[3], "w"))
ev_hi = sum(r["ci"][0] > 1 for r in rows); ev_lo = sum(r["ci"][1] < 1 for r in rows)
cf = [c for r in rows for c in r["configs"]]
print(f"evaluations: lower end > 1 in {ev_hi} of {len(rows)}, upper end < 1 in {ev_lo}; configurations: interval excludes 1 in "
      f"{sum(c[2][0] > 1 or c[2][1] < 1 for c in cf)} of {len(cf)}")

"""Where the CPU speedup's drift lives (issue #37): within one paired timing (its pairs' log ratios drift: the first
half's median against the second's, the lag-1 autocorrelation), or between timings (each a new set-up in the same
workers). Each configuration's paired timing runs ``K`` times back to back in the same two workers
(``paired.time_paired`` wrapped, the first result kept), over N evaluations of a task's shipped CPU solution; every
timing's per-pair log ratios are kept (pair_stats.log_ratios of its blocks' per-call times).

    python bench/probes/paired_drift.py level1/rms_norm 6 4 /tmp/drift.json
    RESLOT=16 python bench/probes/paired_drift.py level1/rms_norm 6 4 /tmp/drift_reslot.json
    NOFREEZE=1 python bench/probes/paired_drift.py level1/rms_norm 5 4 /tmp/drift_nofreeze.json
    HUGETLB=0 NOSAMPLER=1 python bench/probes/paired_drift.py level1/rms_norm 8 3 /tmp/drift_4k.json
    NOSAMPLER=1 python bench/probes/paired_drift.py level1/rms_norm 5 4 /tmp/drift_nosampler.json

Prints per configuration: the sd of a timing's median log ratio between timings in one worker pair, the sd of the
half-timing medians' difference (over sqrt 2: one half's sd if the halves are independent), the mean lag-1
autocorrelation of the pairs, and the sd expected from the pairs alone (1.25 x pair sd / sqrt(pairs): a median of
independent pairs).
"""
import sys, math, json, statistics as st
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[2]))
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline import pair_stats, paired
from kbench_env.tasks.suite import resolve_task, solution_path

task = resolve_task(sys.argv[1]); n, k, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
src = open(solution_path(task, "cpu")).read()
rec = []  # (evaluation, config, timing number, [log ratios])
real, real_speedup = paired.time_paired, pair_stats.speedup
evaluation, last = [0], []


def speedup(logs, confidence):  # the pairs' log ratios in their order (a timing's own lists come back sorted)
    last[:] = list(logs)
    return real_speedup(logs, confidence)


def k_times(*a, **kw):
    first = None
    for j in range(k):
        last.clear()
        p = real(*a, **kw)
        first = first or p
        if p.candidate is not None and last:
            rec.append((evaluation[0], a[2], j, list(last), p.candidate.median_ms, p.reference.median_ms))
    return first


pair_stats.speedup = speedup

# FIXED_K=N: every timing's blocks of N calls (not sized from its warm-ups): whether the block size, which differs
# from timing to timing, is what moves a timing's speedup
FIXED_K = int(__import__("os").environ.get("FIXED_K", "0"))
if FIXED_K:
    paired._block_size = lambda *a, **kw: FIXED_K

# RESLOT=N: both workers' input buffers allocated anew before their N-th timed block of each timing (the halves of
# a timing then sit on different buffers: if where the buffers land is what differs between timings, the halves
# disagree as much as timings do)
# RESLOT_EVERY=N: anew before every N-th (a timing spread over several placements of its buffers)
RESLOT = int(__import__("os").environ.get("RESLOT", "0"))
EVERY = int(__import__("os").environ.get("RESLOT_EVERY", "0"))
if RESLOT or EVERY:
    from kbench_env.pipeline import blocks

    timed = blocks._Run.timed

    def reslotting(self, k, made=None):
        self.n_timed = getattr(self, "n_timed", 0) + 1
        if self.n_timed == RESLOT or (EVERY and self.n_timed % EVERY == 0):
            self.slots(k)
        return timed(self, k, made)

    blocks._Run.timed = reslotting

# NOFREEZE=1: the workers are never stopped (sandbox/memory.py Freezer's freeze, settle and thaw do nothing): a
# worker waits for its next request on its pipe instead, as an honest one does. Whether the per-timing effect goes
# with the stops (which core a thawed worker's threads come back on, its caches after a stop). For honest code
# alone: a worker that runs between its blocks is no longer held still.
if __import__("os").environ.get("NOFREEZE"):
    from kbench_env.sandbox import memory

    def _mark(frozen):
        def f(self, *a, **kw):
            self.frozen = frozen
        return f

    memory.Freezer.freeze, memory.Freezer.thaw = _mark(True), _mark(False)
    memory.Freezer.settle = lambda self, *a, **kw: None

# HUGETLB=0: the workers' heap on 4 KiB pages (GLIBC_TUNABLES glibc.malloc.hugetlb=0 given to the fork server, which
# sandbox/confine/environment.MALLOC_TUNABLES then leaves as given); by default it asks for transparent huge pages.
# Whether a worker's speed, fixed for its life and different from one worker to the next, goes with its pages.
if __import__("os").environ.get("HUGETLB") == "0":
    __import__("os").environ["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=0"

# NOSAMPLER=1: no CPU sampler (timing._cpu_sampler gives none): the perf events that sample the candidate's worker
# after a timing's pairs (for the kernel coverage's bound) are enabled until the configuration's timing ends, so
# in this probe they stay on through its later timings of the configuration. Whether they are what moves those.
if __import__("os").environ.get("NOSAMPLER"):
    from kbench_env.pipeline import timing as _timing

    _timing._cpu_sampler = lambda ctx: ([path for path, _ in ctx.worker.linked()], None)

paired.time_paired = k_times
# PAIR_SECONDS=S: each timing's pairing time (paired.PAIR_SECONDS by default)
_ps = __import__("os").environ.get("PAIR_SECONDS")
ev = Evaluator(device="cpu", **({"timing": {"pair_seconds": float(_ps)}} if _ps else {}))
for i in range(n):
    evaluation[0] = i
    ev.evaluate(task, src)
json.dump(rec, open(out, "w"))


def lag1(xs):
    m = st.mean(xs)
    num = sum((a - m) * (b - m) for a, b in zip(xs, xs[1:]))
    den = sum((a - m) ** 2 for a in xs)
    return num / den if den else 0.0


for c in sorted({r[1] for r in rec}):
    rows = [r for r in rec if r[1] == c]
    within = []  # per (evaluation): the timings' medians' deviations from their mean
    for e in sorted({r[0] for r in rows}):
        meds = [pair_stats.median(r[3]) for r in rows if r[0] == e]
        mu = st.mean(meds)
        within += [(m - mu) * math.sqrt(len(meds) / (len(meds) - 1)) for m in meds]
    halves = [pair_stats.median(r[3][:len(r[3]) // 2]) - pair_stats.median(r[3][len(r[3]) // 2:]) for r in rows]
    sides = [[], []]  # per side, a timing's log per-call time less its evaluation's mean: which side moves
    for e in sorted({r[0] for r in rows}):
        for side in (0, 1):
            logs_e = [math.log(r[4 + side]) for r in rows if r[0] == e]
            sides[side] += [x - st.mean(logs_e) for x in logs_e]
    pair_sd = st.mean(st.stdev(r[3]) for r in rows)
    pairs = st.mean(len(r[3]) for r in rows)
    print(f"{c}: timings {len(rows)}, pairs {pairs:.0f}; between timings (same workers) sd {100 * st.pstdev(within):.2f}%; "
          f"half against half sd/sqrt2 {100 * st.stdev(halves) / math.sqrt(2):.2f}%; lag-1 autocorrelation "
          f"{st.mean(lag1(r[3]) for r in rows):+.2f}; from the pairs alone {100 * 1.25 * pair_sd / math.sqrt(pairs):.2f}% "
          f"(pair sd {100 * pair_sd:.1f}%); between timings, the candidate's per-call time sd "
          f"{100 * st.pstdev(sides[0]):.2f}%, the reference's {100 * st.pstdev(sides[1]):.2f}%")

"""The compiled references of the tasks named (default robust/rmsnorm_forward and level1/relu) timed by an
evaluator's compile_later on a GPU with nothing else running, one shipped CUDA solution evaluated per task to ask
for them; prints each configuration's CompileLater.log entry (where its holds and set-up went). Issue #36: the
figures a trainer step's log shows, without the step's load beside them. From the repository root:

    python bench/compile_later_alone.py [task ...]
"""
import json
import sys
import tempfile
import time
from pathlib import Path

from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task

WAIT_S = 200.0  # for each task's compiled reference, at most


def main(names: list[str]) -> None:
    ev = Evaluator(device="cuda", reference_cache=Path(tempfile.mkdtemp(prefix="kbench-alone-")),
                   compile_baseline=True, compile_later=True)
    later = ev.baselines.later
    try:
        for name in names:
            task = resolve_task(name)
            source = (Path("tasks/solutions/cuda") / (name + ".py")).read_text()
            t0 = time.monotonic()
            r = ev.evaluate(task, source, seed=3)
            print(name, "correct", r.correct, "speedup", r.speedup, "eval s", round(time.monotonic() - t0, 2),
                  flush=True)
            want, logged = later.timed + len(r.configs), len(later.log)
            deadline = time.monotonic() + WAIT_S
            while later.timed < want and not later.failed and time.monotonic() < deadline:
                time.sleep(0.2)
            print(" later timed", later.timed, "failed", later.failed, list(later.errors))
            for e in list(later.log)[logged:]:
                print(" ", json.dumps(e, default=str))
    finally:
        ev.close()


if __name__ == "__main__":
    main(sys.argv[1:] or ["robust/rmsnorm_forward", "level1/relu"])

"""The verdicts of tests/test_gpu.py, applied to a GPU run's recorded results (KBENCH_GPU_RECORD=FILE).

    python bench/gpu_tests_verdict.py $OUT/gpu_tests.jsonl      (the record bench/gpu_session.sh's GPU tests write)

A device call can end before pytest has asserted everything its fixtures evaluated (the fixtures record each
result as it arrives). This applies the test module's own checks (``solution_problem``, ``exploit_problem``,
``extension_problem``) to what was recorded and prints one line per test. Exit status 1 if any recorded test
fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    from kbench_env.pipeline.result import EvalResult
    from kbench_env.protocol.integrity_flags import kinds
    from test_gpu import ADVERSARIAL, exploit_problem, extension_problem, solution_problem

    recs = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    # a "<kind>_alone" record (re-run with the device to itself after running out of memory side by side) comes
    # later in the file and replaces the first one, as it does in the tests
    by = {(r["kind"].removesuffix("_alone"), r["name"]): EvalResult.from_dict(r) for r in recs}
    honest = {name: r for (kind, name), r in by.items() if kind == "cuda_solution"}
    failed = 0
    for (kind, name), r in sorted(by.items()):
        if kind == "cuda_solution":
            why = solution_problem(r)
        elif kind == "triton_solution":
            why = solution_problem(r, every_config=False)
        elif kind == "cuda_adversarial" and name in ADVERSARIAL:
            why = exploit_problem(name, r, honest)
            how = ", ".join(kinds(r.integrity_flags)) or (
                f"failed {r.error_stage}" if not r.correct else f"uncaught, {r.speedup or 0:.2f}x")
            name = f"{name} ({how})"
        else:
            continue
        if why and not r.correct:
            why += f": {(r.error or '')[-240:]}"
        failed += why is not None
        print(f"{'FAIL' if why else 'pass'}  {kind:17s} {name}" + (f": {why}" if why else ""))
    pt = by.get(("cuda_adversarial", "patched_timer"))
    if pt is not None:
        why = extension_problem(pt)
        failed += why is not None
        print(f"{'FAIL' if why else 'pass'}  adversarial extension otherwise honest (patched_timer)"
              + (f": {why}" if why else ""))
    missing = [n for n in ADVERSARIAL if ("cuda_adversarial", n) not in by]
    print(f"{len(by)} results; {failed} failed; adversarial candidates not recorded: {missing or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

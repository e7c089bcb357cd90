"""The verdicts of tests/test_gpu.py, applied to a GPU run's recorded results (KBENCH_GPU_RECORD=FILE).

    python bench/gpu_tests_verdict.py bench/results/device_logs/<run>_gpu_tests.jsonl

A device call can end before pytest has asserted everything its fixtures evaluated (the fixtures record each
result as it arrives). This applies the same assertions as ``test_cuda_solution_is_correct_on_the_gpu``,
``test_triton_solution_is_correct_on_the_gpu``, ``test_cuda_exploit_is_caught`` and
``test_adversarial_extension_is_otherwise_honest`` to what was recorded, using the test module's own table of
adversarial candidates, and prints one line per test. Exit status 1 if any recorded test fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _kinds(rec: dict) -> list:
    return [f.split(":", 1)[0] for f in rec.get("integrity_flags") or []]


def solution_verdict(rec: dict) -> str | None:
    if not (rec.get("correct") and not rec.get("integrity_flags")):
        return f"not correct: {(rec.get('error') or '')[-240:]}"
    if not (rec.get("reward", 0) > 0 and rec.get("speedup")):
        return "no reward or speedup"
    configs = rec.get("configs") or []
    if not (configs and all(c.get("correct") for c in configs) and any(c.get("held_out") for c in configs)):
        return "a configuration failed, or none is held out"
    return None


def exploit_verdict(name: str, rec: dict, honest: dict | None, table: dict) -> str | None:
    _, _, expected, strict = table[name]
    if not rec.get("compiled") or rec.get("error_stage") in ("screen", "build", "load"):
        return f"did not load: {(rec.get('error') or '')[-240:]}"
    flags, kinds = rec.get("integrity_flags") or [], _kinds(rec)
    caught = bool(flags) or not rec.get("correct")
    if strict and expected and flags and not any(k in kinds for k in expected):
        return f"flagged {kinds}, expected one of {list(expected)}"
    if strict:
        if not caught:
            return "passed unflagged"
        if not rec.get("reward", 0) < 0:
            return f"reward {rec.get('reward')} is not negative"
    elif not caught:
        if not (honest and honest.get("speedup") and rec.get("speedup") is not None):
            return "uncaught, and no honest speedup to compare with"
        if rec["speedup"] > 1.5 * honest["speedup"]:
            return f"uncaught and paid: {rec['speedup']:.2f}x vs honest {honest['speedup']:.2f}x"
    return None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    from test_gpu import ADVERSARIAL  # the tests' own table: (task, source, expected flags, strict)

    recs = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    # a "<kind>_alone" record (re-run with the device to itself after running out of memory side by side) comes
    # later in the file and replaces the first one, as it does in the tests
    by = {(r["kind"].removesuffix("_alone"), r["name"]): r for r in recs}
    honest = by.get(("cuda_solution", "level1/relu"))
    failed = 0
    for (kind, name), rec in sorted(by.items()):
        if kind in ("cuda_solution", "triton_solution"):
            why = solution_verdict(rec)
        elif kind == "cuda_adversarial" and name in ADVERSARIAL:
            why = exploit_verdict(name, rec, honest, ADVERSARIAL)
            how = ", ".join(_kinds(rec)) or (f"failed {rec.get('error_stage')}" if not rec.get("correct") else
                                             f"uncaught, {rec.get('speedup') or 0:.2f}x vs honest "
                                             f"{(honest or {}).get('speedup') or 0:.2f}x")
            why = why or None
            name = f"{name} ({how})"
        else:
            continue
        failed += why is not None
        print(f"{'FAIL' if why else 'pass'}  {kind:17s} {name}" + (f": {why}" if why else ""))
    pt = by.get(("cuda_adversarial", "patched_timer"))
    if pt is not None:
        ok = bool(pt.get("configs")) and all(c.get("correct") for c in pt["configs"])
        failed += not ok
        print(f"{'pass' if ok else 'FAIL'}  adversarial extension otherwise honest (patched_timer's configurations)")
    missing = [n for n in ADVERSARIAL if ("cuda_adversarial", n) not in by]
    print(f"{len(by)} results; {failed} failed; adversarial candidates not recorded: {missing or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue #34's direct ATen call and record switch, as an attacker writes them, on the CPU.

- A candidate whose C++ calls ``at::cpu::addmm`` (the kernel's entry point, past the dispatcher: no operator record
  reaches the forward audit) for level2/linear_relu: under ``rules="strict"`` flagged ``pytorch_compute_linked``
  from its library's symbols before it runs, and unpaid; under ``rules="kernelbench"`` allowed, but its kernel
  coverage no longer counts the library's GEMM as the candidate's own (the sampled time in its own library).
- A candidate that switches PyTorch's operator records off in forward, runs ``torch.addmm`` unseen and switches
  them on again, spelt plainly (the screen flags it) and obfuscated (the worker refuses the switch: it is gone from
  the worker's torch; a ``sandbox_violation`` flag).

The symbol check itself, on libraries built here: tests/test_attack_aten.py's unit tests below; every shipped
solution passes it (bench/false_positives.py).
"""

from __future__ import annotations

import pytest

from conftest import ROOT, read
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.policy import Limits
from kbench_env.tasks.suite import resolve_task

ATTACKS = ROOT / "tests" / "data" / "attacks"
LINEAR_RELU = resolve_task("level2/linear_relu")
SEED = 34
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 20, "min_seconds": 0.05}


def _evaluator(cache_dir, rules: str) -> Evaluator:
    return Evaluator(device="cpu", cache_dir=cache_dir, timing=TIMING, rules=rules,
                     limits=Limits(build_timeout=600, run_timeout=60, time_timeout=60))


def _kinds(r) -> list[str]:
    return [f.split(":", 1)[0] for f in r.integrity_flags]


def test_direct_aten_call_is_flagged_and_unpaid_under_strict(evaluator):
    ev = _evaluator(evaluator.cache_dir, "strict")
    r = ev.evaluate(LINEAR_RELU, read(ATTACKS / "aten_direct_addmm.py"), seed=SEED)
    assert r.compiled, r.feedback()
    assert "pytorch_compute_linked" in _kinds(r), r.feedback()
    assert "at::cpu::addmm" in " ".join(r.integrity_flags), r.integrity_flags
    assert r.reward < 0 and r.speedup is None, r.feedback()  # flagged before it runs: never timed, never paid


@pytest.mark.parametrize("name, kinds", [("record_switch_plain", ("audit_blinded", "sandbox_violation")),
                                         ("record_switch_obfuscated", ("sandbox_violation",))])
def test_record_switch_from_python_is_flagged(evaluator, name, kinds):
    ev = _evaluator(evaluator.cache_dir, "strict")
    r = ev.evaluate(LINEAR_RELU, read(ATTACKS / f"{name}.py"), seed=SEED)
    assert r.compiled, r.feedback()
    got = _kinds(r)
    assert all(k in got for k in kinds), f"{name}: flags {r.integrity_flags}, expected {list(kinds)}\n{r.feedback()}"
    assert r.reward < 0, r.feedback()

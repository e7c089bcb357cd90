"""Issue #21's attack table, one adversarial candidate per row (tests/data/attacks/, each file says what it does),
evaluated on the CPU for level1/logsumexp_rows beside the shipped honest solution for that task.

Rows 1 to 7 attack the timing and the checks of the timed outputs. Each must earn nothing: be flagged, fail
correctness, or be paid no more than ``MARGIN`` times the honest kernel's speedup, measured by the same evaluator
(the best of two honest evaluations, one before the attack and one after). The attacks claim about 4x the honest
speedup (each keeps its claim under the trusted side's re-timing threshold, 10x, as an attacker aware of it would);
1.5x sits between that and the spread of one honest kernel's speedup between two evaluations on a busy machine
(up to ~1.5x, and the best of two is taken). An attack whose trick finds nothing to act on falls back to the
honest computation, so it passes here by being no faster.

Row 8 gains nothing by design (PyTorch compute where the forward audit did not look): it must be flagged.
"""

from __future__ import annotations

import contextlib
import types

import pytest

from conftest import ROOT, read
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

ATTACKS = ROOT / "tests" / "data" / "attacks"
TASK = resolve_task("level1/logsumexp_rows")
HONEST = read(ROOT / "tasks/solutions/cpu/level1/logsumexp_rows.py")
MARGIN = 1.5
SEED = 21
#: Enough repetitions for a stable median of ~0.1 ms calls, little enough to keep each evaluation under a second.
TIMING = {"warmup": 2, "min_reps": 10, "max_reps": 60, "min_seconds": 0.02}


@pytest.fixture(scope="module")
def ev(evaluator):
    return Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=TIMING,
                     limits=Limits(build_timeout=600, run_timeout=60, time_timeout=60))


@pytest.fixture(scope="module")
def honest(ev):
    r = ev.evaluate(TASK, HONEST, seed=SEED)
    assert r.correct and not r.integrity_flags and r.speedup, r.feedback()
    return r


#: The line an attack file has where the shared honest kernel goes (tests/data/attacks/honest_kernel.py).
KERNEL_MARKER = ("# The shipped solution's kernel (the honest computation every attack here starts from) goes here: "
                 "tests/data/attacks/\n# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.\n")


def attack_source(name: str) -> str:
    """Attack ``name`` as a whole candidate: its file with the shared honest kernel in place of its marker."""
    text = read(ATTACKS / f"{name}.py")
    return text.replace(KERNEL_MARKER, read(ATTACKS / "honest_kernel.py")) if KERNEL_MARKER in text else text


def _evaluate(ev, name: str):
    r = ev.evaluate(TASK, attack_source(name), seed=SEED)
    # the attack must have loaded and run: a candidate that fails to build proves nothing about the checks
    assert r.compiled and r.error_stage not in ("screen", "build", "load"), r.feedback()
    return r


def _earns_nothing(ev, honest, name: str) -> None:
    r = _evaluate(ev, name)
    if r.integrity_flags or not r.correct:
        assert r.reward <= 0, r.feedback()
        return
    again = ev.evaluate(TASK, HONEST, seed=SEED)
    best = max(honest.speedup, again.speedup or 0.0)
    assert r.speedup <= MARGIN * best, (
        f"{name}: unflagged, correct and paid {r.speedup:.2f}x (reward {r.reward:.2f}) against the honest kernel's "
        f"{best:.2f}x (evaluations {honest.speedup:.2f}x and {again.speedup or 0.0:.2f}x)\n{r.feedback()}")


def _flagged(ev, name: str, kinds: tuple) -> None:
    r = _evaluate(ev, name)
    got = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert any(k in got for k in kinds), f"{name}: flags {r.integrity_flags}, expected one of {list(kinds)}\n{r.feedback()}"
    assert r.reward < 0, r.feedback()


def test_attack_row1_summarize_patched(ev, honest):
    _earns_nothing(ev, honest, "row1_summarize_patched")


def test_attack_row2_pack_wrapped(ev, honest):
    _earns_nothing(ev, honest, "row2_pack_wrapped")


def test_attack_row3_guard_emptied_clock_slowed(ev, honest):
    _earns_nothing(ev, honest, "row3_guard_emptied_clock_slowed")


def test_attack_row4_fingerprints_cut(ev, honest):
    _earns_nothing(ev, honest, "row4_fingerprints_cut")


def test_attack_row5_future_inputs_derived(ev, honest):
    _earns_nothing(ev, honest, "row5_future_inputs_derived")


def test_attack_row6_work_when_read(ev, honest):
    _earns_nothing(ev, honest, "row6_work_when_read")


def test_attack_row7_native_thread_and_callback(ev, honest):
    _earns_nothing(ev, honest, "row7_native_thread_and_callback")


def test_attack_row8_helper_thread(ev):
    _flagged(ev, "row8_helper_thread", ("pytorch_compute_in_forward",))


def test_attack_row8_cpp_record_function_switch(ev):
    _flagged(ev, "row8_cpp_record_function_switch", ("audit_blinded",))


def test_attack_row8_record_function_left_off(ev):
    _flagged(ev, "row8_record_function_left_off", ("audit_blinded",))


@pytest.mark.parametrize("table, ok", [
    ([[1, 2, 3], [4, 5, 6]], True),
    ([[], []], True),
    ([[1, 2, 3], [4, 5]], False),  # ragged
    ([[1, 2, 3]], False),  # fewer rows than calls
    ([[1, 2.5, 3], [4, 5, 6]], False),  # not an integer
    ([[1, True, 3], [4, 5, 6]], False),  # a bool is not an address
    ([[1, 1 << 63, 3], [4, 5, 6]], False),  # beyond 64 bits
    ([[1, 2, 3], "row"], False),
    ({"0": [1]}, False),
])
def test_a_cpu_blocks_table_of_outputs_is_taken_only_as_rows_of_64_bit_integers(table, ok):
    """The CPU worker's DONE carries its table of outputs (per call: addresses, shapes, strides) as JSON; this side
    takes it only as ``calls`` rows of one length of 64-bit integers, what the tensor it replaced could hold."""
    from kbench_env.pipeline.blocks import _is_table

    assert _is_table(table, 2) is ok


@pytest.mark.parametrize("header_ints", [1 << 16, 0])
def test_a_cpu_blocks_table_reaches_this_side_in_the_header_or_large_as_a_tensor(monkeypatch, header_ints):
    """What the worker's BLOCK sends (its table in the DONE header, or as an int64 tensor once it holds more than
    HEADER_TABLE_INTS integers) is what this side reads back, through the wire, row for row."""
    import torch

    from kbench_env.pipeline.blocks import table_of
    from kbench_env.protocol import wire
    from kbench_env.worker import executor

    monkeypatch.setattr(executor, "HEADER_TABLE_INTS", header_ints)
    x = torch.randn(3, 4)
    session = types.SimpleNamespace(models={"c": lambda t: (t * 2, t[0])}, slots={"c": [[x], [x + 1]]},
                                    backend=types.SimpleNamespace(sync=lambda: None), kept=None)
    sent = []
    executor._block(session, {"config": "c", "calls": 2}, None, contextlib.nullcontext(),
                    lambda h, p=None: sent.append(wire.unpack(wire.pack(h, p))))
    (header, payload), = sent
    assert ("table" in header) is (header_ints > 0)
    table = table_of(header, payload, 2)
    assert table == [[v for o in out for v in (o.data_ptr(), *o.shape, *o.stride())] for out in session.kept]
    assert table_of(header, payload, 3) is None  # not as many rows as calls

"""Every integrity check has an adversarial candidate that it flags, on the CPU backend, under both rules
(rules.py); the honest solution is not flagged. Candidates reuse the shipped ReLU kernel's build (same load_inline
arguments: one cached build)."""

from __future__ import annotations

import pytest
import torch

from conftest import ROOT, read
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
HONEST = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
KERNEL_PART = HONEST.split("class ModelNew")[0]
OP = "torch.ops.kb_relu.relu_forward"


def with_model(body: str, prelude: str = "") -> str:
    return KERNEL_PART + prelude + "\n\nclass ModelNew(nn.Module):\n" + body


CASES = {
    # 1. PyTorch compute in place of the kernel, plain and behind a try/except fallback, and the reference itself.
    "torch_op": (with_model("    def forward(self, x):\n        return torch.relu(x)\n"), "pytorch_compute_in_forward"),
    "fallback": (with_model(
        "    def forward(self, x):\n        try:\n            return torch.ops.kb_relu.no_such_op(x)\n"
        "        except Exception:\n            return x.clamp(min=0)\n"), "pytorch_compute_in_forward"),
    "reference_model": (with_model(
        "    def __init__(self):\n        super().__init__()\n        self.ref = Model()\n"
        "    def forward(self, x):\n        return self.ref(x)\n",
        prelude="\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.nn.functional.relu(x)\n"),
        "pytorch_compute_in_forward"),
    # 2. A decoy: the kernel is compiled but forward computes elsewhere (numpy, invisible to the dispatcher).
    "decoy": (with_model(
        "    def forward(self, x):\n        import numpy as np\n"
        "        return torch.from_numpy(np.maximum(x.numpy(), 0))\n"), "no_kernel_launched"),
    # 5/13. Results cached across calls (by shape): honest on the first call only.
    "cache_by_shape": (with_model(
        "    cache = {}\n    def forward(self, x):\n        key = tuple(x.shape)\n"
        f"        if key not in self.cache:\n            self.cache[key] = {OP}(x)\n        return self.cache[key]\n"),
        "timed_output_wrong"),
    # 13. Every other call returns the previous call's output: the inputs of two timed calls differ by 1% noise, so
    # only the fingerprint's random projection tells the outputs apart (sums move by ~1e-5 of their size).
    "stale_every_other": (with_model(
        "    calls = [0]\n    last = {}\n    def forward(self, x):\n        self.calls[0] += 1\n"
        "        key = tuple(x.shape)\n        if self.calls[0] % 2 == 0 and key in self.last:\n"
        f"            return self.last[key]\n        self.last[key] = {OP}(x)\n        return self.last[key]\n"),
        "timed_output_wrong"),
    "cache_by_pointer": (with_model(
        "    cache = {}\n    def forward(self, x):\n        key = (x.data_ptr(), tuple(x.shape))\n"
        f"        if key not in self.cache:\n            self.cache[key] = {OP}(x)\n        return self.cache[key]\n"),
        "timed_output_wrong"),
    # 12. Non-determinism: right on the first call, off on the next.
    "nondeterministic": (with_model(
        "    calls = 0\n    def forward(self, x):\n        type(self).calls += 1\n"
        f"        out = {OP}(x)\n        if type(self).calls % 2 == 0:\n            out[0, 0] += 1.0\n        return out\n"),
        "nondeterministic"),
    # 9. A lazy tensor subclass: forward launches a token kernel and returns a tensor whose values are computed when
    # they are read (after the timed region: by the output fingerprint, the copy back, the comparison).
    "lazy_output": (with_model(
        f"    def forward(self, x):\n        {OP}(x[:1])\n        out = torch.empty_like(x).as_subclass(Lazy)\n"
        "        out._kb_src = x\n        return out\n",
        prelude="\n\nclass Lazy(torch.Tensor):\n    @classmethod\n"
                "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                f"        real = lambda a: {OP}(a._kb_src) if isinstance(a, Lazy) else a\n"
                "        with torch._C.DisableTorchFunctionSubclass():\n"
                "            return func(*[real(a) for a in args], **{k: real(v) for k, v in (kwargs or {}).items()})\n"),
        "lazy_output"),
    # 14. Precision flags changed from candidate code.
    "precision_flags": (with_model(
        f"    def forward(self, x):\n        torch.backends.cuda.matmul.allow_tf32 = True\n        return {OP}(x)\n"),
        "precision_flags_changed"),
    # 4. Inputs modified in place.
    "inputs_modified": (with_model(
        f"    def forward(self, x):\n        out = {OP}(x)\n        x.mul_(2)\n        return out\n"), "inputs_modified"),
    # PyTorch's relu behind a faked forward-audit report (own kernel ran, no PyTorch compute): the audit's report is
    # the worker's, so replacing what it runs on is flagged (worker/audit.AuditGuard).
    "patched_audit": (with_model(
        "    def forward(self, x):\n        return torch.relu(x)\n",
        prelude="\nimport kbench_env.worker.audit as _i\n_i.ForwardAudit._report = lambda self: "
                "{'forbidden_ops': {}, 'own_ops': ['kb_relu::relu_forward'], 'extension_calls': 1, "
                "'cpu_us': {'own': 1.0, 'total': 1.0}}\n"), "audit_patched"),
}

#: The harness inside the worker patched from candidate code: its clock, the standard library's clock during a
#: forward call. Neither is something the trusted side relies on (it times each block
#: with its own clock and reads the outputs itself), so none needs a flag of its own: each must earn nothing,
#: i.e. be flagged by another check, fail, or be paid no more than ``MARGIN`` times the honest kernel.
HARNESS_PATCHES = {
    "patched_timer": with_model(
        f"    def forward(self, x):\n        return {OP}(x)\n",
        prelude="\nimport itertools\nimport kbench_env.measure.stats as _t\n_c = itertools.count()\n"
                "_t._perf_counter = lambda: next(_c) * 1e-9\n"),
    "patched_clock_in_forward": with_model(
        f"    def forward(self, x):\n        import time\n        time.perf_counter = lambda: 0.0\n"
        f"        return {OP}(x)\n"),
}
#: How much faster than the honest kernel's speedup (the best of two evaluations) an unflagged attack may be paid:
#: above one evaluation's spread on a busy machine, under what a believed clock patch would claim (1e5x).
MARGIN = 1.5

#: Under rules="kernelbench" PyTorch compute is allowed beside an own kernel: these run none of their own, and are
#: caught as decoys instead.
KERNELBENCH_EXPECTED = {"torch_op": "no_kernel_launched", "fallback": "no_kernel_launched",
                        "reference_model": "no_kernel_launched"}


@pytest.fixture(scope="module", params=["strict", "kernelbench"])
def results(request):
    evaluator = request.getfixturevalue("evaluator" if request.param == "strict" else "kernelbench_evaluator")
    sources = {**{n: case[0] for n, case in CASES.items()}, **HARNESS_PATCHES}
    out = evaluator.evaluate_many([(RELU, src) for src in sources.values()], seed=99)
    honest = evaluator.evaluate(RELU, HONEST, seed=99)
    return dict(zip(sources, out)), honest, request.param, evaluator


# A pointer-keyed cache pays only when a timed call's fresh inputs land at an address seen before; when the
# allocator hands out new addresses it computes every call itself and is simply honest.
MAY_BE_HONEST = {"cache_by_pointer"}


@pytest.mark.parametrize("name", list(CASES))
def test_exploit_is_flagged(results, name):
    r = results[0][name]
    if name in MAY_BE_HONEST and r.correct and not r.integrity_flags:
        honest = results[1]  # compared by intervals, as in test_a_patched_harness_earns_nothing
        assert r.speedup_ci[0] <= 2 * honest.speedup_ci[1], \
            f"{name}: unflagged and faster than the honest kernel\n{r.feedback()}"
        return
    expected = CASES[name][1] if results[2] == "strict" else KERNELBENCH_EXPECTED.get(name, CASES[name][1])
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert r.rules == results[2]
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert any(k in kinds for k in expected), f"{name}: flags {r.integrity_flags}\n{r.feedback()}"
    assert r.reward == -1.0
    assert "REJECTED by integrity checks" in r.feedback()


def _honest_best(evaluator, first, seed: int | None = None) -> float:
    """The upper end of the better of ``first``'s speedup interval and a second honest evaluation's (paired
    timing, pipeline/pair_stats.py: with the tests' short timing one evaluation's interval is wide)."""
    again = evaluator.evaluate(RELU, HONEST, seed=seed)
    return max((r.speedup_ci or [0.0, r.speedup or 0.0])[1] for r in (first, again))


@pytest.mark.parametrize("name", list(HARNESS_PATCHES))
def test_a_patched_harness_earns_nothing(results, name):
    r, honest, _, evaluator = results[0][name], *results[1:]
    assert r.compiled and r.error_stage not in ("screen", "build", "load"), r.feedback()  # the patch ran
    if r.integrity_flags or not r.correct:
        assert r.reward <= 0, r.feedback()
        return
    if r.speedup > MARGIN * (honest.speedup or 0.0):
        # Compared by intervals: the attack earned something only if its speedup's interval lies wholly above MARGIN
        # times the honest kernel's (each holds at 95 %); a point estimate against a point estimate compared noise
        # (failed under load: 0.85x against 0.47x, for the same kernel timed at two moments).
        best = _honest_best(evaluator, honest, seed=99)
        lo = r.speedup_ci[0]
        assert lo <= MARGIN * best, (
            f"{name}: unflagged, correct and paid {r.speedup:.2f}x (interval from {lo:.2f}x) against the honest "
            f"kernel's interval up to {best:.2f}x\n{r.feedback()}")


def test_honest_solution_is_not_flagged(results):
    honest = results[1]
    assert honest.correct and honest.integrity_flags == [], honest.feedback()
    # forward's time is the kernel's (the shipped ReLU calls nothing else) but for its output's allocation and the
    # call's way through torch, which the CPU samples of the timed calls put in libtorch (coverage.sampled_share):
    # 0.82-0.89 per configuration on a loaded 2-core machine (1.0 by the profile alone)
    assert honest.kernel_coverage is not None and honest.kernel_coverage > 0.75, honest.feedback()


def test_phase_times_account_for_the_evaluation(results):
    """Where an evaluation's time went: the phases are reported, nested ones inside their parents, and together
    they do not exceed the evaluation's wall time."""
    ph = results[1].phase_seconds
    check_parts = ("check_inputs", "check_send", "check_recv", "reference_outputs", "check_judge")
    for name in ("build", "check", "worker_audit", "timing", "timed_output_checks", *check_parts):
        assert name in ph and ph[name] >= 0, ph
    assert ph["worker_audit"] > 0 and ph["check_recv"] > 0
    # the check's own parts are inside it (the rest of it: stepping aside for another candidate's timing)
    assert sum(ph[k] for k in check_parts) <= ph["check"] + 1e-3, ph
    assert ph["timed_output_checks"] <= ph["timing"]
    top = ("build", "device_wait", "check", "reference_timing", "timing", "plausibility")
    assert sum(ph.get(k, 0.0) for k in top) <= results[1].eval_seconds + 1e-3, (ph, results[1].eval_seconds)


def test_precision_downgrade_fails_correctness(evaluator):
    src = with_model(f"    def forward(self, x):\n        return {OP}(x).half().float()\n")
    r = evaluator.evaluate(RELU, src)
    assert not r.correct and r.error_stage == "correctness", r.feedback()
    assert "norm-wise relative error" in r.error


def test_candidate_cannot_reach_the_reference_output(evaluator):
    # Walk every object in the worker looking for a tensor with the output's shape that is not the input.
    src = with_model(
        "    def forward(self, x):\n        import gc\n"
        "        for o in gc.get_objects():\n"
        "            if isinstance(o, torch.Tensor) and o.shape == x.shape and o.data_ptr() != x.data_ptr() "
        "and (o >= 0).all():\n                return o.clone()\n"
        f"        return {OP}(x) * 0\n")
    r = evaluator.evaluate(RELU, src)
    assert not r.correct, r.feedback()


def test_deferred_work_in_a_thread_is_caught(evaluator):
    src = with_model(
        "    def forward(self, x):\n        import threading, time\n        out = torch.empty_like(x)\n"
        f"        def later():\n            time.sleep(0.05)\n            out.copy_({OP}(x))\n"
        "        threading.Thread(target=later).start()\n        return out\n")
    r = evaluator.evaluate(RELU, src)
    assert not r.correct, r.feedback()


def test_a_patched_worker_clock_is_not_read_on_the_cpu(evaluator):
    """The worker's clocks patched to a counter (every call "takes" a nanosecond): on the CPU the times are this
    side's clock around each block (pipeline/blocks.py), so the candidate is neither flagged nor believed: it is
    paid the honest kernel's speed, no more (roofline off: nothing else may catch it)."""
    from kbench_env.pipeline.evaluator import Evaluator

    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=evaluator.timing, roofline=False)
    body = f"    def forward(self, x):\n        return {OP}(x)\n"
    blind = with_model(body, prelude="\nimport itertools\nimport time\nimport kbench_env.measure.stats as _t\n"
                                     "_c = itertools.count()\n_t._perf_counter = lambda: next(_c) * 1e-9\n"
                                     "time.perf_counter = _t._perf_counter\n")
    r = ev.evaluate(RELU, blind)
    assert r.correct and not r.integrity_flags and r.speedup is not None, r.feedback()
    assert all(c.candidate_ms > 1e-4 for c in r.configs), r.feedback()  # the counter would say 1e-6 ms
    honest = ev.evaluate(RELU, HONEST)
    best = honest.speedup if r.speedup <= MARGIN * honest.speedup else _honest_best(ev, honest)
    assert r.speedup <= MARGIN * best, f"paid {r.speedup:.2f}x against the honest kernel's {best:.2f}x\n{r.feedback()}"


def test_time_under_the_roofline_floor_is_flagged():
    """Check 15: a time under half the device's floor (here a matrix product at a thousand times the calibrated
    FLOP rate) is reported by plausibility.below_floor; the same product at the calibrated rate is not."""
    from kbench_env.pipeline import plausibility
    from kbench_env.pipeline.baseline import Baselines
    from kbench_env.pipeline.check import instantiate
    from kbench_env.pipeline.result import EvalResult
    from kbench_env.sandbox.confine.policy import Limits

    task = resolve_task("level1/matmul_square")
    cfg = task.configs_for("cpu")[0]
    prepared: dict = {}
    _, cr = instantiate(task, cfg, 7, 0, prepared, "cpu")
    base = Baselines("cpu", "cpu", "/nonexistent", Limits(), {}, False, 1e-2)
    base.calibration = {"bandwidth": 1e10, "flops": {cfg.dtype: 1e10}}
    n = prepared[cfg.name].inputs[0].shape[0]
    honest_ms = 2 * n**3 / 1e10 * 1e3
    result = EvalResult(task=task.name, backend="cpu", device="cpu")
    result.configs.append(cr)
    cr.candidate_ms = honest_ms
    assert plausibility.below_floor(base, task, [cfg], prepared, result) == []
    cr.candidate_ms = honest_ms / 1000
    (hit,) = plausibility.below_floor(base, task, [cfg], prepared, result)
    assert hit[0] is cfg and hit[2] == pytest.approx(honest_ms, rel=1e-6)


def test_a_floor_from_a_calibration_taken_under_load_is_reverified(evaluator):
    """A calibration measured while the machine was busy understates the device and puts the floor too high: an
    honest matrix product timed later, unloaded, fell under half of it (18 below_roofline flags in the CPU
    false-positive campaign). A time under the floor is checked against a fresh calibration before it is flagged,
    and the evaluator keeps the better figures."""
    from kbench_env.pipeline.evaluator import Evaluator

    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=evaluator.timing)
    ev.baselines.calibration = {"bandwidth": 1e6, "flops": {"float32": 1e6}}  # what a starved machine could have measured
    r = ev.evaluate(resolve_task("level1/matmul_square"), read(ROOT / "tasks/solutions/cpu/level1/matmul_square.py"))
    assert r.correct, r.feedback()
    assert not r.integrity_flags, r.feedback()
    assert ev.baselines.calibration["flops"]["float32"] > 1e8 and ev.baselines.calibration["bandwidth"] > 1e8


def test_reference_parameters_do_not_depend_on_other_threads():
    """Evaluations run in threads (evaluate_many) and each builds its reference model from a seed: another thread
    re-seeding torch's global generator in between must not change the parameters (an H100 run with candidates
    side by side failed correct linear, convolution and norm kernels that way)."""
    import threading

    task = resolve_task("level2/linear_relu")
    cfg = task.configs_for("cpu")[0]
    mod, init_inputs, _ = task.instantiate(cfg, 1, "cpu")

    def weights(seed):
        return [p.detach().clone() for p in task.make_model(mod, init_inputs, seed, torch.float32, "cpu").parameters()]

    expected = weights(123)
    stop = threading.Event()

    def disturb():
        k = 0
        while not stop.is_set():
            task.instantiate(cfg, 1000 + k, "cpu")
            weights(1000 + k)
            k += 1

    threads = [threading.Thread(target=disturb) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(40):
            got = weights(123)
            assert all(torch.equal(a, b) for a, b in zip(got, expected))
    finally:
        stop.set()
        for t in threads:
            t.join()

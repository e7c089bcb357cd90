"""The rules option (rules.py) and kernel coverage (pipeline/coverage.py, worker/profile_times.py), on the CPU backend.

A KernelBench-style level-2 answer (PyTorch's convolution, then the ReLU and bias fused in a C++ kernel of its own)
is accepted and paid under rules="kernelbench" with its coverage reported, and flagged under the strict default;
under kernelbench rules a forward in which no own kernel runs is still caught, and faked coverage is not believed.
The other integrity checks under both rules: test_integrity.py. The GPU side (device-time attribution) is checked
here on synthetic profiler events and on a GPU in test_gpu.py."""

from __future__ import annotations

import contextlib
import json

import gymnasium as gym
import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from kbench_env.config import EvaluatorConfig
from kbench_env.measure.ownership import ALLOWED_GLUE, own_call
from kbench_env.pipeline import coverage
from kbench_env.pipeline import integrity
from kbench_env.worker import audit as worker_audit
from kbench_env.worker.profile_times import profile_times
from kbench_env.pipeline import rules
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task

CONV = resolve_task("level2/conv2d_relu_bias")

# The own kernel: the ReLU and the per-channel bias after the convolution, fused (the fast path: ~0.3 s builds).
KERNEL = r'''
import torch
import torch.nn as nn
from kbench_env.fastpath import cpp_kernel

relu_bias = cpp_kernel(r"""
#include <cstdint>
extern "C" void relu_bias(const float* y, const float* c, float* out, int64_t n, int64_t ch, int64_t hw) {
  for (int64_t i = 0; i < n; ++i) out[i] = (y[i] > 0.f ? y[i] : 0.f) + c[(i / hw) % ch];
}""", "relu_bias")

'''
INIT = '''class ModelNew(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.5)

    def forward(self, x):
'''
FUSED = ("        y = self.conv(x).contiguous()\n        out = torch.empty_like(y)\n"
         "        relu_bias(y, self.bias.contiguous(), out, y.numel(), y.shape[1], y.shape[2] * y.shape[3])\n"
         "        return out\n")
ALL_TORCH = "        return torch.relu(self.conv(x)) + self.bias\n"
ONE_ELEMENT = "        z = torch.zeros(1)\n        relu_bias(z, z, torch.empty(1), 1, 1, 1)\n"

KB_ANSWER = KERNEL + INIT + FUSED
CANDIDATES = {
    "kernelbench_answer": KB_ANSWER,
    # compiled, never called: PyTorch does everything
    "never_run": KERNEL + INIT + ALL_TORCH,
    # called, but at import, outside forward's path
    "run_at_import": KERNEL + "_z = torch.zeros(1)\nrelu_bias(_z, _z, torch.empty(1), 1, 1, 1)\n\n" + INIT + ALL_TORCH,
    # called in forward on a 1-element tensor while PyTorch does all the work: accepted, as KernelBench accepts it,
    # and shown for what it is by a coverage near 0
    "one_element_kernel": KERNEL + INIT + ONE_ELEMENT + ALL_TORCH,
    # the same, with PyTorch's work under a forged Triton-launch record (whose internals would count as own)
    "forged_record": KERNEL + INIT + ONE_ELEMENT
    + "        with torch.profiler.record_function('kbench_kernel::fused'):\n    " + ALL_TORCH,
}


@pytest.fixture(scope="module")
def kb(kernelbench_evaluator):
    out = kernelbench_evaluator.evaluate_many([(CONV, s) for s in CANDIDATES.values()], seed=7)
    return dict(zip(CANDIDATES, out))


def test_kernelbench_answer_is_accepted_and_paid_with_its_coverage(kb):
    r = kb["kernelbench_answer"]
    assert r.rules == "kernelbench"
    assert r.correct and r.integrity_flags == [] and r.stage == "timed" and r.reward > 0, r.feedback()
    # the convolution is PyTorch's and the fused epilogue the candidate's: both take time
    assert 0.0 < r.kernel_coverage < 1.0, r.feedback()
    assert all(c.kernel_coverage is not None and 0.0 < c.kernel_coverage < 1.0 for c in r.configs), r.feedback()
    assert r.kernel_coverage == pytest.approx(sum(c.kernel_coverage for c in r.configs) / len(r.configs), abs=1e-3)
    assert "Kernel coverage" in r.feedback() and "rules kernelbench" in r.feedback()
    assert r.to_dict()["kernel_coverage"] == r.kernel_coverage


def test_strict_default_still_flags_the_kernelbench_answer(evaluator):
    assert evaluator.rules == "strict"
    r = evaluator.evaluate(CONV, KB_ANSWER, seed=7)
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert "pytorch_compute_in_forward" in kinds and r.reward == -1.0, r.feedback()
    assert "aten::conv2d" in r.integrity_flags[0]
    # coverage is reported under strict rules too
    assert r.kernel_coverage is not None and 0.0 < r.kernel_coverage < 1.0


@pytest.mark.parametrize("name", ["never_run", "run_at_import"])
def test_no_own_kernel_in_forward_is_caught_under_kernelbench_rules(kb, name):
    r = kb[name]
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert kinds == ["no_kernel_launched"] and r.reward == -1.0, r.feedback()


def test_a_token_own_kernel_is_accepted_with_coverage_near_zero(kb):
    """What "runs" means: an own kernel is called inside the audited forward on every configuration. What it
    computes is not checked (KernelBench does not either); its share of the time is reported."""
    r = kb["one_element_kernel"]
    assert r.correct and r.integrity_flags == [], r.feedback()
    assert r.kernel_coverage is not None and r.kernel_coverage < 0.5, r.feedback()


def test_forged_kernel_records_are_not_believed(kb):
    """More kernel records than counted calls into the candidate's code: none count as its own time."""
    r = kb["forged_record"]
    assert r.correct and r.integrity_flags == [], r.feedback()
    assert r.kernel_coverage == 0.0, r.feedback()


# ---------------------------------------------------------------------- coverage of a profile, in this process


class _Ext:
    """A stand-in for a compiled extension module: one function that works in Python, one that calls PyTorch."""

    @staticmethod
    def spin(n):
        s = 0
        for i in range(n):
            s += i * i
        return s

    @staticmethod
    def calls_mm(a):
        return torch.mm(a, a)


def _audit(fn, namespaces=frozenset()):
    from kbench_env.backends import get_backend

    backend = get_backend("cpu")
    ext = backend.count_calls(_Ext)
    audit = worker_audit.ForwardAudit(set(namespaces), backend.extension_calls, "cpu")
    with audit, torch.no_grad():
        fn(ext)
    return audit.report()


def test_extension_calls_are_own_time_less_the_pytorch_they_call():
    a = torch.randn(192, 192)
    # (the CPU audit records every thread's operators, as a worker's must: here that is the test process, where an
    # earlier test's thread may still run one, 0.973 once in a full suite; the own call is long beside such a one)
    own_only = _audit(lambda ext: ext.spin(400000))
    assert own_only["extension_calls"] == 1 and coverage.coverage(own_only) == pytest.approx(1.0, abs=0.01)
    mixed = _audit(lambda ext: (ext.spin(20000), torch.mm(a, a)))
    assert 0.0 < coverage.coverage(mixed) < 1.0
    # PyTorch called from inside the candidate's code is PyTorch's time, and still a forbidden operator. (How much
    # less than 1 depends on the Python around the mm against the mm itself, which a loaded machine can skew: the
    # exact arithmetic is checked on fixed events below.)
    inside = _audit(lambda ext: ext.calls_mm(a))
    assert coverage.coverage(inside) < 1.0 and "aten::mm" in inside["forbidden_ops"]


def test_cpu_coverage_arithmetic_on_fixed_events():
    """An own region of 100 us with a 70 us aten::mm inside, a 20 us own-namespace op and a 30 us aten::add at
    the root: own = (100 - 70) + 20 = 50 of total 150."""
    region = _ev(1, "kbench_ext::calls_mm", 0, 100)
    mm = _ev(2, "aten::mm", 10, 80)
    view = _ev(3, "aten::view", 85, 90)  # glue inside a region is not subtracted
    region.append_cpu_child(mm)
    region.append_cpu_child(view)
    mm.set_cpu_parent(region)
    view.set_cpu_parent(region)
    mine = _ev(4, "mykernels::fused", 100, 120)
    add = _ev(5, "aten::add", 120, 150)
    times = profile_times([region, mm, view, mine, add], {"mykernels"}, True, "cpu", ALLOWED_GLUE)
    assert times == {"cpu_us": {"own": 50.0, "total": 150.0}}
    assert coverage.coverage(times) == pytest.approx(50 / 150, abs=1e-4)
    # records are not believed when the worker cannot vouch for them: the region then counts as nobody's
    untrusted = profile_times([region, mm, view, mine, add], {"mykernels"}, False, "cpu", ALLOWED_GLUE)
    assert untrusted == {"cpu_us": {"own": 20.0, "total": 125.0}}  # mm, view, mine, add


def test_extension_calls_open_records_only_while_profiled():
    from torch.autograd.profiler import profile

    from kbench_env.backends import get_backend

    ext = get_backend("cpu").count_calls(_Ext)
    with profile(use_kineto=False) as p:
        ext.spin(10)
    assert [e.name for e in p.function_events] == ["kbench_ext::spin"]
    assert not torch._C._autograd._profiler_enabled()
    assert isinstance(own_call("spin"), contextlib.nullcontext)  # no profiler, no record


# ---------------------------------------------------------------------- device time on a GPU, synthetic events

PREFIXES = coverage.TORCH_KERNEL_PREFIXES


def _ev(i, name, start, end, device=DeviceType.CPU, activity="cpu_op", linked=0):
    return FunctionEvent(id=i, name=name, thread=1, start_us=start, end_us=end, device_type=device,
                         activity_type=activity, linked_correlation_id=linked)


def _gpu_profile(trust=True):
    """A KernelBench-style forward as kineto reports it: aten::conv2d launches a cuDNN kernel (linked to the
    operator); the candidate's pybind call (its kbench_ext record) launches its fused kernel (not linked: no
    operator is open) and, through at::native directly, a PyTorch kernel; plus a copy, an annotation's device
    span, a kernel launched from nowhere known, and a library kernel of unfamiliar name that the host launched
    outside the candidate's code with no link to an operator (cuDNN does this)."""
    cuda = DeviceType.CUDA
    host = [
        _ev(1, "aten::conv2d", 0, 100), _ev(2, "aten::cudnn_convolution", 10, 90),
        _ev(9001, "cudaLaunchKernel", 20, 25, activity="cuda_runtime"),
        _ev(3, "kbench_ext::fused", 110, 150, activity="user_annotation"),
        _ev(9002, "cudaLaunchKernel", 120, 125, activity="cuda_runtime"),
        _ev(9003, "cudaLaunchKernel", 130, 135, activity="cuda_runtime"),
        _ev(9004, "cudaLaunchKernel", 140, 145, activity="cuda_runtime"),
        _ev(4, "aten::copy_", 160, 170), _ev(9005, "cudaMemcpyAsync", 162, 165, activity="cuda_runtime"),
        _ev(9006, "cudaLaunchKernel", 175, 178, activity="cuda_runtime"),
    ]
    dev = [
        _ev(9001, "void cudnn::cnn::conv2d_grouped_direct_kernel<float>", 200, 1000, cuda, "kernel", linked=2),
        _ev(9002, "fused_relu_bias(float const*, float*, long)", 1000, 1150, cuda, "kernel"),
        _ev(9003, "gemm_epilogue(float*)", 1150, 1200, cuda, "kernel"),  # own, though named like a library's
        _ev(9004, "void at::native::vectorized_elementwise_kernel<4>", 1200, 1250, cuda, "kernel"),
        _ev(9005, "Memcpy DtoD (Device -> Device)", 1250, 1300, cuda, "gpu_memcpy", linked=4),
        _ev(3, "kbench_ext::fused", 1000, 1200, cuda, "gpu_user_annotation"),
        _ev(9100, "mystery_kernel", 1300, 1400, cuda, "kernel"),
        _ev(9006, "conv_fwd_tiled_kernel_v2", 1400, 1500, cuda, "kernel"),
    ]
    events = EventList(host + dev)
    events._build_tree()
    return profile_times(events, set(), trust, "cuda", ALLOWED_GLUE)


def test_device_time_is_attributed_by_launcher_then_name():
    rows = {name.split("(")[0].split("<")[0]: (cls, us) for name, cls, us in _gpu_profile()["device_us"]}
    assert rows == {"void cudnn::cnn::conv2d_grouped_direct_kernel": ("torch", 800.0),
                    "fused_relu_bias": ("own", 150.0), "gemm_epilogue": ("own", 50.0),
                    "void at::native::vectorized_elementwise_kernel": ("own", 50.0),
                    "Memcpy DtoD ": ("torch", 50.0), "mystery_kernel": (None, 100.0),
                    "conv_fwd_tiled_kernel_v2": ("other", 100.0)}
    report = _gpu_profile()
    # own: the fused kernel, the gemm-named one launched from the candidate's call, the unattributed one by its
    # name; not at::native's kernel (PyTorch's namespace, whoever launched it), the cuDNN kernels or the copy
    assert coverage.coverage(report, PREFIXES) == pytest.approx((150 + 50 + 100) / 1300, abs=1e-3)
    assert sorted(coverage.own_device_kernels(report, PREFIXES)) == [
        "fused_relu_bias(float const*, float*, long)", "gemm_epilogue(float*)", "mystery_kernel"]


def test_library_kernels_of_unfamiliar_names_are_attributed_by_their_launch():
    """As kineto reports a cuDNN FFT convolution (torch 2.11, H100): the device kernels carry no link to an
    operator, only the id of their host launch (cudaLaunchKernel), whose CPU parent is aten::cudnn_convolution.
    Their names (DSE::vector_fft, pointwise_mult_and_sum_complex) are on no list of library prefixes: they are
    PyTorch's by their launch, so a PyTorch-only forward has coverage 0 and no own kernel."""
    cuda = DeviceType.CUDA
    host = [_ev(1, "aten::conv2d", 0, 100), _ev(2, "aten::cudnn_convolution", 10, 90),
            _ev(1289, "cudaLaunchKernel", 20, 25), _ev(1307, "cudaLaunchKernel", 40, 45),
            _ev(3, "aten::relu", 100, 120), _ev(1337, "cudaLaunchKernel", 105, 110)]
    dev = [_ev(1289, "void DSE::vector_fft<0, 1, 128, 8, 8, 1, float, float, float2>", 200, 700, cuda, "kernel"),
           _ev(1307, "void pointwise_mult_and_sum_complex<float2, 8, 4>", 700, 1700, cuda, "kernel"),
           _ev(1337, "void at::native::vectorized_elementwise_kernel<4>", 1700, 1750, cuda, "kernel")]
    events = EventList(host + dev)
    events._build_tree()
    report = profile_times(events, set(), True, "cuda", ALLOWED_GLUE)
    assert {cls for _, cls, _ in report["device_us"]} == {"torch"}
    assert coverage.coverage(report, PREFIXES) == 0.0
    assert coverage.own_device_kernels(report, PREFIXES) == []
    flags = integrity.audit_flags(report, "gpu", PREFIXES)
    assert [f.kind for f in flags] == ["no_kernel_launched"]


def test_device_time_without_trusted_records_falls_back_to_names():
    report = _gpu_profile(trust=False)
    # the gemm-named kernel is now judged by its name alone, and so is the unlinked library kernel: without
    # trusted spans of the candidate's code, a launch outside them proves nothing
    assert coverage.coverage(report, PREFIXES) == pytest.approx((150 + 100 + 100) / 1300, abs=1e-3)


def test_a_pytorch_only_gpu_forward_runs_no_own_kernel():
    cuda = DeviceType.CUDA
    events = EventList([
        _ev(1, "aten::conv2d", 0, 100), _ev(2, "aten::cudnn_convolution", 10, 90),
        _ev(9001, "cudaLaunchKernel", 20, 25, activity="cuda_runtime"),
        # a cuDNN kernel whose name no prefix knows: the operator that launched it says whose it is
        _ev(9001, "void implicit_gemm_sm90_variant_x(float)", 200, 1000, cuda, "kernel", linked=2),
        _ev(7, "forged", 0, 100, activity="user_annotation"),
        _ev(7, "forged", 200, 1000, cuda, "gpu_user_annotation"),
    ])
    events._build_tree()
    report = {"own_ops": [], "extension_calls": 0,
              **profile_times(events, set(), True, "cuda", ALLOWED_GLUE)}
    assert coverage.coverage(report, PREFIXES) == 0.0
    for r in rules.RULES:
        assert [f.kind for f in rules.audit_flags(r, report, "gpu", PREFIXES)] == ["no_kernel_launched"]


# ---------------------------------------------------------------------- plumbing


def test_unknown_rules_are_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown rules 'loose'.*'strict'.*'kernelbench'"):
        Evaluator(device="cpu", rules="loose", spare_worker=False)
    with pytest.raises(ValueError, match="unknown rules"):
        gym.make("KBench-v0", task="level1/relu", device="cpu", rules="KernelBench",
                 config=EvaluatorConfig.from_options(spare_worker=False))


def test_env_takes_rules_and_its_prompt_states_them():
    env = gym.make("KBench-v0", task="level2/conv2d_relu_bias", device="cpu", rules="kernelbench",
                   config=EvaluatorConfig.from_options(spare_worker=False))
    try:
        assert env.unwrapped.evaluator.rules == "kernelbench"
        obs, _ = env.reset(seed=0)
        assert "Rules: kernelbench" in obs and "coverage" in obs and "are not allowed" not in obs
        obs, reward, _, _, info = env.step(KB_ANSWER)  # the observation reports the coverage
        assert reward > 0 and 0 < info["eval"]["kernel_coverage"] < 1, obs
        assert "Kernel coverage (share of forward's CPU time in your own kernels; rules kernelbench): " in obs
    finally:
        env.close()
    strict = gym.make("KBench-v0", task="level1/relu", device="cpu", config=EvaluatorConfig.from_options(spare_worker=False))
    try:
        obs, _ = strict.reset(seed=0)
        assert strict.unwrapped.evaluator.rules == "strict" and "are not allowed" in obs
        assert "Rules: kernelbench" not in obs and "rules kernelbench" not in obs
        with pytest.raises(ValueError, match="differs from the given evaluator"):
            gym.make("KBench-v0", task="level1/relu", evaluator=strict.unwrapped.evaluator, rules="kernelbench")
    finally:
        strict.close()


@pytest.mark.parametrize("backend", ["cpu", "cuda", "triton"])
def test_every_backends_prompt_rules_read_under_kernelbench(backend):
    from kbench_env.backends import get_backend

    text = get_backend(backend).rules()
    kb_text = rules.prompt_rules(text, "kernelbench")
    assert "are not allowed" in text and "are not allowed" not in kb_text and "Rules: kernelbench" in kb_text
    assert rules.prompt_rules(text, "strict") == text


def test_eval_cli_rules(tmp_path):
    from test_cli_and_formats import kbench

    sol = tmp_path / "kb.py"
    sol.write_text(KB_ANSWER)
    p = kbench("eval", "--task", "level2/conv2d_relu_bias", "--solution", str(sol), "--device", "cpu", "--json",
               "--rules", "kernelbench")
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout)
    assert r["rules"] == "kernelbench" and r["correct"] and 0 < r["kernel_coverage"] < 1
    bad = kbench("eval", "--task", "level1/relu", "--solution", str(sol), "--rules", "loose")
    assert bad.returncode == 2 and "--rules" in bad.stderr and "kernelbench" in bad.stderr


def test_run_table_and_report_show_coverage(tmp_path):
    from rich.console import Console

    from kbench_apps.report import write_report
    from kbench_apps.runlog import RunLog
    from kbench_apps.runner import print_table

    ev = {"correct": True, "speedup": 1.5, "integrity_flags": [], "kernel_coverage": 0.25, "rules": "kernelbench"}
    log = RunLog(tmp_path / "run.jsonl", fresh=True)
    log.append({"kind": "attempt", "agent": "A", "task": "level2/x", "level": 2, "eval": ev, "time": 1})
    log.append({"kind": "task_done", "agent": "A", "task": "level2/x", "level": 2, "attempts": 1, "correct": True,
                "best_speedup": 1.5, "first_speedup": 1.5, "best_coverage": 0.25, "seconds": 1.0, "time": 2})
    console = Console(record=True, width=160)
    print_table(console, log, "A", ["level2/x"])
    text = console.export_text()
    assert "coverage" in text and "25%" in text
    summary, md = write_report([log.path], tmp_path / "report", plots=False)
    assert summary["tasks"]["level2/x"]["A"]["coverage"] == 0.25 and summary["agents"]["A"]["mean_coverage"] == 0.25
    assert "1.500x (cov 25%)" in md.read_text() and "kernel coverage" in md.read_text()

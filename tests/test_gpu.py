"""On a CUDA GPU: every shipped CUDA and Triton solution is correct, earns a positive reward and raises no
integrity flag; the adversarial candidates of test_integrity.py's kinds, rewritten for CUDA, are flagged or fail
correctness (or, for the three that only attack timing, gain nothing). Skipped where no GPU is present.

All evaluations run in two batched calls (``evaluate_many``), so cold ``load_inline`` builds (~60 s each on an
H100 host) overlap. The adversarial candidates share one small extension (one build)."""

from __future__ import annotations

import os

from pathlib import Path

import pytest
import torch

from conftest import ROOT, read
from kbench_env.tasks.suite import resolve_task

pytestmark = pytest.mark.gpu

# KBENCH_GPU_ONLY="level1/relu,robust/" restricts the solutions evaluated (a device call has 10 minutes).
_ONLY = [o for o in os.environ.get("KBENCH_GPU_ONLY", "").split(",") if o]
CUDA_SOLUTIONS = [p for p in sorted((ROOT / "tasks/solutions/cuda").glob("*/*.py"))
                  if not _ONLY or any(o in f"{p.parent.name}/{p.stem}" for o in _ONLY)]
TRITON_SOLUTIONS = sorted((ROOT / "tasks/solutions/triton").glob("*/*.py"))
FAST_CUDA_SOLUTIONS = sorted((ROOT / "tasks/solutions/fast_cuda").glob("*/*.py"))
TIMING = {"warmup": 1, "min_reps": 5, "max_reps": 40, "min_seconds": 0.05}


def _task_name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


# ---------------------------------------------------------------------- adversarial candidates (CUDA)

ADV_EXT = r'''
import os, sys, time, threading, itertools
import numpy as np
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename T>
__global__ void kb_adv_relu(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float f = static_cast<float>(x[i]);
        y[i] = static_cast<T>(f < 0.f ? 0.f : f);
    }
}

__global__ void kb_adv_touch(const float* __restrict__ x, int64_t n) {}

static void launch_relu(const torch::Tensor& x, torch::Tensor& y, cudaStream_t stream) {
    const int64_t n = x.numel();
    if (n == 0) return;
    const int grid = (int)std::min<int64_t>((n + 255) / 256, 4096);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), "kb_adv_relu", [&] {
        kb_adv_relu<scalar_t><<<grid, 256, 0, stream>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor relu(torch::Tensor x) {  // honest: the current stream
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    launch_relu(xc, y, at::cuda::getCurrentCUDAStream());
    return y;
}

torch::Tensor relu_side_stream(torch::Tensor x) {  // the work goes to another stream, nothing waits for it
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    launch_relu(xc, y, at::cuda::getStreamFromPool());
    return y;
}

void relu_into(torch::Tensor x, torch::Tensor y) {
    auto xc = x.contiguous();
    launch_relu(xc, y, at::cuda::getCurrentCUDAStream());
}

void touch(torch::Tensor x) {  // a kernel that writes nothing
    kb_adv_touch<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(nullptr, x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor matmul_cublas(torch::Tensor a, torch::Tensor b) {  // cuBLAS through ATen inside the extension
    return at::matmul(a, b);
}
"""

cpp_source = """torch::Tensor relu(torch::Tensor x);
torch::Tensor relu_side_stream(torch::Tensor x);
void relu_into(torch::Tensor x, torch::Tensor y);
void touch(torch::Tensor x);
torch::Tensor matmul_cublas(torch::Tensor a, torch::Tensor b);"""

ext = load_inline(name="kb_test_adversarial", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["relu", "relu_side_stream", "relu_into", "touch", "matmul_cublas"],
                  extra_cuda_cflags=["-O3"])

'''


def _adv(forward_body: str, prelude: str = "", init: str = "") -> str:
    init = init or "    def __init__(self):\n        super().__init__()\n"
    return ADV_EXT + prelude + "\n\nclass ModelNew(nn.Module):\n" + init + "\n    def forward(self, *args):\n" + forward_body


def _attack_on_cuda_relu(row: str) -> str:
    """Issue #21's attack ``row`` (tests/data/attacks/, written for the CPU): its attack, everything before the kernel
    it reuses, put before the shipped CUDA ReLU solution (its own build, shared with that solution's test)."""
    text = (ROOT / "tests/data/attacks" / f"{row}.py").read_text()
    return text[:text.index("# The shipped solution's kernel")] + (ROOT / "tasks/solutions/cuda/level1/relu.py").read_text()


PATCHED_EVENTS = "import torch\ntorch.cuda.Event.elapsed_time = lambda self, end: 1e-4\n"
#: What catches a worker whose clock or CUDA events lie (the trusted side never reads its clock, and reads its
#: events only inside its own wall-clock bound of the block): the bound, the re-timing of a large speedup (11), the
#: measured FLOP rate (15). Or the lie is not believed, and the kernel is paid no more than the honest one.
TIMING_LIE_CAUGHT = ("device_time_outside_trusted_bound", "speedup_not_reverified", "below_roofline")

#: name -> (task, source, expected flag kinds, strict). Strict: must be flagged (with one of the expected kinds, if
#: any are named) or fail correctness. Not strict (attacks on timing only, which the CUDA-graph timing mostly
#: neutralises): any flag or failure will do, or else its speedup must be no more than 1.5x the honest solution's
#: for the same task.
ADVERSARIAL = {
    "torch_op": ("level1/relu", _adv("        return torch.relu(args[0])\n"), ("pytorch_compute_in_forward",), True),
    "torch_fallback": ("level1/relu", _adv(
        "        try:\n            return ext.no_such_function(args[0])\n"
        "        except AttributeError:\n            return args[0].clamp(min=0)\n"), ("pytorch_compute_in_forward",), True),
    "decoy_never_launched": ("level1/relu", _adv(
        "        x = args[0]\n        y = np.maximum(x.float().cpu().numpy(), 0)\n"
        "        return torch.from_numpy(y).to(device=x.device, dtype=x.dtype)\n"), ("no_kernel_launched",), True),
    "cublas_in_extension": ("level1/matmul_square", _adv("        return ext.matmul_cublas(args[0], args[1])\n"),
                            ("pytorch_compute_in_forward",), True),
    "side_stream": ("level1/relu", _adv("        return ext.relu_side_stream(args[0])\n"),
                    ("timed_output_wrong",), False),
    "host_thread_later": ("level1/relu", _adv(
        "        x = args[0]\n        out = torch.empty_like(x)\n"
        "        def later():\n            time.sleep(0.05)\n            ext.relu_into(x, out)\n"
        "        threading.Thread(target=later, daemon=True).start()\n        return out\n"), (), True),
    "output_never_written": ("level1/relu", _adv(
        "        out = torch.empty_like(args[0])\n        ext.touch(args[0])\n        return out\n"), (), True),
    "cache_by_pointer": ("level1/relu", _adv(
        "        x = args[0]\n        key = (x.data_ptr(), tuple(x.shape), x.dtype)\n"
        "        if key not in CACHE:\n            CACHE[key] = ext.relu(x)\n        return CACHE[key]\n",
        prelude="CACHE = {}\n"), ("timed_output_wrong",), False),
    "patched_timer": ("level1/relu", _adv(
        "        return ext.relu(args[0])\n",
        prelude="import kbench_env.measure.stats as _t\n_c = itertools.count()\n_t._perf_counter = lambda: next(_c) * 1e-9\n"),
        TIMING_LIE_CAUGHT, False),
    "patched_cuda_events": ("level1/relu", _adv("        return ext.relu(args[0])\n", prelude=PATCHED_EVENTS),
                            TIMING_LIE_CAUGHT, False),
    "tf32_flag_flipped": ("level1/relu", _adv(
        "        torch.backends.cuda.matmul.allow_tf32 = True\n        torch.backends.cudnn.allow_tf32 = True\n"
        "        return ext.relu(args[0])\n"), ("precision_flags_changed",), True),
    "zeros_output": ("level1/relu", _adv(
        "        out = torch.zeros_like(args[0])\n        ext.touch(args[0])\n        return out\n"), (), True),
    "aliased_input": ("level1/relu", _adv("        ext.touch(args[0])\n        return args[0]\n"), (), True),
    "shown_shapes_only": ("level1/relu", _adv(  # right on the prompt's shapes, nothing computed on the others
        "        x = args[0]\n        if tuple(x.shape) in SHOWN:\n            return ext.relu(x)\n"
        "        out = torch.empty_like(x)\n        ext.touch(x)\n        return out\n",
        prelude="SHOWN = {(16, 4096), (256, 65536)}\n"), (), True),
    "half_precision": ("level1/relu", _adv(  # fp32 task computed in fp16
        "        x = args[0]\n        return ext.relu(x.half()).to(x.dtype)\n"), (), True),
    "gc_walk_for_reference": ("level1/relu", _adv(  # nothing to find: the reference output is not in this process
        "        x = args[0]\n        for o in gc.get_objects():\n"
        "            if isinstance(o, torch.Tensor) and o is not x and o.shape == x.shape and o.device == x.device "
        "and o.dtype == x.dtype and bool((o >= 0).all()):\n                return o\n"
        "        return ext.relu(x)\n", prelude="import gc\n"), (), False),
    "nondeterministic": ("level1/relu", _adv(  # 12: right on odd calls, an unwritten output on even ones
        "        x = args[0]\n        CALLS[0] += 1\n        if CALLS[0] % 2:\n            return ext.relu(x)\n"
        "        out = torch.empty_like(x)\n        ext.touch(x)\n        return out\n",
        prelude="CALLS = [0]\n"), ("nondeterministic",), True),
    "stale_after_checks": ("level1/relu", _adv(  # 13: honest through the correctness runs, then no launch at all
        "        x = args[0]\n        CALLS[0] += 1\n        key = (tuple(x.shape), x.dtype)\n"
        "        if CALLS[0] > 12 and key in LAST:\n            return LAST[key]\n"
        "        LAST[key] = ext.relu(x)\n        return LAST[key]\n",
        prelude="CALLS = [0]\nLAST = {}\n"), ("timed_output_wrong", "below_roofline", "speedup_not_reverified"), True),
    "stale_every_other": ("level1/relu", _adv(  # 13: every other call returns the previous call's output (its
        # inputs differ by 1% noise only: caught when a sampled call's output is read and compared)
        "        x = args[0]\n        CALLS[0] += 1\n        key = (tuple(x.shape), x.dtype)\n"
        "        if CALLS[0] % 2 == 0 and key in LAST:\n            return LAST[key]\n"
        "        LAST[key] = ext.relu(x)\n        return LAST[key]\n",
        prelude="CALLS = [0]\nLAST = {}\n"), ("timed_output_wrong",), True),
    "lazy_output": ("level1/relu", _adv(  # 9: a tensor subclass computed when read, after the timed region
        "        x = args[0]\n        ext.touch(x)\n        out = torch.empty_like(x).as_subclass(Lazy)\n"
        "        out._kb_src = x\n        return out\n",
        prelude="class Lazy(torch.Tensor):\n    @classmethod\n"
                "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                "        real = lambda a: ext.relu(a._kb_src) if isinstance(a, Lazy) else a\n"
                "        with torch._C.DisableTorchFunctionSubclass():\n"
                "            return func(*[real(a) for a in args], **{k: real(v) for k, v in (kwargs or {}).items()})\n"),
        ("lazy_output",), True),
    # 15 behind 9: the shipped matmul with its events patched (an impossible FLOP rate, were the events believed)
    "patched_events_matmul": ("level1/matmul_square",
                              PATCHED_EVENTS + (ROOT / "tasks/solutions/cuda/level1/matmul_square.py").read_text(),
                              TIMING_LIE_CAUGHT, False),
    "inputs_modified": ("level1/relu", _adv(
        "        x = args[0]\n        out = ext.relu(x)\n        ext.relu_into(x, x)\n        return out\n"),
        ("inputs_modified",), True),
    # issue #21, rows 1 and 2 on the GPU (tests/test_trust_boundary.py on the CPU): the worker's timing summary
    # patched, or its replies' times divided on their way out, each by 4; an H100 paid them unflagged
    "attack_row1_summarize_patched": ("level1/relu", _attack_on_cuda_relu("row1_summarize_patched"), (), False),
    "attack_row2_pack_wrapped": ("level1/relu", _attack_on_cuda_relu("row2_pack_wrapped"), (), False),
}


# ---------------------------------------------------------------------- rules="kernelbench" (rules.py)

#: KernelBench's typical level-2 answer: PyTorch's (cuDNN's) convolution, then the ReLU and bias fused in a CUDA
#: kernel of the candidate's own (one extension, shared by the cases below: one build).
KB_EPILOGUE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

template <typename T>
__global__ void kb_fused_relu_bias(const T* __restrict__ y, const T* __restrict__ c, T* __restrict__ out,
                                   int64_t n, int64_t ch, int64_t hw) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = static_cast<float>(y[i]);
        out[i] = static_cast<T>((v > 0.f ? v : 0.f) + static_cast<float>(c[(i / hw) % ch]));
    }
}

torch::Tensor relu_bias(torch::Tensor y, torch::Tensor c) {
    TORCH_CHECK(y.is_cuda() && y.dim() == 4 && c.numel() == y.size(1) && c.scalar_type() == y.scalar_type(),
                "relu_bias: a 4-d CUDA tensor and one bias per channel of its dtype expected");
    auto yc = y.contiguous();
    auto cc = c.contiguous();
    auto out = torch::empty_like(yc);
    const int64_t n = yc.numel();
    if (n == 0) return out;
    const int64_t ch = yc.size(1), hw = yc.size(2) * yc.size(3);
    const int grid = (int)std::min<int64_t>((n + 255) / 256, 8192);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, yc.scalar_type(), "kb_relu_bias",
                                    [&] {
        kb_fused_relu_bias<scalar_t><<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            yc.data_ptr<scalar_t>(), cc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, ch, hw);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(name="kb_test_kernelbench_rules",
                  cpp_sources="torch::Tensor relu_bias(torch::Tensor y, torch::Tensor c);",
                  cuda_sources=cuda_source, functions=["relu_bias"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.5)

    def forward(self, x):
'''

#: name -> (rules, forward body) on level2/conv2d_relu_bias.
KERNELBENCH_RULES = {
    "fused_epilogue": ("kernelbench", "        return ext.relu_bias(self.conv(x), self.bias)\n"),
    "fused_epilogue_strict": ("strict", "        return ext.relu_bias(self.conv(x), self.bias)\n"),
    # the extension is loaded but forward is PyTorch's alone: the cuDNN kernels are not the candidate's
    "no_own_kernel": ("kernelbench", "        return torch.relu(self.conv(x)) + self.bias\n"),
}


# ---------------------------------------------------------------------- fixtures


def _evaluator(backend: str, alone: bool = False, rules: str = "strict", format: str = "kernelbench"):
    """An Evaluator as users get one on a GPU: candidates' checks side by side (up to SHARED_CAP at once), each
    timing with the device to itself (pipeline/device_hold.py). Timing side by side without the lock would make
    this side's clock read other candidates' work as the timed block's: the trusted bound would flag honest
    solutions (it did, a few in each such run), so the suite times as the product does. ``alone``: one candidate
    at a time from its checks to its timing's end (an out-of-memory result run again)."""
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    return Evaluator(device="cuda", backend=backend, compile_baseline=False, timing=dict(TIMING),
                     limits=Limits(build_timeout=1200, run_timeout=120, time_timeout=300), rules=rules,
                     format=format, shared_checks=not alone)


def _record(kind: str, name: str, r) -> None:
    """KBENCH_GPU_RECORD=FILE: append each result as one JSON line (what bench/results/ keeps of a GPU run)."""
    path = os.environ.get("KBENCH_GPU_RECORD")
    if not path:
        return
    import datetime as dt
    import json

    rec = {"kind": kind, "name": name, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": dt.datetime.now().isoformat(timespec="seconds"),
           "timing": "alone, checks shared", **r.to_dict()}
    rec.pop("log_tail", None)
    with open(path, "a") as f:
        f.write(json.dumps(rec, default=str) + "\n")


@pytest.fixture(scope="module")
def cuda_results():
    ev = _evaluator("cuda")
    items = [(resolve_task(_task_name(p)), p.read_text()) for p in CUDA_SOLUTIONS]
    items += [(resolve_task(task), src) for task, src, _, _ in ADVERSARIAL.values()]
    names = [("cuda_solution", _task_name(p)) for p in CUDA_SOLUTIONS] + [("cuda_adversarial", n) for n in ADVERSARIAL]
    out = _evaluate_recorded(ev, items, names, "cuda", int(os.environ.get("KBENCH_GPU_WORKERS", 8)))
    solutions = dict(zip(CUDA_SOLUTIONS, out[: len(CUDA_SOLUTIONS)]))
    adversarial = dict(zip(ADVERSARIAL, out[len(CUDA_SOLUTIONS):]))
    return solutions, adversarial, {_task_name(p): r for p, r in solutions.items()}


@pytest.fixture(scope="module")
def triton_results():
    pytest.importorskip("triton")
    ev = _evaluator("triton")
    items = [(resolve_task(_task_name(p)), p.read_text()) for p in TRITON_SOLUTIONS]
    names = [("triton_solution", _task_name(p)) for p in TRITON_SOLUTIONS]
    return dict(zip(TRITON_SOLUTIONS, _evaluate_recorded(ev, items, names, "triton", 8)))


@pytest.fixture(scope="module")
def fast_cuda_results():
    ev = _evaluator("cuda", format="fast")
    items = [(resolve_task(_task_name(p)), p.read_text()) for p in FAST_CUDA_SOLUTIONS]
    names = [("fast_cuda_solution", _task_name(p)) for p in FAST_CUDA_SOLUTIONS]
    return dict(zip(FAST_CUDA_SOLUTIONS, _evaluate_recorded(ev, items, names, "cuda", 4)))


@pytest.fixture(scope="module")
def kernelbench_rule_results():
    task = resolve_task("level2/conv2d_relu_bias")
    out = {}
    for rules in ("kernelbench", "strict"):
        names = [n for n, (r, _) in KERNELBENCH_RULES.items() if r == rules]
        items = [(task, KB_EPILOGUE + KERNELBENCH_RULES[n][1]) for n in names]
        results = _evaluate_recorded(_evaluator("cuda", rules=rules), items, [("cuda_rules", n) for n in names],
                                     "cuda", 2)
        out.update(zip(names, results))
    return out


def _evaluate_recorded(ev, items: list, names: list, backend: str, workers: int) -> list:
    """Evaluate ``items`` together, recording each result as it arrives (a device call cut short keeps what
    finished). A candidate that ran out of GPU memory while others' checks shared the device (seen on an H100 with
    16 side by side) is evaluated again with the device to itself, and that result counts."""
    out: list = [None] * len(items)
    for i, r in ev.evaluate_iter(items, max_workers=workers, seed=2024):
        out[i] = r
        _record(*names[i], r)
    again = [i for i, r in enumerate(out) if r is not None and not r.correct
             and "out of memory" in (r.error or "").lower()]
    alone = _evaluator(backend, alone=True) if again else None
    for i in again:
        out[i] = alone.evaluate(*items[i], seed=2024)
        _record(names[i][0] + "_alone", names[i][1], out[i])
    return out


# ---------------------------------------------------------------------- tests


def test_auto_picks_the_gpu_and_the_cli_refuses_one_that_is_not_there():
    """What the CPU suite cannot see: with a GPU present, "auto" means it, and `--device cuda:N` past the last GPU
    is refused up front while `--device cuda` is accepted."""
    from kbench_apps.cli_output import require_device
    from kbench_env.machine.device import resolve_device

    assert resolve_device("auto") == "cuda"
    require_device("cuda")
    require_device(f"cuda:{torch.cuda.device_count() - 1}")
    with pytest.raises(ValueError, match="no such CUDA device"):
        require_device(f"cuda:{torch.cuda.device_count()}")


def solution_problem(r, every_config: bool = True) -> str | None:
    """Why a shipped solution's result fails its test, or None (also applied to recorded runs by
    bench/gpu_tests_verdict.py)."""
    if not (r.correct and not r.integrity_flags):
        return "not correct, or flagged"
    if not (r.reward > 0 and r.speedup and r.speedup > 0):
        return "no positive reward and speedup"
    if every_config and not (all(c.correct for c in r.configs) and any(c.held_out for c in r.configs)):
        return "a configuration failed, or none is held out"
    return None


def exploit_problem(name: str, r, honest: dict) -> str | None:
    """Why an adversarial candidate's result fails its test (it was not caught and paid, or did not even load),
    or None. ``honest``: the shipped solutions' results by task name."""
    task, _, expected, strict = ADVERSARIAL[name]
    honest = honest.get(task)
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    # the candidate must have been built and loaded: a build or load failure is not the check catching it
    if not r.compiled or r.error_stage in ("screen", "build", "load"):
        return f"{name} did not load"
    caught = bool(r.integrity_flags) or not r.correct
    if strict and expected and r.integrity_flags and not any(k in kinds for k in expected):
        return f"{name}: flags {r.integrity_flags}, expected one of {list(expected)}"
    if strict:
        if not caught:
            return f"{name} passed unflagged"
        if not r.reward < 0:
            return f"{name}: reward {r.reward} is not negative"
    elif not caught:  # a timing-only attack that went unnoticed must not have paid
        if not (honest is not None and honest.speedup and r.speedup is not None):
            return f"{name}: uncaught, and no honest speedup to compare with"
        if r.speedup > 1.5 * honest.speedup:
            return f"{name}: uncaught and paid, {r.speedup:.2f}x vs honest {honest.speedup:.2f}x"
    return None


def extension_problem(r) -> str | None:
    """Why the shared adversarial extension's honest path (``patched_timer``'s result) is not right on every
    configuration, or None."""
    return None if r.configs and all(c.correct for c in r.configs) else "a configuration failed"


@pytest.mark.parametrize("path", CUDA_SOLUTIONS, ids=[_task_name(p) for p in CUDA_SOLUTIONS])
def test_cuda_solution_is_correct_on_the_gpu(cuda_results, path):
    r = cuda_results[0][path]
    why = solution_problem(r)
    assert why is None, f"{why}\n{r.feedback()}"


@pytest.mark.parametrize("path", TRITON_SOLUTIONS, ids=[_task_name(p) for p in TRITON_SOLUTIONS])
def test_triton_solution_is_correct_on_the_gpu(triton_results, path):
    r = triton_results[path]
    why = solution_problem(r, every_config=False)
    assert why is None, f"{why}\n{r.feedback()}"


@pytest.mark.parametrize("path", FAST_CUDA_SOLUTIONS, ids=[_task_name(p) for p in FAST_CUDA_SOLUTIONS])
def test_fast_cuda_solution_is_correct_on_the_gpu(fast_cuda_results, path):
    """Every configuration, held-out ones included (odd sizes, misaligned rows, bfloat16), in the fast format."""
    r = fast_cuda_results[path]
    why = solution_problem(r)
    assert why is None, f"{why}\n{r.feedback()}"


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_cuda_exploit_is_caught(cuda_results, name):
    r = cuda_results[1][name]
    why = exploit_problem(name, r, cuda_results[2])
    assert why is None, f"{why}\n{r.feedback()}"


def test_adversarial_extension_is_otherwise_honest(cuda_results):
    """The shared adversarial extension's honest path (patched timer aside) computes the right thing, so the
    strict cases above fail because of their exploit, not because of a broken kernel."""
    r = cuda_results[1]["patched_timer"]
    why = extension_problem(r)
    assert why is None, f"{why}\n{r.feedback()}"


def test_kernelbench_rules_accept_a_fused_epilogue_with_its_coverage(kernelbench_rule_results):
    """rules="kernelbench" on a GPU: cuDNN's convolution beside the candidate's fused kernel is accepted and paid;
    the coverage (device time) is strictly between 0 and 1 on every configuration: the cuDNN kernels are not
    counted as the candidate's, its own kernel is."""
    r = kernelbench_rule_results["fused_epilogue"]
    assert r.rules == "kernelbench" and r.correct and not r.integrity_flags and r.reward > 0, r.feedback()
    assert r.kernel_coverage is not None and 0.0 < r.kernel_coverage < 1.0, r.feedback()
    assert all(c.kernel_coverage is not None and 0.0 < c.kernel_coverage < 1.0 for c in r.configs), (
        [(c.name, c.kernel_coverage) for c in r.configs], r.feedback())


def test_strict_rules_flag_the_fused_epilogue_on_the_gpu(kernelbench_rule_results):
    r = kernelbench_rule_results["fused_epilogue_strict"]
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert "pytorch_compute_in_forward" in kinds and r.reward < 0, r.feedback()


def test_kernelbench_rules_catch_a_forward_with_no_own_kernel_on_the_gpu(kernelbench_rule_results):
    r = kernelbench_rule_results["no_own_kernel"]
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert kinds == ["no_kernel_launched"] and r.reward < 0, r.feedback()
    assert r.kernel_coverage == 0.0, r.feedback()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_an_evaluator_of_the_second_gpu_evaluates_and_calibrates_there():
    """On a host of several GPUs an evaluator of cuda:1 works like one of cuda:0: its worker's events, graph capture,
    CUDA IPC exports and calibration act on GPU 1 (on an H200 x2, before the worker made its GPU current, every
    cuda:1 evaluation failed: IpcError 'finding the allocation of device address', and cuda:1's calibration read
    3.5 times cuda:0's bandwidth, invalidating the shared reference cache at every switch)."""
    from kbench_env.pipeline.evaluator import Evaluator

    relu = ROOT / "tasks/solutions/cuda/level1/relu.py"
    results, calibrations = [], []
    for dev in ("cuda:0", "cuda:1"):
        ev = Evaluator(device=dev, compile_baseline=False, timing=dict(TIMING))
        try:
            results.append(ev.evaluate(resolve_task("level1/relu"), relu.read_text(), seed=3))
            calibrations.append(ev.baselines.calibration)
        finally:
            ev.close()
    for r in results:
        assert r.correct and not r.integrity_flags, (r.device, r.error, r.integrity_flags)
    assert results[1].device == "cuda:1"
    bw0, bw1 = (c["bandwidth"] for c in calibrations)
    assert 0.8 < bw1 / bw0 < 1.25, calibrations


# ---------------------------------------------------------------------- integer inputs (issue #34)

#: level1/embedding on the GPU: an honest gather, and the issue's attack: a device-side comparison of this call's
#: ids with the last call's, the gather skipped when they are equal (the last output kept in a buffer the forward
#: returns every call). Before the ids were drawn per timed call, the cache was paid 1.60x against 0.93x honest
#: on an H200 (issue #34); with fresh ids it never hits, and a call's output is overwritten by the next call's.
EMBED_CUDA = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void kb_same_ids(const int64_t* ids, int64_t* last, int64_t n, int* same) {
    __shared__ int diff;
    if (threadIdx.x == 0) diff = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) if (ids[i] != last[i]) diff = 1;
    __syncthreads();
    if (threadIdx.x == 0) *same = !diff;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) last[i] = ids[i];
}

template <typename T>
__global__ void kb_gather(const int64_t* ids, const T* w, T* out, int64_t n, int64_t dim, const int* same) {
    if (same != nullptr && *same) return;
    const int64_t total = n * dim;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = w[ids[k / dim] * dim + k % dim];
}

void embed_into(torch::Tensor ids, torch::Tensor weight, torch::Tensor out, torch::Tensor last, torch::Tensor same,
                bool cache) {
    const at::cuda::OptionalCUDAGuard guard(ids.device());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int64_t n = ids.numel(), dim = weight.size(1);
    if (cache) kb_same_ids<<<1, 1024, 0, stream>>>(ids.data_ptr<int64_t>(), last.data_ptr<int64_t>(), n,
                                                   same.data_ptr<int>());
    const int grid = (int)std::min<int64_t>((n * dim + 255) / 256, 4096);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, weight.scalar_type(), "kb_gather", [&] {
        kb_gather<scalar_t><<<grid, 256, 0, stream>>>(ids.data_ptr<int64_t>(), weight.data_ptr<scalar_t>(),
                                                      out.data_ptr<scalar_t>(), n, dim,
                                                      cache ? same.data_ptr<int>() : nullptr);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

cpp_source = "void embed_into(torch::Tensor ids, torch::Tensor weight, torch::Tensor out, torch::Tensor last, torch::Tensor same, bool cache);"

ext = load_inline(name="kb_cuda_embed_NAME", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["embed_into"], extra_cuda_cflags=["-O3"])
CACHE = MODE


class ModelNew(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, embedding_dim)
        self.kept = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.contiguous()
        w = self.embed.weight.contiguous()
        shape = (*ids.shape, w.shape[1])
        if not CACHE:
            out = torch.empty(shape, device=w.device, dtype=w.dtype)
            ext.embed_into(ids, w, out, ids, ids, False)
            return out
        if self.kept is None or self.kept[0].shape != shape:
            self.kept = (torch.empty(shape, device=w.device, dtype=w.dtype),
                         torch.full((ids.numel(),), -1, device=w.device, dtype=torch.int64),
                         torch.zeros(1, device=w.device, dtype=torch.int32))
        out, last, same = self.kept
        ext.embed_into(ids, w, out, last, same, True)
        return out
'''


@pytest.fixture(scope="module")
def integer_results():
    task = resolve_task("level1/embedding")
    sources = {"honest": EMBED_CUDA.replace("NAME", "honest").replace("MODE", "False"),
               "ids_cache": EMBED_CUDA.replace("NAME", "cache").replace("MODE", "True")}
    out = _evaluate_recorded(_evaluator("cuda"), [(task, s) for s in sources.values()],
                             [("cuda_integers", n) for n in sources], "cuda", 2)
    return dict(zip(sources, out))


def test_cuda_embedding_ids_cache_is_paid_no_more_than_the_honest_kernel(integer_results):
    honest, attack = integer_results["honest"], integer_results["ids_cache"]
    assert honest.correct and not honest.integrity_flags and honest.speedup, honest.feedback()
    assert attack.compiled and attack.error_stage not in ("screen", "build", "load"), attack.feedback()
    if attack.integrity_flags or not attack.correct:
        assert attack.reward <= 0, attack.feedback()
        return
    assert attack.speedup <= 1.5 * honest.speedup, (
        f"unflagged, correct and paid {attack.speedup:.2f}x against the honest kernel's {honest.speedup:.2f}x\n"
        f"{attack.feedback()}")


def test_gpu_block_inputs_draw_integers_in_range_that_vary():
    from kbench_env.pipeline.gpu_blocks import BlockInputs
    from kbench_env.tasks.input_draws import input_draws

    task = resolve_task("level1/embedding")
    cfg = next(c for c in task.configs_for("cuda") if c.name == "gpu")
    mod, _, inputs = task.instantiate(cfg, 3, "cuda")
    staged = BlockInputs(inputs, 1e-2, 8, "cuda", input_draws(task, cfg)).draw()[0]
    assert staged.device.type == "cuda" and staged.shape == (8, *inputs[0].shape)
    assert int(staged.min()) >= 0 and int(staged.max()) < mod.num_embeddings
    assert not torch.equal(staged[0], staged[1]) and not torch.equal(staged[0], inputs[0])


#: A task whose only input is a constant (positions): nothing a timed call gets can vary, so the trusted side
#: overwrites every output of a block with NaN once it is checked. The cache returns its first output for every
#: later call (no kernel): it must earn nothing; the honest kernel writes every call and passes.
FIXED_TASK_GPU = '''"""Sine of fixed positions: the task's only input is a constant."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, pos):
        return torch.sin(pos.to(torch.float32) * 0.001)


n = 1 << 20


def get_inputs():
    return [torch.arange(n)]


def get_init_inputs():
    return []


KBENCH = {"level": 1, "configs": [{"name": "gpu", "sizes": {"n": 1048576}},
                                  {"name": "gpu-odd", "sizes": {"n": 40009}, "held_out": True}]}
'''

FIXED_CUDA = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void kb_sine(const int64_t* pos, float* out, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = sinf((float)pos[i] * 0.001f);
}

torch::Tensor sine_positions(torch::Tensor pos) {
    auto p = pos.contiguous();
    auto out = torch::empty(p.sizes(), p.options().dtype(torch::kFloat));
    const int64_t n = p.numel();
    const int grid = (int)std::min<int64_t>((n + 255) / 256, 4096);
    if (n) kb_sine<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(p.data_ptr<int64_t>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(name="kb_cuda_fixed_NAME", cpp_sources="torch::Tensor sine_positions(torch::Tensor pos);",
                  cuda_sources=cuda_source, functions=["sine_positions"], extra_cuda_cflags=["-O3"])
KEEP = MODE


class ModelNew(nn.Module):
    def forward(self, pos):
        self.calls = getattr(self, "calls", 0) + 1
        if KEEP and self.calls > 2:  # after the audited run and its repeat
            return self.kept
        self.kept = ext.sine_positions(pos)
        return self.kept
'''


def test_gpu_outputs_of_a_task_that_cannot_vary_are_poisoned_between_blocks():
    from kbench_env.tasks.loading import load_task

    task = load_task(FIXED_TASK_GPU, name="test/fixed_positions_gpu")
    sources = {"honest": FIXED_CUDA.replace("NAME", "honest").replace("MODE", "False"),
               "keep_first": FIXED_CUDA.replace("NAME", "keep").replace("MODE", "True")}
    honest, keep = _evaluate_recorded(_evaluator("cuda"), [(task, s) for s in sources.values()],
                                      [("cuda_fixed_input", n) for n in sources], "cuda", 2)
    assert honest.correct and not honest.integrity_flags, honest.feedback()
    assert keep.compiled and keep.error_stage not in ("screen", "build", "load"), keep.feedback()
    assert keep.integrity_flags or not keep.correct, keep.feedback()
    assert keep.reward <= 0, keep.feedback()
# ---------------------------------------------------------------------- issue #34: direct ATen calls on the GPU

ATEN_DIRECT = ROOT / "tests/data/attacks/aten_direct_addmm_cuda.py"


@pytest.fixture(scope="module")
def aten_direct_results():
    """The at::cuda::addmm candidate under both rules, and the shipped CUDA linear_relu under the kernelbench
    rules (its coverage, the comparison)."""
    task = resolve_task("level2/linear_relu")
    out = {}
    for rules in ("strict", "kernelbench"):
        out[rules] = _evaluator("cuda", rules=rules).evaluate(task, ATEN_DIRECT.read_text(), seed=2024)
        _record("cuda_aten_direct", rules, out[rules])
    honest = ROOT / "tasks/solutions/cuda/level2/linear_relu.py"
    out["honest"] = _evaluator("cuda", rules="kernelbench").evaluate(task, honest.read_text(), seed=2024)
    return out


def test_direct_aten_call_is_flagged_under_strict_on_the_gpu(aten_direct_results):
    r = aten_direct_results["strict"]
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert r.compiled and "pytorch_compute_linked" in kinds and r.reward < 0, r.feedback()
    assert "at::cuda::addmm" in " ".join(r.integrity_flags) and r.speedup is None, r.integrity_flags


def test_direct_aten_call_coverage_counts_only_its_own_kernel_on_the_gpu(aten_direct_results):
    """CUPTI names cuBLAS's GEMM, launched inside the candidate's call: named like a library's kernel and defined
    in none of the candidate's libraries, it is not the candidate's, so the coverage is the ReLU's share: below the
    speed tiers' MIN_COVERAGE (on small configurations the ReLU is most of the device time), and never paid above
    parity."""
    from kbench_env.pipeline.reward import MIN_COVERAGE

    r = aten_direct_results["kernelbench"]
    assert r.correct and not r.integrity_flags, r.feedback()
    assert r.kernel_coverage is not None and r.kernel_coverage < MIN_COVERAGE and r.reward < 1.0, r.feedback()
    honest = aten_direct_results["honest"]
    assert honest.correct and not honest.integrity_flags, honest.feedback()
    assert honest.kernel_coverage is not None and honest.kernel_coverage > 0.5, honest.feedback()


# ---------------------------------------------------------------------- issue #36: the timed blocks' set-up

#: ReLU with a device-side spin of SPIN cycles (about half a millisecond) after each call where ``slow`` says: the
#: honest slow candidate spins on every call; the forger only in the first graph captured per configuration (its
#: warm-up block), so that it would earn short blocks and be timed fast in them.
SPIN_RELU = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

template <typename T>
__global__ void kb_spin_relu(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float f = static_cast<float>(x[i]);
        y[i] = static_cast<T>(f < 0.f ? 0.f : f);
    }
}

__global__ void kb_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}

torch::Tensor relu_spin(torch::Tensor x, int64_t cycles) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int grid = (int)std::min<int64_t>((n + 255) / 256, 4096);
    if (n) AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "kb_spin_relu", [&] {
        kb_spin_relu<scalar_t><<<grid, 256, 0, stream>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    });
    if (cycles > 0) kb_spin<<<1, 1, 0, stream>>>(cycles);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(name="kb_test_spin_relu", cpp_sources="torch::Tensor relu_spin(torch::Tensor x, int64_t cycles);",
                  cuda_sources=cuda_source, functions=["relu_spin"], extra_cuda_cflags=["-O3"])
SPIN = 1000000
MODE = "MODE_VALUE"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.captures, self.capturing = 0, False

    def forward(self, x):
        capturing = torch.cuda.is_current_stream_capturing()
        if capturing and not self.capturing:
            self.captures += 1
        self.capturing = capturing
        slow = MODE == "slow" or (MODE == "first_capture_slow" and capturing and self.captures == 1)
        return ext.relu_spin(x, SPIN if slow else 0)
'''


@pytest.fixture(scope="module")
def set_up_results():
    """level1/relu evaluated one after another by one evaluator (checks shared): the shipped solution twice (the
    reference is known for the second at the latest), the slow candidate, the forger. Per evaluation, the set-ups made ahead of the
    timing and the timings that used one (gpu_blocks wrapped), and the reference's block sizes."""
    from kbench_env.pipeline import gpu_blocks, gpu_run

    task, ev = resolve_task("level1/relu"), _evaluator("cuda")
    made, used, made_for, set_ups = [], [], [], []
    set_up_ahead, time_gpu, set_up = gpu_blocks.set_up_ahead, gpu_blocks.time_gpu, gpu_run._Run.set_up

    def recorded_set_up(run, block, params, shrink=None):
        got = set_up(run, block, params, shrink)
        set_ups.append((run.config, block, shrink is not None, got[0]))
        return got

    def ahead(*a, **k):
        made.append(set_up_ahead(*a, **k))
        made_for.append(a[1])  # the configuration's name
        return made[-1]

    def timed(*a, ahead=None, **k):
        used.append(ahead)
        return time_gpu(*a, ahead=ahead, **k)

    shipped = (ROOT / "tasks/solutions/cuda/level1/relu.py").read_text()
    sources = {"first": shipped, "again": shipped, "slow": SPIN_RELU.replace("MODE_VALUE", "slow"),
               "forger": SPIN_RELU.replace("MODE_VALUE", "first_capture_slow")}
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpu_blocks, "set_up_ahead", ahead)
        mp.setattr(gpu_blocks, "time_gpu", timed)
        mp.setattr(gpu_run._Run, "set_up", recorded_set_up)
        for name, src in sources.items():
            made.clear(), used.clear(), made_for.clear(), set_ups.clear()
            r = ev.evaluate(task, src, seed=2024)
            _record("cuda_set_up", name, r)
            out[name] = (r, list(made), list(used))
            out[name + "_configs"] = list(made_for)
            out[name + "_set_ups"] = list(set_ups)  # (configuration, block asked, hint sent, block set up)
    blocks = {c.name: ev.baselines.times_by_key[ev.baselines.key(task, c)]["gpu"]["block"]
              for c in task.configs_for(ev.device)}
    from kbench_env.pipeline.timing import ahead_budget

    out["_budget"] = ahead_budget(ev.device, ev._device_lock)  # noqa: SLF001
    return out, blocks


def test_a_configuration_too_large_to_set_up_ahead_does_not_keep_the_next_ones_out(set_up_results):
    """Configurations are set up ahead in order while their blocks fit the candidate's share of the device's memory;
    one that does not fit is left to the timing and the ones after it are still tried."""
    from kbench_env.pipeline.timing import ahead_bytes

    out, blocks = set_up_results
    task = resolve_task("level1/relu")
    held, expected = 0, []
    for cfg in task.configs_for("cuda"):
        _, _, inputs = task.instantiate(cfg, 0, "cuda")
        size = ahead_bytes(blocks[cfg.name], inputs)
        if held + size <= out["_budget"]:
            held += size
            expected.append(cfg.name)
    assert out["again_configs"] == expected, (out["again_configs"], expected, out["_budget"])


def test_timed_blocks_are_set_up_ahead_once_the_reference_is_known(set_up_results):
    out, blocks = set_up_results
    first, again, (_, made, used) = out["first"][0], out["again"][0], out["again"]
    assert first.correct and not first.integrity_flags and again.correct and not again.integrity_flags, again.feedback()
    assert made and all(any(a is m for a in used) for m in made), (made, used)  # every set-up made ahead was used
    assert [c.timed_block_calls for c in again.configs] == [blocks[c.name] for c in again.configs]


def test_a_far_slower_candidate_is_timed_in_smaller_blocks(set_up_results):
    out, blocks = set_up_results
    slow = out["slow"][0]
    assert slow.correct and not slow.integrity_flags and slow.speedup < 0.5, slow.feedback()
    assert any(c.timed_block_calls < blocks[c.name] for c in slow.configs), [
        (c.name, c.timed_block_calls, blocks[c.name]) for c in slow.configs]


def test_a_far_slower_candidate_is_set_up_in_smaller_blocks_before_its_first_warm_up(set_up_results):
    """The slow candidate's call is measured before its first capture and its block made smaller there
    (gpu_blocks.shrink_hint): no warm-up block at the reference's size, no second set-up; the shipped solution's
    blocks are the reference's."""
    out, blocks = set_up_results
    slow, again = out["slow_set_ups"], out["again_set_ups"]
    shrunk = [c.name for c in out["slow"][0].configs if c.timed_block_calls < blocks[c.name]]
    first = {}
    for config, asked, hint, got in slow:
        first.setdefault(config, (asked, hint, got))
    assert shrunk and all(first[c][1] and first[c][2] < first[c][0] == blocks[c] for c in shrunk), (shrunk, slow)
    assert again and all(got == asked == blocks[c] for c, asked, _, got in again), again


def test_a_candidate_slow_only_in_its_warm_up_is_timed_at_the_references_block_size(set_up_results):
    out, blocks = set_up_results
    forger = out["forger"][0]
    assert forger.correct and not forger.integrity_flags, forger.feedback()
    assert [c.timed_block_calls for c in forger.configs] == [blocks[c.name] for c in forger.configs], [
        (c.name, c.timed_block_calls, blocks[c.name]) for c in forger.configs]


def test_timings_again_run_on_the_blocks_already_set_up():
    """Every timing's bound taken as paid (RETIME_RATIO below any ratio): each configuration of the shipped relu is
    timed RETIMINGS times, each block size set up once for them all (gpu_blocks.time_gpu_retimed's ``again``), the
    candidate correct, unflagged and timed in the reference's block size; the worker replays the same blocks after
    a timing as before one."""
    from kbench_env.pipeline import gpu_blocks, gpu_run

    task, ev = resolve_task("level1/relu"), _evaluator("cuda")
    src = (ROOT / "tasks/solutions/cuda/level1/relu.py").read_text()
    ev.evaluate(task, src, seed=7)  # the reference timed, its blocks known: the next set-ups are made ahead
    set_ups, timings, set_up, time_gpu = [], [], gpu_run._Run.set_up, gpu_blocks.time_gpu

    def recorded_set_up(run, block, params, shrink=None):
        set_ups.append(run.config)
        return set_up(run, block, params, shrink)

    def timed(*a, ahead=None, **k):
        timings.append((a[1], ahead is not None and not ahead.spent))  # (configuration, on a timing's blocks)
        return time_gpu(*a, ahead=ahead, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpu_blocks, "RETIME_RATIO", -1.0)
        mp.setattr(gpu_run._Run, "set_up", recorded_set_up)
        mp.setattr(gpu_blocks, "time_gpu", timed)
        r = ev.evaluate(task, src.replace("kb_relu", "kb_relu_again"), seed=8)
    _record("cuda_retime", "again", r)
    assert r.correct and not r.integrity_flags and r.speedup, r.feedback()
    names = [c.name for c in task.configs_for("cuda")]
    blocks = {c.name: ev.baselines.times_by_key[ev.baselines.key(task, c)]["gpu"]["block"]
              for c in task.configs_for("cuda")}
    assert [c for c, _ in timings] == [c for c in names for _ in range(gpu_blocks.RETIMINGS)], timings
    assert [again for _, again in timings] == [False, True, True] * len(names), timings
    assert sorted(set_ups) == sorted(names), set_ups  # one set-up a configuration (ahead or in the first timing)
    assert [c.timed_block_calls for c in r.configs] == [blocks[n] for n in names]
    assert "timing_again" in r.phase_seconds  # (the phase is there; how long it took is bench/'s to say)


# ---------------------------------------------------------------------- check inputs drawn on the device

_DRAWN = '''
import torch
import torch.nn as nn
N = 4096
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    x = torch.randn(N, N)
    {extra}
    return [x]
def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("extra, on_gpu", [("", True), ("x = x if x.device.type != 'cuda' else x.numpy()", False)])
def test_check_inputs_are_drawn_on_the_gpu_where_the_program_allows(tmp_path, extra, on_gpu):
    """A configuration's check inputs are drawn on the GPU (its generator seeded: the same seed, the same values),
    and on the CPU where get_inputs() does not run there (here: it reads a GPU tensor back through numpy)."""
    from kbench_env.tasks.suite import task_from_path
    from kbench_env.tasks.task import seeded

    path = tmp_path / "drawn_relu.py"
    path.write_text(_DRAWN.replace("{extra}", extra))
    task = task_from_path(path)
    cfg = task.configs_for("cuda")[0]
    _, _, (a,) = task.instantiate(cfg, 7, "cuda")
    _, _, (b,) = task.instantiate(cfg, 7, "cuda")
    _, _, (c,) = task.instantiate(cfg, 8, "cuda")
    assert a.is_cuda and torch.equal(a, b) and not torch.equal(a, c)
    with seeded(7):
        on_cpu = torch.randn(4096, 4096).to(a.dtype)
    assert torch.equal(a.cpu(), on_cpu) is (not on_gpu)


# ---------------------------------------------------------------------- large check outputs read from the worker

def _wrong_relu() -> str:
    """The shipped ReLU with every positive output 10 % too large (past every dtype's tolerance)."""
    src = (ROOT / "tasks/solutions/cuda/level1/relu.py").read_text()
    right = "return static_cast<T>(f < 0.f ? 0.f : f);"
    assert right in src
    return src.replace(right, "return static_cast<T>(f < 0.f ? 0.f : f * 1.1f);")


def test_large_check_inputs_and_outputs_go_through_the_workers_memory_and_are_judged():
    """A correctness run's inputs and outputs of 4 MiB and more are written into and read from the worker's GPU
    memory (check._write_inputs, check._shared_output): the shipped ReLU run so is correct; a wrong ReLU is wrong
    on every configuration, those run so included."""
    from kbench_env.pipeline import check

    task, ev = resolve_task("level1/relu"), _evaluator("cuda", rules="kernelbench")
    read, real, written, write = [], check.read_output, [], check._write_inputs

    def counted(described, device):
        read.append(described["layout"])
        return real(described, device)

    def writes(*a, **k):
        got = write(*a, **k)
        written.append(got)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(check, "read_output", counted)
        mp.setattr(check, "_write_inputs", writes)
        good = ev.evaluate(task, (ROOT / "tasks/solutions/cuda/level1/relu.py").read_text(), seed=5)
        n_good = len(read)
        bad = ev.evaluate(task, _wrong_relu(), seed=5)
    _record("cuda_shared_output", "good", good)
    _record("cuda_shared_output", "bad", bad)
    assert good.correct and not good.integrity_flags and n_good >= 1, (good.feedback(), n_good)
    assert written and all(w is None for w in written), written  # inputs written into the worker, GO sent
    assert len(read) > n_good and not bad.correct and bad.error_stage == "correctness", bad.feedback()
    assert all(c.correct is False and "could not be read" not in (c.error or "") for c in bad.configs), [
        (c.name, c.correct, c.error) for c in bad.configs]


def test_a_reference_whose_launches_the_host_delays_gets_blocks_sized_by_its_device_time():
    """A reference of several short kernels whose thread loses its core between launches (a host with builds on
    every core) spans milliseconds between events around one eager call. Its block must still be sized by the
    device's time (hundreds of calls), not by those gaps: a block of one call is all fixed cost, and the bound a
    candidate's timing is held to on it was a jitter that flagged honest kernels (device_time_outside_trusted_bound
    on rms_norm's smallest configuration in a fresh batch). Here the gap is a sleep between the two launches."""
    import time

    from kbench_env.backends.cuda import CudaBackend
    from kbench_env.worker.gpu_executor import BLOCK_BYTES, BLOCK_TARGET_MS, MAX_BLOCK

    def fn(a):
        b = a * 2.0
        time.sleep(0.004)  # (the host's gap: not in a graph, which the device replays without the host)
        return b + 1.0

    def make(j):
        g = torch.Generator(device="cuda").manual_seed(1000 + j)
        return [torch.randn(16, 64, device="cuda", generator=g)]

    probe = make(-100)
    handed = [probe]
    block = CudaBackend()._block_size(fn, make, probe, handed, BLOCK_TARGET_MS, MAX_BLOCK, BLOCK_BYTES)
    assert block >= 64, block  # two kernels of a few microseconds: 5 ms of them is hundreds of calls


# ---------------------------------------------------------------------- a build cut apart (host_device_split.py)

CUT_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
struct Scale { float a; };
template <typename T, int VEC>
__global__ void kb_cut_relu(const T* __restrict__ x, T* __restrict__ y, int64_t n, Scale s) {
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    for (int k = 0; k < VEC; ++k) if (i + k < n) {
        const float f = static_cast<float>(x[i + k]);
        y[i + k] = static_cast<T>((f < 0.f ? 0.f : f) * s.a);
    }
}
__global__ void kb_cut_fill(float* y, float v) { y[threadIdx.x] = v; }
torch::Tensor cut_relu(torch::Tensor x, double a) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "cut_relu", [&] {
        kb_cut_relu<scalar_t, 2><<<(n + 255) / 256, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, Scale{(float)a});
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
torch::Tensor cut_fill(int64_t threads) {
    auto y = torch::zeros({32}, torch::dtype(torch::kFloat).device(torch::kCUDA));
    kb_cut_fill<<<1, threads, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 3.f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""


def test_a_build_cut_apart_launches_its_kernels_as_written(tmp_path):
    """The builder's cut plan (kernels by nvcc without torch, host code by GCC): every dispatched type's
    instantiation runs and gives torch's answer, a struct argument and a double converted to the kernel's float
    arrive, and a launch the device refuses (too many threads) raises as a <<<...>>> launch would (its error is
    cudaLaunchKernel's "invalid argument", where <<<...>>> says "invalid configuration argument")."""
    import importlib.util

    from kbench_env.backends.cuda import CudaBackend
    from kbench_env.builder import pch, requests, torch_ext
    from kbench_env.builder.store import Store

    req = requests.normalise({"kind": "inline", "name": "kb_cut_gpu", "cpp_sources":
                              "torch::Tensor cut_relu(torch::Tensor x, double a);\ntorch::Tensor cut_fill(int64_t t);",
                              "cuda_sources": CUT_SOURCE, "functions": ["cut_relu", "cut_fill"], "options": {}})
    manifest = torch_ext.build(req, CudaBackend(), Store(str(tmp_path / "store")), {}, 600.0, 1 << 31,
                               pch=pch.BindingHeaders(str(tmp_path / "scratch")))
    assert manifest["plan"] == "apart"
    spec = importlib.util.spec_from_file_location(manifest["module"], manifest["path"])
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    for dtype in (torch.float32, torch.float64, torch.float16):
        x = torch.randn(1001, device="cuda", dtype=dtype)
        torch.testing.assert_close(ext.cut_relu(x, 0.5), torch.relu(x) * 0.5)
    assert ext.cut_fill(32).tolist() == [3.0] * 32
    with pytest.raises(RuntimeError, match="CUDA error: invalid"):
        ext.cut_fill(4096)
    torch.cuda.synchronize()

"""Integrity checks: what makes a speedup real. Owns the runtime audit of ``ModelNew.forward``, the per-call input
perturbation, pinned precision flags and the roofline floor.
The timed calls' outputs are read and checked by the trusted side itself (blocks.py, gpu_blocks.py).

The worker side (audit, flags) runs inside the candidate's process but holds nothing the candidate could use: no
reference output. The parent side compares what the worker reports with what it computes itself.

Allowed glue inside ``forward`` (the only PyTorch operators a candidate may call in place of its own kernels):
allocation (``empty``, ``empty_like``, ``zeros``...), views and reshapes, ``contiguous``/``clone``/``copy_``
(data movement), dtype and device moves, concatenation and padding, scalar reads. Any other ``aten::`` operator
called by ``forward`` or from inside the candidate's own extension (e.g. ``at::mm`` in C++) is flagged.
"""

from __future__ import annotations

import sys
import threading
import types

import torch
import torch.autograd.profiler
import torch.profiler
from torch.profiler import ProfilerActivity

from kbench_env.machine.device import Device
from kbench_env.pipeline import audit_threads as _threads
from kbench_env.pipeline import coverage as _coverage
from kbench_env.pipeline.compare import flatten_outputs
from kbench_env.measure.timing_stats import _perf_counter  # captured before any candidate code loads

#: aten operators a candidate may call in forward: allocation, views, data movement, dtype/device casts.
ALLOWED_GLUE = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones
full full_like new_full fill_ zero_ scalar_tensor arange
view _unsafe_view view_as reshape _reshape_alias as_strided permute transpose t expand expand_as squeeze
unsqueeze flatten unflatten movedim slice select narrow split split_with_sizes chunk unbind diagonal
contiguous clone copy_ _copy_from _copy_from_and_resize detach alias lift_fresh lift resolve_conj resolve_neg
to _to_copy type_as cat stack constant_pad_nd pad
size stride numel is_contiguous item _local_scalar_dense set_ resize_ record_stream
""".split())

#: Precision settings pinned in every process that runs a reference or a candidate (issue: TF32 tricks).
PINNED_FLAGS = {
    "matmul_allow_tf32": False,
    "cudnn_allow_tf32": False,
    "cudnn_benchmark": False,
    "float32_matmul_precision": "highest",
    "matmul_allow_fp16_reduced_precision": True,
    "matmul_allow_bf16_reduced_precision": True,
}


def pin_precision_flags() -> None:
    torch.backends.cuda.matmul.allow_tf32 = PINNED_FLAGS["matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = PINNED_FLAGS["cudnn_allow_tf32"]
    torch.backends.cudnn.benchmark = PINNED_FLAGS["cudnn_benchmark"]
    torch.set_float32_matmul_precision(PINNED_FLAGS["float32_matmul_precision"])


def precision_flags() -> dict:
    m = torch.backends.cuda.matmul
    return {
        "matmul_allow_tf32": bool(m.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul_allow_fp16_reduced_precision": bool(m.allow_fp16_reduced_precision_reduction),
        "matmul_allow_bf16_reduced_precision": bool(m.allow_bf16_reduced_precision_reduction),
    }


def changed_flags(before: dict, after: dict) -> list[str]:
    return [f"{k}: {before[k]!r} -> {after[k]!r}" for k in before if after.get(k) != before[k]]


# ---------------------------------------------------------------------- runtime audit (worker side)


class ForwardAudit:
    """Profile one forward call and report the PyTorch compute operators it ran and whether the candidate's own
    code ran (a custom operator in a namespace the candidate registered, a call into one of its pybind
    extensions, or, on the GPU, a kernel that is not PyTorch's)."""

    def __init__(self, candidate_namespaces: set, extension_calls, device: str, enabled: bool = True,
                 mode: str = "kernels"):
        self.namespaces = candidate_namespaces
        self.extension_calls = extension_calls  # callable returning the count of calls into candidate extensions
        self.device = device
        self.enabled = enabled
        self.mode = mode

    def __enter__(self):
        self._overhead = 0.0
        if not self.enabled:
            self._prof = None
            return self
        t0 = _perf_counter()
        _coverage.warm_up_records()
        self._calls0 = self.extension_calls()
        # On a GPU, kineto with CUPTI also names the GPU kernels that ran (evidence of the candidate's own work
        # beside counted launches); mode "ops" (KBENCH_GPU_AUDIT=ops in the parent) audits PyTorch operators only,
        # with the legacy profiler, which starts in milliseconds (kineto takes over a second on first use), to
        # compare what naming the kernels costs.
        # On the CPU, every thread's operators (audit_threads).
        cuda = Device.parse(self.device).is_cuda
        if cuda and self.mode != "ops":
            self._prof = torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        elif cuda:
            self._prof = torch.autograd.profiler.profile(use_kineto=False)
        else:
            self._prof = _threads.cpu_profiler()
        self._prof_error = None
        self._prof.__enter__()
        with _threads.sentinel(_threads.START):  # missing from the profile: records were off as forward started
            pass
        self._overhead += _perf_counter() - t0
        return self

    def __exit__(self, *exc):
        if self._prof is not None:
            t0 = _perf_counter()
            with _threads.sentinel():  # missing from the profile: records were off on this thread (audit_threads)
                pass
            try:
                self._prof.__exit__(*exc)
            except RuntimeError as err:  # the candidate stopped the profiler itself
                self._prof_error = str(err)[:200]
            self._calls1 = self.extension_calls()  # launches inside the audited call only
            self._overhead += _perf_counter() - t0
        return False

    def report(self) -> dict:
        if self._prof is None:
            return {}
        t0 = _perf_counter()
        out = self._report()
        out["overhead_s"] = round(self._overhead + _perf_counter() - t0, 4)  # starting, stopping, reading
        return out

    def _report(self) -> dict:
        forbidden: dict[str, int] = {}
        own_ops: set = set()
        kernels: set = set()
        events = [] if self._prof_error else (
            self._prof.events() if hasattr(self._prof, "events") else self._prof.function_events)
        calls = getattr(self, "_calls1", self.extension_calls()) - self._calls0
        # Launch records (backends/triton.py) mark a kernel's own internals; more records than counted launches
        # means the candidate opened some itself (to hide PyTorch compute under the marker): none are trusted.
        # Extension calls open records of their own (coverage.own_call): the two kinds together are counted.
        records = sum(1 for e in events if _coverage.is_record(e.name)
                      and not str(getattr(e, "device_type", "")).endswith("CUDA"))
        trust_records = records <= calls
        for e in events:
            name = e.name
            if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"):
                if not _coverage.is_annotation(e):  # a record's span mirrored on the device is no kernel
                    kernels.add(name)
                continue
            ns = name.split("::", 1)[0] if "::" in name else None
            if ns in self.namespaces:
                own_ops.add(name)
                continue
            if ns != "aten":
                continue
            op = name.split("::", 1)[1]
            if op in ALLOWED_GLUE:
                continue
            if _inside_glue(e, trust_records):  # internals of an allowed glue op or of the candidate's kernel
                continue
            forbidden[name] = forbidden.get(name, 0) + 1
        return {
            "forbidden_ops": forbidden,
            "own_ops": sorted(own_ops),
            "extension_calls": calls,
            "gpu_kernels": sorted(kernels)[:50],
            "threads": _threads.threads(events),
            "blinded": _threads.blinding(events, self._prof_error),
            **_coverage.profile_times(events, self.namespaces, trust_records, self.device, ALLOWED_GLUE),
        }


#: Profiler records that wrap one launch of the candidate's own kernel (the Triton interpreter runs tensor
#: operations inside a launch: those are the kernel's internals, not PyTorch compute standing in for it).
KERNEL_RECORD_PREFIX = _coverage.KERNEL_RECORD_PREFIX


def _inside_glue(event, trust_records: bool = True) -> bool:
    p = event.cpu_parent
    while p is not None:
        if trust_records and p.name.startswith(KERNEL_RECORD_PREFIX):
            return True
        if p.name.startswith("aten::") and p.name.split("::", 1)[1] in ALLOWED_GLUE:
            return True
        p = p.cpu_parent
    return False


def audit_flags(report: dict, config: str, torch_kernel_prefixes=(), own_names=None) -> list[str]:
    """Integrity flags from a ForwardAudit report (parent side)."""
    flags = []
    if report.get("forbidden_ops"):
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(report["forbidden_ops"].items())[:6])
        flags.append(f"pytorch_compute_in_forward: forward ran PyTorch compute operators ({ops}) on configuration "
                     f"{config!r}; only allocation, views and data movement are allowed besides your kernels")
    flags += _threads.flags(report, config)
    own_gpu = _coverage.own_device_kernels(report, torch_kernel_prefixes, own_names)
    if not report.get("own_ops") and not report.get("extension_calls") and not own_gpu:
        flags.append(f"no_kernel_launched: none of the candidate's own kernels ran in forward on configuration "
                     f"{config!r} (a compiled kernel must do the work)")
    return flags


class AuditGuard:
    """The functions the worker's forward audit and its in-worker checks run on (``ForwardAudit``, the coverage
    rules, the comparison of the two runs), as they were before the candidate loaded; ``changed()`` names those
    the candidate has replaced since. Unlike the timing and the timed outputs, which the trusted side measures and
    reads itself, the audit's report comes from the worker: a candidate that replaces its ``_report`` could run
    PyTorch compute unseen, so a replaced audit is flagged (``audit_patched``). Native code could still blind the
    audit in ways this does not see (README, the trust boundary's known gaps)."""

    def __init__(self, extra: list = ()):
        me = sys.modules[__name__]
        targets = [(me, "ForwardAudit"), (me, "audit_flags"), (me, "_inside_glue")]
        targets += [(_threads, a) for a in ("cpu_profiler", "sentinel", "blinding", "threads", "library_controls",
                                            "flags")]
        targets += [(ForwardAudit, a) for a in dir(ForwardAudit) if not a.startswith("__") or a in
                    ("__enter__", "__exit__")]
        targets += [(_coverage, a) for a in ("profile_times", "own_call", "is_record", "_cpu_times", "_device_rows",
                                             "profiling")]
        self._refs = [(owner, attr, getattr(owner, attr)) for owner, attr in [*targets, *extra] if hasattr(owner, attr)]
        # a Python function can also be changed in place (its __code__ swapped)
        self._code = [(obj, obj.__code__) for _, _, obj in self._refs if isinstance(obj, types.FunctionType)]

    def changed(self) -> list[str]:
        names = [f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}" for owner, attr, obj in self._refs
                 if getattr(owner, attr, None) is not obj]
        return names + [f"{fn.__qualname__}.__code__" for fn, code in self._code if fn.__code__ is not code]


# ---------------------------------------------------------------------- timed-call inputs


_GENERATORS = threading.local()


def _generator(device) -> torch.Generator:
    """This thread's generator for ``device``, made once: a new CUDA generator per call costs more host time than a
    small call's kernel. One per thread, so a seed set in one thread is never drawn from in another."""
    cache = getattr(_GENERATORS, "by_device", None)
    if cache is None:
        cache = _GENERATORS.by_device = {}
    key = str(device)
    if key not in cache:
        cache[key] = torch.Generator(device=device)
    return cache[key]


def perturb(inputs: list, seed: int, scale: float = 1e-2, stds: list | None = None) -> list:
    """A fresh copy of ``inputs`` with dense noise of ``scale`` times each floating tensor's std added.

    Every call of a wall-clock re-timing gets its own perturbed copy (new storage, new content), so neither
    pointer- nor content-keyed caching can return a stored result; a GPU worker makes its warm-up and capture
    calls' inputs this way too (worker/gpu_executor.py). ``stds`` (from ``input_stds(inputs)``) saves recomputing the standard deviations, and a device
    synchronisation, on every call: the result is the same.
    """
    stds = stds if stds is not None else input_stds(inputs)
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            noise = _noise(seed, i, torch.empty(x.shape, device=x.device, dtype=torch.float32))
            out.append(noise.mul_(scale * stds[i]).add_(x).to(x.dtype))
        elif isinstance(x, torch.Tensor):
            out.append(x.clone())
        else:
            out.append(x)
    return out


def _noise(seed: int, i: int, out: torch.Tensor) -> torch.Tensor:
    """``out`` (float32) filled with input ``i``'s standard normal draw for ``seed`` (``perturb``'s noise)."""
    g = _generator(out.device)
    g.manual_seed((seed * 1000003 + i) % (2**63))
    return torch.randn(out.shape, generator=g, out=out)


def copy_into(dst: list, src: list) -> None:
    """Each tensor of ``src`` copied into the tensor at the same place in ``dst`` (a timed graph's static inputs)."""
    for d, s in zip(dst, src):
        if isinstance(d, torch.Tensor):
            d.copy_(s)


def input_stds(inputs: list) -> list:
    """Per input: the standard deviation ``perturb`` scales its noise by (None for what it does not perturb)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            out.append(x.float().std().item() if x.numel() > 1 else abs(x.float().item()))
        else:
            out.append(None)
    return out


# ---------------------------------------------------------------------- roofline floor


def output_bytes(out) -> int:
    return sum(t.numel() * t.element_size() for t in flatten_outputs(out) if isinstance(t, torch.Tensor))


def count_flops(model, inputs) -> int:
    """FLOPs of the matrix products and convolutions the reference runs (torch's FlopCounterMode)."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            model(*inputs)
        return int(fc.get_total_flops())
    except Exception:  # noqa: BLE001 - a floor we cannot compute is no floor
        return 0

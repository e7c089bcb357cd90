"""The worker's own checks of the candidate it runs: the runtime audit of ``ModelNew.forward`` (``ForwardAudit``),
the guard that names the audit's functions the candidate replaced (``AuditGuard``), and the pinned precision
flags. Untrusted side only: it runs inside the candidate's process, which holds no reference output; the trusted
side turns the audit's report into flags (pipeline/integrity.py, pipeline/rules.py).

Allowed glue inside ``forward`` (the only PyTorch operators a candidate may call in place of its own kernels,
measure/ownership.py's ``ALLOWED_GLUE``): allocation (``empty``, ``empty_like``, ``zeros``...), views and reshapes,
``contiguous``/``clone``/``copy_`` (data movement), dtype and device moves, concatenation and padding, scalar reads.
Any other ``aten::`` operator called by ``forward`` or from inside the candidate's own extension (e.g. ``at::mm`` in
C++) is reported.
"""

from __future__ import annotations

import sys
import types

import torch
import torch.autograd.profiler
import torch.profiler

from kbench_env.machine.device import Device
from kbench_env.measure import ownership
from kbench_env.measure.ownership import ALLOWED_GLUE
from kbench_env.measure.stats import _perf_counter  # captured before any candidate code loads
from kbench_env.worker import audit_threads as _threads
from kbench_env.worker import profile_times as _times

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


_warm = []


def warm_up_records() -> None:
    """Open one record before the first profile of this process: the first ``record_function`` pays its lazy
    set-up (up to milliseconds on the CPU), which the profile would count as the first own call's time."""
    if not _warm:
        with torch.profiler.record_function(ownership.EXT_RECORD_PREFIX + "warm-up"):
            _warm.append(True)


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
        warm_up_records()
        self._calls0 = self.extension_calls()
        # On a GPU, kineto with CUPTI also names the GPU kernels that ran (evidence of the candidate's own work
        # beside counted launches); mode "ops" (KBENCH_GPU_AUDIT=ops in the parent) audits PyTorch operators only,
        # with the legacy profiler, to compare what naming the kernels costs.
        # On the CPU, every thread's operators (audit_threads).
        # Kineto is started through torch.autograd.profiler.profile, the profiler torch.profiler.profile wraps, with
        # the same activities: the wrapper's first start imports Inductor to read one of its settings, an import
        # every worker would pay for nothing (bench/probes/worker_start_cpu.py --wrapper measures it).
        cuda = Device.parse(self.device).is_cuda
        if cuda and self.mode != "ops":
            self._prof = torch.autograd.profiler.profile(use_kineto=True, use_device="cuda")
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
        # Extension calls open records of their own (ownership.own_call): the two kinds together are counted.
        records = sum(1 for e in events if ownership.is_record(e.name)
                      and not str(getattr(e, "device_type", "")).endswith("CUDA"))
        trust_records = records <= calls
        for e in events:
            name = e.name
            if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"):
                if not _times.is_annotation(e):  # a record's span mirrored on the device is no kernel
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
            **_times.profile_times(events, self.namespaces, trust_records, self.device, ALLOWED_GLUE),
        }


#: Profiler records that wrap one launch of the candidate's own kernel (the Triton interpreter runs tensor
#: operations inside a launch: those are the kernel's internals, not PyTorch compute standing in for it).
KERNEL_RECORD_PREFIX = ownership.KERNEL_RECORD_PREFIX


def _inside_glue(event, trust_records: bool = True) -> bool:
    p = event.cpu_parent
    while p is not None:
        if trust_records and p.name.startswith(KERNEL_RECORD_PREFIX):
            return True
        if p.name.startswith("aten::") and p.name.split("::", 1)[1] in ALLOWED_GLUE:
            return True
        p = p.cpu_parent
    return False


class AuditGuard:
    """The functions the worker's forward audit and its in-worker checks run on (``ForwardAudit``, the coverage
    times and the records they count, and what the worker loop adds: the comparison of the two runs), as they were
    before the candidate loaded; ``changed()`` names those the candidate has replaced since. Unlike the timing
    and the timed outputs, which the trusted side measures and reads itself, the audit's report comes from the
    worker: a candidate that replaces its ``_report`` could run PyTorch compute unseen, so a replaced audit is
    flagged (``audit_patched``). Native code could still blind the audit in ways this does not see (README, the
    trust boundary's known gaps)."""

    def __init__(self, extra: list = ()):
        me = sys.modules[__name__]
        targets = [(me, "ForwardAudit"), (me, "_inside_glue")]
        targets += [(_threads, a) for a in ("cpu_profiler", "sentinel", "blinding", "threads", "library_controls")]
        targets += [(ForwardAudit, a) for a in dir(ForwardAudit) if not a.startswith("__") or a in
                    ("__enter__", "__exit__")]
        targets += [(_times, a) for a in ("profile_times", "_cpu_times", "_device_rows")]
        targets += [(ownership, a) for a in ("own_call", "is_record", "profiling")]
        self._refs = [(owner, attr, getattr(owner, attr)) for owner, attr in [*targets, *extra] if hasattr(owner, attr)]
        # a Python function can also be changed in place (its __code__ swapped)
        self._code = [(obj, obj.__code__) for _, _, obj in self._refs if isinstance(obj, types.FunctionType)]

    def changed(self) -> list[str]:
        names = [f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}" for owner, attr, obj in self._refs
                 if getattr(owner, attr, None) is not obj]
        return names + [f"{fn.__qualname__}.__code__" for fn, code in self._code if fn.__code__ is not code]

"""Kernel coverage: the share of ``forward``'s time spent in the candidate's own kernels, read from the profile
the forward audit (``integrity.ForwardAudit``) already takes of one correctness call per configuration.

What is the candidate's own:

- an operator in a namespace its source registered (``TORCH_LIBRARY``), a call into one of its pybind extensions or
  fast-path kernels (each wrapped, while the profiler runs, in a ``kbench_ext::<name>`` record: ``own_call``), a
  launch of its Triton kernel (a ``kbench_kernel::<name>`` record; on the CPU the interpreter's tensor operations
  inside it are the kernel's own);
- minus the PyTorch compute operators its code calls from inside those (``at::mm`` from C++ is PyTorch's time).

The records are trusted only while they are no more than the counted calls into the candidate's code (the
candidate could open such records itself); untrusted, they count as nobody's.

A record says who was called, not whose code ran: a library of the candidate's that calls ``at::cpu::addmm`` runs
MKL's GEMM inside its own record. So the CPU's figure is also bounded by where the timed calls' CPU time was
sampled by the trusted side (sandbox/samples.py, ``sampled_share``): the share of samples in the candidate's own
libraries (those the builder gave its worker) among those in its own, PyTorch's and math libraries', anonymous
executable memory and any other file that is not the system's or the Python installation's; the coverage is the
smaller of the two. On a GPU a kernel counts as the candidate's only if its name is one its own libraries define
(``own_kernel``'s ``own_names``) or is not named like a library's.

On the CPU (``cpu_us``): forward's CPU time is the time of the outermost own regions and PyTorch operators (glue
such as copies included, Python overhead between them not); own is the own regions' time less the PyTorch compute
inside them. On a GPU (``device_us``, with the kineto profiler): the device time of every kernel, copy and fill
forward caused, each attributed by who launched it: the innermost operator the profiler links it to (an ``aten::``
operator: PyTorch's, whatever its caller; a candidate operator: its own), else the own region whose time span holds
its launch call, else its name (``torch_kernel_prefixes``, decided on the trusted side). The worker reports the
times; the parent turns them into the fraction (``coverage``).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re

import torch

from kbench_env.builder.symbols import kernel_name
from kbench_env.machine.device import Device

#: Profiler records around a launch of the candidate's Triton kernel (its internals are the kernel's own).
KERNEL_RECORD_PREFIX = "kbench_kernel::"
#: Profiler records around a call into the candidate's compiled extension or fast-path kernel.
EXT_RECORD_PREFIX = "kbench_ext::"
#: Kernel-name prefixes of PyTorch's and its libraries' GPU kernels (cuDNN, cuBLAS, CUTLASS, Inductor's generated
#: Triton kernels): not the candidate's, where the profile does not say who launched them.
TORCH_KERNEL_PREFIXES = ("void at::", "at::", "void (anonymous namespace)::", "Memcpy", "Memset", "cudnn", "sm80_",
                         "sm90_", "cutlass", "ampere_", "volta_", "turing_", "gemv", "gemm", "void cublas",
                         "cublas", "void gemv", "nvjet", "void cudnn", "void cutlass", "void xmma", "xmma_",
                         "void implicit_convolve", "void explicit_convolve", "void precomputed_convolve",
                         "sm75_", "sm86_", "sm89_", "sm100_", "sm120_", "void cask", "void nchwToNhwc",
                         "void nhwcToNchw", "void tensorTransformGeneric", "void op_generic_tensor_kernel",
                         "triton_poi_", "triton_red_", "triton_per_", "triton_tem_",
                         # cuBLAS's own kernels for small or odd shapes
                         "void gemm", "void splitKreduce", "void reduce_1Block", "void dot_kernel", "void scal_kernel",
                         "void axpy_kernel", "void gemv2", "void gemvNSP", "void trsm", "void ger_kernel")
#: Kernel names that are never the candidate's, whoever launched them: PyTorch's own namespace and copies/fills.
NEVER_OWN = ("void at::", "at::", "Memcpy", "Memset")
#: Rows of per-kernel device time the worker reports; the rest are summed into one row counted as not own.
MAX_KERNEL_ROWS = 200
_RUNTIME = ("cuda_runtime", "cuda_driver")
_profiler_on = torch._C._autograd._profiler_enabled  # this thread's profiler (not one of every thread: see own_call)


def profiling() -> bool:
    """Whether an audit's profiler runs: this thread's, or the CPU audit's profiler of every thread
    (audit_threads), which is not this thread's (``torch.autograd.profiler`` notes that one)."""
    return bool(_profiler_on() or torch.autograd.profiler._is_profiler_enabled)


def own_call(name: str):
    """The context a counted call into the candidate's compiled code runs in: a ``kbench_ext::`` profiler record
    while an audit's profiler runs (``profiling``), nothing otherwise."""
    if profiling():
        return torch.profiler.record_function(EXT_RECORD_PREFIX + str(name))
    return contextlib.nullcontext()


_warm = []


def warm_up_records() -> None:
    """Open one record before the first profile of this process: the first ``record_function`` pays its lazy
    set-up (up to milliseconds on the CPU), which the profile would count as the first own call's time."""
    if not _warm:
        with torch.profiler.record_function(EXT_RECORD_PREFIX + "warm-up"):
            _warm.append(True)


def is_record(name: str) -> bool:
    return name.startswith(KERNEL_RECORD_PREFIX) or name.startswith(EXT_RECORD_PREFIX)


def _is_cuda(e) -> bool:
    return str(getattr(e, "device_type", "")).endswith("CUDA")


def is_annotation(e) -> bool:
    """A user annotation's span (record_function) mirrored on the device: not work."""
    return (getattr(e, "activity_type", None) in ("user_annotation", "gpu_user_annotation")
            or bool(getattr(e, "is_user_annotation", False)))


def _us(e) -> float:
    return max(0.0, float(e.time_range.elapsed_us()))


# ---------------------------------------------------------------------- worker side


def profile_times(events, namespaces: set, trust_records: bool, device: str, glue: frozenset) -> dict:
    """The times coverage is made of, from the audit's profile events: ``{"cpu_us": {"own", "total"}}`` on the
    CPU, ``{"device_us": [[kernel name, "own" | "torch" | "other" | None, microseconds], ...]}`` on a GPU (none without
    device events: the legacy profiler's "ops" mode)."""
    classify = _Classifier(namespaces, trust_records, glue)
    if Device.parse(device).is_cuda:
        dev = [e for e in events if _is_cuda(e) and not is_annotation(e)]
        return {"device_us": _device_rows(events, dev, classify)} if dev else {}
    return {"cpu_us": _cpu_times(events, classify)}


class _Classifier:
    def __init__(self, namespaces: set, trust_records: bool, glue: frozenset):
        self.namespaces, self.trust, self.glue = namespaces, trust_records, glue

    def own(self, e) -> bool:
        name = e.name
        if self.trust and is_record(name):
            return True
        return "::" in name and name.split("::", 1)[0] in self.namespaces

    def kernel_record(self, e) -> bool:
        return self.trust and e.name.startswith(KERNEL_RECORD_PREFIX)

    @staticmethod
    def aten(e) -> bool:
        return e.name.startswith("aten::")

    def compute(self, e) -> bool:
        return self.aten(e) and e.name.split("::", 1)[1] not in self.glue


def _children(e) -> list:
    return list(getattr(e, "cpu_children", None) or [])


def _cpu_times(events, c: _Classifier) -> dict:
    own = total = 0.0
    roots = [e for e in events if getattr(e, "cpu_parent", None) is None and not _is_cuda(e)
             and not getattr(e, "is_async", False)]
    stack = list(roots)
    while stack:
        e = stack.pop()
        if c.own(e):
            d = _us(e)
            inside = 0.0 if c.kernel_record(e) else _torch_inside(e, c)
            own += max(0.0, d - inside)
            total += d
        elif c.aten(e):
            total += _us(e)
        else:  # someone else's record, a Python function: look inside
            stack.extend(_children(e))
    return {"own": round(own, 3), "total": round(total, 3)}


def _torch_inside(e, c: _Classifier) -> float:
    """Time of the outermost PyTorch compute operators inside own region ``e`` (not inside a trusted Triton launch,
    whose internals are the kernel's)."""
    t = 0.0
    stack = _children(e)
    while stack:
        x = stack.pop()
        if c.kernel_record(x):
            continue
        if c.compute(x):
            t += _us(x)
        else:
            stack.extend(_children(x))
    return t


def _launcher(op, c: _Classifier):
    """"torch" if the innermost classifying event from ``op`` up is a PyTorch operator, "own" if it is the
    candidate's, None if there is none."""
    e = op
    while e is not None:
        if c.aten(e):
            return "torch"
        if c.own(e):
            return "own"
        e = getattr(e, "cpu_parent", None)
    return None


def _union(spans) -> tuple[list, list]:
    """Sorted starts and ends of the union of ``(start, end)`` spans (own regions may nest)."""
    starts: list = []
    ends: list = []
    for s, t in sorted(spans):
        if starts and s <= ends[-1]:
            ends[-1] = max(ends[-1], t)
        else:
            starts.append(s)
            ends.append(t)
    return starts, ends


def _is_runtime(e) -> bool:
    """A host-side CUDA runtime or driver call (a launch, a copy): kineto gives it the correlation id of the device
    work it started, and the operator it ran under as its CPU parent."""
    return getattr(e, "activity_type", None) in _RUNTIME or e.name.startswith(("cuda", "cuLaunch", "cuMemcpy"))


def _device_rows(events, dev: list, c: _Classifier) -> list:
    host = [e for e in events if not _is_cuda(e)]
    runtime = {e.id: e for e in host if _is_runtime(e)}
    frontend = {e.id: e for e in host if not _is_runtime(e)}
    starts, ends = _union((e.time_range.start, e.time_range.end) for e in host if c.own(e))
    agg: dict = {}
    for d in dev:
        cls = None
        linked = getattr(d, "linked_correlation_id", 0) or 0
        if linked and linked in frontend:
            cls = _launcher(frontend[linked], c)
        launch = runtime.get(d.id) if cls is None else None
        if launch is not None:  # the operator the launch ran under, else the span of the candidate's code it fell in
            cls = _launcher(getattr(launch, "cpu_parent", None), c)
            if cls is None:
                # with trusted records every call into the candidate's code has a span, so a launch seen on the
                # host outside all of them is someone else's (a library launching on its own, e.g. cuDNN kernels
                # unlinked to their operator), whatever its name; without them, the name decides (own_kernel)
                i = bisect.bisect_right(starts, launch.time_range.start) - 1
                inside = i >= 0 and launch.time_range.start <= ends[i]
                cls = "own" if inside else ("other" if c.trust else None)
        key = (d.name, cls)
        agg[key] = agg.get(key, 0.0) + _us(d)
    rows = sorted(([n, k, round(us, 3)] for (n, k), us in agg.items()), key=lambda r: -r[2])
    if len(rows) > MAX_KERNEL_ROWS:
        rest = sum(r[2] for r in rows[MAX_KERNEL_ROWS - 1:])
        rows = rows[:MAX_KERNEL_ROWS - 1] + [["(other kernels)", "torch", round(rest, 3)]]
    return rows


# ---------------------------------------------------------------------- parent side

#: Library files whose samples are PyTorch's or a math library's work, wherever they are installed: ATen's kernels
#: (libtorch_cpu, libtorch_cuda, libtorch) and the math libraries. Not its Python binding (libtorch_python) nor c10
#: (the candidate's own calls pass through both), nor an OpenMP runtime (the candidate's threads wait there too).
_MATH_FILES = re.compile(r"^lib(?:torch_cpu|torch_cuda|torch\.so|mkl|dnnl|mkldnn|openblas|scipy_openblas|blas|cblas|"
                         r"lapack|cublas|cudnn|cusparse|cusolver|cufft|nvjit|fbgemm|xnnpack|nnpack|sleef)", re.I)
#: Samples below this many (in the candidate's own, PyTorch's and foreign code together) decide nothing.
MIN_SAMPLES = 20


def sampled_share(counts: dict, own_paths, trusted_prefixes: tuple) -> float | None:
    """The share of CPU samples (sandbox/samples.Sampler.counts) in the candidate's own libraries (``own_paths``)
    among those in its own, PyTorch's or a math library's (``_MATH_FILES``), anonymous executable memory and
    files outside ``trusted_prefixes`` (the system's and the Python installation's); None with fewer than
    MIN_SAMPLES of them or no own library. The interpreter, the C library and the OpenMP runtime are nobody's."""
    own_paths = {os.path.realpath(p) for p in own_paths}
    if not own_paths:
        return None
    own = other = 0
    for path, n in counts.items():
        real = os.path.realpath(path) if path.startswith("/") else path
        if real in own_paths or path in own_paths:
            own += n
        elif path.startswith("["):  # [anonymous] is code no file backs: foreign; [vdso] the kernel's clock
            other += n if path == "[anonymous]" else 0
        elif _MATH_FILES.match(os.path.basename(path)) or not real.startswith(trusted_prefixes):
            other += n
    if own + other < MIN_SAMPLES:
        return None
    return own / (own + other)


def bounded(profile: float | None, share: float | None) -> float | None:
    """The coverage from the profile bounded by the sampled share (either may be missing)."""
    if share is None:
        return profile
    return round(min(share, 1.0 if profile is None else profile), 4)



def own_kernel(name: str, cls, torch_kernel_prefixes, own_names=None) -> bool:
    """Whether a device kernel row is the candidate's: launched from its code (and not a PyTorch kernel or a copy
    by name), or of unknown launcher (no host launch seen) and not named like PyTorch's or a library's. A kernel
    named like a library's (cuBLAS's, CUTLASS's) launched from the candidate's code, as ``at::cuda::addmm`` called
    from its extension launches one, is its own only if one of its libraries defines a function of that name
    (``own_names``, linked.own_kernel_names; None where the candidate built no library, e.g. Triton kernels)."""
    if cls in ("torch", "other") or name.startswith(NEVER_OWN):
        return False
    library_named = name.startswith(tuple(torch_kernel_prefixes))
    if library_named and own_names is not None:
        return kernel_name(name) in own_names
    return cls == "own" or not library_named


def own_device_kernels(report: dict, torch_kernel_prefixes, own_names=None) -> list[str]:
    """Names of the candidate's own device kernels that ran in the audited call."""
    if "device_us" in report:
        return [n for n, cls, _ in report["device_us"] if own_kernel(n, cls, torch_kernel_prefixes, own_names)]
    return [k for k in report.get("gpu_kernels", []) if not k.startswith(tuple(torch_kernel_prefixes))]


def coverage(report: dict, torch_kernel_prefixes=(), own_names=None) -> float | None:
    """The fraction of forward's device time (CPU time on the CPU) in the candidate's own kernels, from a
    ForwardAudit report; None where the profile has no times (audit off, or no device events)."""
    if report.get("device_us"):
        rows = report["device_us"]
        total = sum(us for _, _, us in rows)
        own = sum(us for n, cls, us in rows if own_kernel(n, cls, torch_kernel_prefixes, own_names))
    elif report.get("cpu_us"):
        own, total = report["cpu_us"]["own"], report["cpu_us"]["total"]
    else:
        return None
    if not total or total <= 0:
        return None
    return round(min(1.0, max(0.0, own / total)), 4)

"""Kernel coverage: the share of ``forward``'s time spent in the candidate's own kernels, read from the profile
the forward audit (worker/audit.py, ``ForwardAudit``) already takes of one correctness call per configuration.
This module is the trusted side's part: the fraction from the times the worker reports (worker/profile_times.py),
bounded by the sampled share, and which device kernels are the candidate's.

What is the candidate's own:

- an operator in a namespace its source registered (``TORCH_LIBRARY``), a call into one of its pybind extensions or
  fast-path kernels (each wrapped, while the profiler runs, in a ``kbench_ext::<name>`` record:
  measure/ownership.py, ``own_call``), a launch of its Triton kernel (a ``kbench_kernel::<name>`` record; on the
  CPU the interpreter's tensor operations inside it are the kernel's own);
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
times (worker/profile_times.py); the parent turns them into the fraction (``coverage``).
"""

from __future__ import annotations

import os
import re

from kbench_env.builder.symbols import kernel_name

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

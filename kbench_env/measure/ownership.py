"""Whose work a profile shows, as both sides read it: which PyTorch operators are glue rather than compute, the
profiler records that mark a call into the candidate's own code, and which files are the system's and the Python
installation's (any other library mapped into a worker is foreign: the candidate's, or one it loaded).

The backends and the fast-path kernels open the records around the candidate's calls while an audit's profiler runs
(``own_call``, ``profiling``; backends/triton.py around a kernel's launch), in the worker. The worker's forward audit
reads them (worker/audit.py, worker/profile_times.py); the trusted side judges its report with the same glue
(pipeline/linked.py, pipeline/rules.py) and attributes the timed calls' CPU samples by the same files
(pipeline/coverage.py, ``sampled_share``). It imports neither side.
"""

from __future__ import annotations

import contextlib
import functools
import os
import site
import sys

import torch

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

#: Profiler records around a launch of the candidate's Triton kernel (its internals are the kernel's own).
KERNEL_RECORD_PREFIX = "kbench_kernel::"
#: Profiler records around a call into the candidate's compiled extension or fast-path kernel.
EXT_RECORD_PREFIX = "kbench_ext::"
_profiler_on = torch._C._autograd._profiler_enabled  # this thread's profiler (not one of every thread: see own_call)


def profiling() -> bool:
    """Whether an audit's profiler runs: this thread's, or the CPU audit's profiler of every thread
    (worker/audit_threads.py), which is not this thread's (``torch.autograd.profiler`` notes that one)."""
    return bool(_profiler_on() or torch.autograd.profiler._is_profiler_enabled)


def own_call(name: str):
    """The context a counted call into the candidate's compiled code runs in: a ``kbench_ext::`` profiler record
    while an audit's profiler runs (``profiling``), nothing otherwise."""
    if profiling():
        return torch.profiler.record_function(EXT_RECORD_PREFIX + str(name))
    return contextlib.nullcontext()


def is_record(name: str) -> bool:
    """Whether a profile event is one of the records around the candidate's own calls."""
    return name.startswith(KERNEL_RECORD_PREFIX) or name.startswith(EXT_RECORD_PREFIX)


#: Where the files of the system and the Python installation (torch's libraries among them) live.
_SYSTEM = ("/usr/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/etc/", "/dev/", "/proc/", "/sys/", "/run/")


@functools.lru_cache(maxsize=1)
def trusted_prefixes() -> tuple:
    """The path prefixes of the system's and the Python installation's files (torch's libraries among them)."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(torch.__file__),
            *site.getsitepackages(), site.getusersitepackages()}
    # as the loader names them (through symbolic links, e.g. a linked virtual environment) and resolved
    return _SYSTEM + tuple({p.rstrip("/") + "/" for d in dirs for p in (os.path.abspath(d), os.path.realpath(d))})

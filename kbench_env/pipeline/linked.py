"""What the candidate's built libraries call outside the dispatcher, judged: the flags of the builds' symbols.

The builds' symbols are read on the trusted side, from the libraries the worker is given (sandbox/worker_build.py,
builder/symbols.py), before the worker loads them. Of the suspects found there:

- **PyTorch compute without the dispatcher** (``at::cpu::addmm``, ``at::cuda::addmm``, ``at::native::...``,
  ``at::_ops::addmm::redispatch``) and **math libraries** (BLAS, MKL, oneDNN, cuBLAS, cuDNN...), or a run-time
  lookup (``dlsym``) that can reach either: under ``rules="strict"`` the flag ``pytorch_compute_linked``, since no
  operator record shows that work to the forward audit. Entry points of glue (``at::cpu::empty``,
  ``at::native::copy_``: the operators measure/ownership.ALLOWED_GLUE names) are not compute. Under ``rules="kernelbench"``
  PyTorch's compute is allowed and the flag is dropped (rules.py); the kernel coverage still counts that work as
  PyTorch's (coverage.py: only time sampled in the candidate's own libraries is its own).
- **Libraries the builder did not make** that the worker has mapped from outside the system and the Python
  installation (one the candidate wrote into its scratch directory and loaded with ctypes): judged as builds, but
  for run-time lookups (Triton's kernel launchers, compiled in a GPU worker, call ``dlsym``).
- **RecordFunction's switches and global hooks** (``at::enableRecordFunction``, what ``at::RecordFunctionGuard``
  calls): ``audit_blinded`` under either rule (an honest kernel has no use for them).
"""

from __future__ import annotations

import functools
import os

import torch

from kbench_env.builder.symbols import nested_name
from kbench_env.sandbox.confine.record_controls import is_record_control
from kbench_env.measure.ownership import ALLOWED_GLUE
from kbench_env.protocol.integrity_flags import Flag, make

#: Sub-namespaces of at::cpu / at::cuda that hold compute that is not an operator's entry point.
_COMPUTE_PARTS = frozenset({"blas", "cub", "sparse", "solver", "cublas", "cusolver", "cusparse", "cudnn", "jit",
                            "cpublas", "mkldnn", "onednn", "fbgemm"})
#: Suffixes of an entry point's name after its operator's (``addmm_outf``, ``empty_symint``, ``mm_out_cpu``).
_SUFFIXES = ("_symint", "_outf", "_out", "_cpu", "_cuda", "_generic", "_nocheck", "_meta")


@functools.lru_cache(maxsize=1)
def _aten_ops() -> frozenset:
    return frozenset(n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
                     if n.startswith("aten::"))


def operator_of(name: str) -> str | None:
    """The aten operator an entry point's name is for (``addmm_outf`` -> ``addmm``), or None."""
    ops = _aten_ops()
    seen = name
    while True:
        if seen in ops:
            return seen
        cut = next((s for s in _SUFFIXES if seen.endswith(s) and len(seen) > len(s)), None)
        if cut is None:
            break
        seen = seen[: -len(cut)]
    # an overload's struct name (at::_ops::addmm_out, at::_ops::empty_memory_format): its longest operator prefix
    for i in range(len(name) - 1, 0, -1):
        if name[i] == "_" and name[:i] in ops:
            return name[:i]
    return None


def _glue(op: str | None) -> bool:
    return op is not None and (op in ALLOWED_GLUE or op.rstrip("_") in ALLOWED_GLUE or op + "_" in ALLOWED_GLUE)


def kind_of(suspect: dict) -> str | None:
    """"control", "compute" or "lookup" for one suspect symbol of builder/symbols.suspects, None for glue and for
    what computes nothing (at::cuda::getCurrentCUDAStream)."""
    symbol = suspect.get("symbol", "")
    if is_record_control(symbol):
        return "control"
    parts = nested_name(symbol)
    if not parts or parts[0] != "at":
        return "lookup" if symbol in ("dlsym", "dlvsym", "dlopen", "dlmopen") else "compute"
    if len(parts) < 3:
        return None
    if parts[1] == "_ops":  # at::_ops::<op>::redispatch: the kernel behind the dispatch keys it skips
        return None if _glue(operator_of(parts[2])) else "compute"
    if len(parts) > 3 and parts[2] in _COMPUTE_PARTS:
        return "compute"
    op = operator_of(parts[2])
    if _glue(op):
        return None
    if parts[1] == "native" or parts[2] in _COMPUTE_PARTS:
        return "compute"  # ATen's kernels themselves, and their helpers: nothing an extension needs
    return "compute" if op is not None else None


def own_kernel_names(linked: list) -> set | None:
    """The names (symbols.kernel_name) of the functions the candidate's libraries define, a GPU kernel's host stub
    among them; None when it built no library (coverage.own_kernel then goes by the launcher and the name)."""
    if not linked:
        return None
    return {name for _, scan in linked for name in scan.get("defines", ())}


def _named(entries: list, limit: int = 6) -> str:
    names = sorted({s.get("name") or s.get("symbol") for s in entries})
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def flags(linked: list) -> list[Flag]:
    """The integrity flags of the candidate's builds (``Worker.linked()``: [(library, scan)], a scan with "mapped"
    for a library the worker mapped that the builder did not make); rules.linked_flags drops those its rules
    allow."""
    out, compute, controls = [], [], []
    for library, scan in linked:
        name = os.path.basename(library)
        if scan.get("mapped"):  # a library's own copy of a math library is judged where the builder made it
            scan = {**scan, "suspects": [s for s in scan.get("suspects", []) if not s.get("defined")]}
        if "unreadable" in scan:
            compute.append(f"{name} (its symbol table could not be read: {scan['unreadable']})")
            continue
        kinds: dict = {}
        for s in scan.get("suspects", []):
            kinds.setdefault(kind_of(s), []).append(s)
        if kinds.get("control"):
            controls.append(f"{name} names {_named(kinds['control'])}")
        if kinds.get("compute"):
            own = " (its own copy)" if any(s.get("defined") for s in kinds["compute"]) else ""
            compute.append(f"{name} calls {_named(kinds['compute'])}{own}")
        if kinds.get("lookup") and not scan.get("mapped"):  # Triton's launchers, built in the worker, use dlsym
            compute.append(f"{name} looks symbols up at run time ({_named(kinds['lookup'])}), which reaches them "
                           f"unnamed")
    if controls:
        out.append(make("audit_blinded", "the candidate's build can switch PyTorch's operator records off or hook "
                        "every operator: " + "; ".join(controls[:3])))
    if compute:
        out.append(make("pytorch_compute_linked", "the candidate's build calls PyTorch's or a math library's "
                        "compute directly, past the dispatcher where the forward audit sees no operator: "
                        + "; ".join(compute[:3]) + ". Under the strict rules only allocation, views and data "
                        "movement may be called from your C++/CUDA besides your own code"))
    return out

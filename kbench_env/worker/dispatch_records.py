"""The dispatcher's record-free entries from Python, given a record in the worker.

``torch.ops.aten.addmm.default.redispatch(keyset, ...)`` (``_DispatchOperatorHandle.redispatch_boxed``) and a
kernel taken from the dispatcher's tables (``torch.library.get_kernel``: ``_SafeKernelFunction.call_boxed``) run an
operator's kernel without the RecordFunction that a dispatcher call opens: ``torch.addmm`` so called is unseen by
the forward audit (the Python form of ``at::_ops::addmm::redispatch``, which builder/symbols.py finds in a
library). torch uses both for operators defined in Python (``torch.library.custom_op``'s autograd) and its Python
overrides of aten kernels, so they are not refused: each call of an operator outside the candidate's own
namespaces runs inside a record named for it (``aten::addmm``), which the audit judges as it judges a call of the
operator (a PyTorch compute operator under the strict rules, PyTorch's time in the coverage).

In the worker only, before the candidate loads. The originals stay reachable from Python (the wrappers' closures):
a candidate that digs them out runs unrecorded again (README, known gaps).
"""

from __future__ import annotations

import torch

_record = torch.autograd.profiler.record_function


def _recorded(call, op_name):
    def wrapper(self, *args, **kwargs):
        name = op_name(self)
        if name is None or not name.startswith("aten::"):  # the candidate's own operators, and what has no name
            return call(self, *args, **kwargs)
        with _record(name):
            return call(self, *args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = getattr(call, "__name__", "call")
    return wrapper


def _handle_name(handle):
    try:
        return handle.schema().name
    except Exception:  # noqa: BLE001 - no schema: not an aten operator's handle
        return None


def _kernel_name(kernel):
    return _handle_name(getattr(kernel, "op_handle", None))


def install() -> None:
    """Wrap ``redispatch_boxed`` and ``call_boxed`` (see the module docstring)."""
    handle = getattr(torch._C, "_DispatchOperatorHandle", None)
    if handle is not None and hasattr(handle, "redispatch_boxed"):
        handle.redispatch_boxed = _recorded(handle.redispatch_boxed, _handle_name)
    kernel = getattr(torch._C, "_SafeKernelFunction", None)
    if kernel is not None and hasattr(kernel, "call_boxed"):
        kernel.call_boxed = _recorded(kernel.call_boxed, _kernel_name)

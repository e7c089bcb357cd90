"""PyTorch's Python switches of the operator records, taken out of the worker's torch before the candidate loads.

``torch.autograd._enable_record_function(False)`` switches RecordFunction off on the calling thread: switched off
in forward, a ``torch.addmm`` runs unseen by the forward audit, and switched on again before forward returns, the
audit's own record after forward (worker/audit_threads.SENTINEL) is there as usual. ``_toggle_collection_dynamic``
pauses a running profile's collection; ``_clear_callbacks`` removes the profiler's callbacks. An honest kernel has
no use for any of them, and kbench's own audit calls none.

Each is replaced, wherever torch's modules hold it, by a function that refuses the call through the audit hook (a
``kbench.record_switch`` event: the hook reports it, the trusted side flags ``sandbox_violation``, and the call
raises PermissionError), and the original is dropped: no Python object is left that reaches it, so no spelling
(``getattr(torch.autograd, '_enable_' + 'record_function')``, ``torch._C._autograd.__dict__``, the garbage
collector's lists) finds it. Native code can still flip the thread's record state itself (README, known gaps);
libraries that name the C++ switches are flagged from their symbols (builder/symbols.py) and, loaded by other means,
by the worker's library scan (audit_threads.library_controls).
"""

from __future__ import annotations

import sys

import torch

#: The switches, by name, in the module that defines them.
SWITCHES = ("_enable_record_function", "_toggle_collection_dynamic", "_clear_callbacks")
#: The audit event a refused switch raises (sandbox/confine/audit_hook.Guard refuses and reports it).
EVENT = "kbench.record_switch"


def _refusal(name: str):
    def refused(*args, **kwargs):
        sys.audit(EVENT, name)
        # without an audit hook enforcing (isolation off), still not switched: the call does nothing
        raise PermissionError(f"sandbox: not allowed to switch PyTorch's operator records ({name})")

    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = f"Refused in kbench's worker: {name} would hide operators from the forward audit."
    return refused


def remove() -> list[str]:
    """Replace the switches everywhere torch's modules hold them; returns the names of those still reachable from
    somewhere else (none expected: then found and replaced in every loaded module)."""
    source = torch._C._autograd
    originals = {name: getattr(source, name) for name in SWITCHES if hasattr(source, name)}
    refusals = {name: _refusal(name) for name in originals}
    for name in originals:
        setattr(source, name, refusals[name])
    for module in (torch.autograd, torch.autograd.profiler):
        for name in originals:
            if hasattr(module, name):
                setattr(module, name, refusals[name])
    # Anything else that holds one (a module that imported it under another name) is found and replaced too.
    left = [name for name in originals if sys.getrefcount(originals[name]) > 2]  # beyond originals and the argument
    if left:
        held = {id(originals[name]): refusals[name] for name in left}
        for module in list(sys.modules.values()):
            space = getattr(module, "__dict__", None)
            if not isinstance(space, dict):
                continue
            for key, value in list(space.items()):
                if id(value) in held:
                    space[key] = held[id(value)]
    del originals  # the last references: freed now (a builtin function holds no cycle)
    return left

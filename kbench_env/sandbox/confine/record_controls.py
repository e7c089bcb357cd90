"""RecordFunction's C++ switches and global hooks, by the mangled prefix of their symbols: what a candidate's code
could use to switch off the operator records the forward audit reads. Here, in the sandbox's lower layer, because
the worker's audit hook (audit_hook.py) refuses looking them up, the worker's audit scans the libraries it has
loaded for them (worker/audit_threads.py), and the trusted side flags libraries that name them (builder/symbols.py,
pipeline/linked.py)."""

from __future__ import annotations

#: {mangled prefix: what it is}. A library that names one can switch the operator records off or hook every operator.
RECORD_CONTROLS = {
    "_ZN2at20enableRecordFunctionEb": "at::enableRecordFunction (what at::RecordFunctionGuard calls)",
    "_ZN2at24set_record_function_tls_": "at::set_record_function_tls_",
    "_ZN2at17addGlobalCallback": "at::addGlobalCallback",
    "_ZN2at22addThreadLocalCallback": "at::addThreadLocalCallback",
    "_ZN2at14removeCallback": "at::removeCallback",
    "_ZN2at15disableCallback": "at::disableCallback",
    "_ZN2at14clearCallbacks": "at::clearCallbacks",
    "_ZN2at20clearGlobalCallbacks": "at::clearGlobalCallbacks",
    "_ZN2at25clearThreadLocalCallbacks": "at::clearThreadLocalCallbacks",
}
_PREFIXES = tuple(RECORD_CONTROLS)


def is_record_control(name: str) -> bool:
    """Whether a (mangled) symbol name is one of RecordFunction's switches or hooks (RECORD_CONTROLS)."""
    return name.startswith(_PREFIXES)

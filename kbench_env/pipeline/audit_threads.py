"""What the forward audit (``integrity.ForwardAudit``) needs so that running PyTorch compute where it does not look
is not a way around it: the CPU profiler of every thread's operators, and the signs that the operator records the
audit reads were switched off or hooked (``audit_blinded``).

- **Every thread.** On the CPU the audit profiles with kineto's CPU profiler told to record all threads
  (``profile_all_threads``): the legacy profiler recorded forward's own thread only, so ``torch.logsumexp`` run on a
  helper thread went unseen. It is started through ``torch.autograd.profiler.profile`` (``torch.profiler.profile``
  imports Inductor on its first use: over a second per worker).
- **Records switched off on forward's thread.** PyTorch's operator records (RecordFunction) are per thread and can be
  switched off (``at::RecordFunctionGuard guard(false)``, ``torch.autograd._enable_record_function(False)``). The audit
  opens a record of its own (``SENTINEL``) on forward's thread after forward returns, inside the profile: missing from
  the profile, the records were off when forward returned.
- **Record controls in the candidate's libraries.** A library the candidate built or loaded that names one of
  RecordFunction's switches or global hooks (``CONTROLS``: ``at::enableRecordFunction``, which the guard calls,
  ``at::addGlobalCallback``...) is flagged whether or not it switched them back: an honest kernel has no use for
  them. Libraries are those the dynamic loader has loaded (``dl_iterate_phdr``: load_inline's and the fast path's
  builds, any ``ctypes.CDLL``) from outside the Python installation and the system, each file read once.

What this cannot see: records switched off and on again within forward from Python, or from the candidate's code
through an interface the scan does not find (ctypes on libtorch's own symbol, code mapped without the loader);
records switched off on a helper thread. In-process checks only raise the bar (native code can do anything in its process); issue #21's trust
boundary is what makes such work pay nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import site
import sys

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd.profiler import profile

#: The record the audit opens on forward's thread before it stops the profile.
SENTINEL = "kbench_audit::sentinel"
#: Symbols (C++-mangled, as a library that calls or looks them up holds them) that switch RecordFunction off or hook
#: every operator: what the candidate's libraries must not name.
CONTROLS = {
    b"_ZN2at20enableRecordFunctionEb": "at::enableRecordFunction (what at::RecordFunctionGuard calls)",
    b"_ZN2at24set_record_function_tls_": "at::set_record_function_tls_",
    b"_ZN2at17addGlobalCallback": "at::addGlobalCallback",
    b"_ZN2at22addThreadLocalCallback": "at::addThreadLocalCallback",
    b"_ZN2at14removeCallback": "at::removeCallback",
    b"_ZN2at15disableCallback": "at::disableCallback",
    b"_ZN2at14clearCallbacks": "at::clearCallbacks",
    b"_ZN2at20clearGlobalCallbacks": "at::clearGlobalCallbacks",
    b"_ZN2at25clearThreadLocalCallbacks": "at::clearThreadLocalCallbacks",
}
#: Where the files of the system and the Python installation (torch's libraries among them) live: not scanned.
_SYSTEM = ("/usr/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/etc/", "/dev/", "/proc/", "/sys/", "/run/")
_scanned: dict = {}  # (path, inode, size, mtime) -> the controls the file names


def cpu_profiler():
    """A profiler (``torch.autograd.profiler.profile``) of every thread's operators on the CPU."""
    return profile(use_kineto=True, experimental_config=_ExperimentalConfig(profile_all_threads=True))


def sentinel():
    """The audit's own record, opened and closed on forward's thread inside the profile."""
    return torch.autograd.profiler.record_function(SENTINEL)


def blinding(events, profile_error: str | None = None) -> list[str]:
    """Why the audit's profile cannot be trusted (its sentinel missing, the profile stopped by someone else, record
    controls in the candidate's libraries), one reason each; empty when there is none."""
    reasons = []
    if profile_error:
        reasons.append(f"the profiler was stopped or broken during forward ({profile_error})")
    elif not any(e.name == SENTINEL for e in events):
        reasons.append("the audit's own record is missing from its profile: PyTorch's operator records "
                       "(RecordFunction) were switched off on forward's thread, or the profiler was stopped, during "
                       "forward, so the profile does not show what forward ran")
    for path, names in library_controls():
        reasons.append(f"{os.path.basename(path)} names {', '.join(names)}: it can switch PyTorch's operator records "
                       "off or hook every operator")
    return reasons


def threads(events) -> int:
    """How many threads ran PyTorch operators in the profile."""
    return len({getattr(e, "thread", 0) for e in events if "::" in e.name and not e.name.startswith("kbench")})


def library_controls() -> list[tuple[str, list[str]]]:
    """The libraries mapped into this process from outside the system and the Python installation that name record
    controls (``CONTROLS``): (path, their names)."""
    out = []
    for path in _foreign_libraries():
        names = _controls_in(path)
        if names:
            out.append((path, names))
    return out


@functools.lru_cache(maxsize=1)
def _trusted_prefixes() -> tuple:
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(torch.__file__),
            *site.getsitepackages(), site.getusersitepackages()}
    # as the loader names them (through symbolic links, e.g. a linked virtual environment) and resolved
    return _SYSTEM + tuple({p.rstrip("/") + "/" for d in dirs for p in (os.path.abspath(d), os.path.realpath(d))})


class _Object(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p)]  # dl_phdr_info's first two members


_EACH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Object), ctypes.c_size_t, ctypes.c_void_p)


def _loaded() -> list[str]:
    """The paths of the objects the dynamic loader has loaded into this process."""
    names: list = []

    def each(info, size, data):
        names.append(info.contents.name or b"")
        return 0

    try:
        ctypes.CDLL(None).dl_iterate_phdr(_EACH(each), None)
    except (OSError, AttributeError):
        return []
    return [n.decode(errors="replace") for n in names]


def _foreign_libraries() -> list[str]:
    trusted = _trusted_prefixes()
    return sorted({p for p in _loaded() if p.startswith("/") and not p.startswith(trusted)})


def _controls_in(path: str) -> list[str]:
    try:
        st = os.stat(path)
    except OSError:
        return []
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _scanned:
        try:
            with open(path, "rb") as f:
                data = f.read() if f.read(4) == b"\x7fELF" else b""
        except OSError:
            data = b""
        _scanned[key] = [name for sym, name in CONTROLS.items() if sym in data]
    return _scanned[key]


def flags(report: dict, config: str) -> list[str]:
    """The ``audit_blinded`` flag of a ForwardAudit report (parent side), if it has reasons."""
    reasons = report.get("blinded") or []
    if not reasons:
        return []
    return [f"audit_blinded: the forward audit of configuration {config!r} was blinded: {'; '.join(reasons[:4])}"]

"""What the forward audit (worker/audit.py, ``ForwardAudit``) needs so that running PyTorch compute where it does not look
is not a way around it: the CPU profiler of every thread's operators, and the signs that the operator records the
audit reads were switched off or hooked (``audit_blinded``).

- **Every thread.** On the CPU the audit profiles with kineto's CPU profiler told to record all threads
  (``profile_all_threads``): the legacy profiler recorded forward's own thread only, so ``torch.logsumexp`` run on a
  helper thread went unseen. It is started through ``torch.autograd.profiler.profile`` (``torch.profiler.profile``
  imports Inductor on its first use: over a second per worker).
- **Records switched off on forward's thread.** PyTorch's operator records (RecordFunction) are per thread and can be
  switched off (``at::RecordFunctionGuard guard(false)``, ``torch.autograd._enable_record_function(False)``). The audit
  opens a record of its own on forward's thread just before forward is called (``START``) and after it returns
  (``SENTINEL``), inside the profile: one missing from the profile, the records were off when forward started (left
  off by an earlier call) or when it returned.
- **Records switched off and on again within forward.** The Python switches are gone from the worker's torch
  (worker/record_switches.py: refused and flagged however they are spelt, and the screen flags the plain spelling);
  the C++ ones are flagged from the symbols of the candidate's builds (builder/symbols.py) and looked up through ctypes
  are refused by the worker's audit hook.
- **Record controls in the candidate's libraries.** A library the candidate built or loaded that names one of
  RecordFunction's switches or global hooks (``CONTROLS``: ``at::enableRecordFunction``, which the guard calls,
  ``at::addGlobalCallback``...) is flagged whether or not it switched them back: an honest kernel has no use for
  them. Libraries are those the dynamic loader has loaded (``dl_iterate_phdr``: load_inline's and the fast path's
  builds, any ``ctypes.CDLL``) from outside the Python installation and the system, each file read once.

What this cannot see: records switched off and on again within forward by native code that reaches the switch
without naming it (an address computed from another symbol's, code mapped without the loader, the thread-local
state written directly); records switched off on a helper thread. In-process checks only raise the bar (native code
can do anything in its process); issue #21's trust boundary is what makes such work pay nothing.

The worker runs this module; the trusted side turns its reasons into the ``audit_blinded`` flag
(pipeline/integrity.py, ``blinded_flags``).
"""

from __future__ import annotations

import ctypes
import os

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd.profiler import profile

from kbench_env.sandbox.confine.record_controls import RECORD_CONTROLS
from kbench_env.measure.ownership import trusted_prefixes

#: The record the audit opens on forward's thread before it stops the profile.
SENTINEL = "kbench_audit::sentinel"
#: The record the audit opens on forward's thread once the profile runs, just before forward is called.
START = "kbench_audit::forward_start"
#: Symbols (C++-mangled, as a library that calls or looks them up holds them) that switch RecordFunction off or hook
#: every operator: what the candidate's libraries must not name (sandbox/confine/record_controls.py).
CONTROLS = {k.encode(): v for k, v in RECORD_CONTROLS.items()}
_scanned: dict = {}  # (path, inode, size, mtime) -> the controls the file names


def cpu_profiler():
    """A profiler (``torch.autograd.profiler.profile``) of every thread's operators on the CPU."""
    return profile(use_kineto=True, experimental_config=_ExperimentalConfig(profile_all_threads=True))


def sentinel(name: str = SENTINEL):
    """The audit's own record, opened and closed on forward's thread inside the profile (``SENTINEL`` after
    forward, ``START`` before it)."""
    return torch.autograd.profiler.record_function(name)


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
    elif not any(e.name == START for e in events):
        reasons.append("the audit's record before forward is missing from its profile: PyTorch's operator records "
                       "(RecordFunction) were off on forward's thread when forward started (left off by earlier "
                       "code), so the profile does not show what forward ran")
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
    trusted = trusted_prefixes()
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

"""The Landlock layer: reads, writes and program execution limited to the allowed paths (paths.py), TCP bind and
connect denied (ABI 4+), signals and abstract unix sockets scoped to the worker (ABI 6+)."""

from __future__ import annotations

import ctypes
import os
import struct

from kbench_env.machine.device import Device
from kbench_env.sandbox.confine.libc import PR_SET_NO_NEW_PRIVS, err, libc

_SYS_LL_CREATE, _SYS_LL_ADD, _SYS_LL_RESTRICT = 444, 445, 446

# Landlock access rights
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_ABI1 = (1 << 13) - 1
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_FILE_RIGHTS = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1, 2
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1, 2


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    r = libc.syscall(_SYS_LL_CREATE, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return int(r) if r > 0 else 0


def restrict(writes: list, reads: list, execs: list, device: str, act: dict, miss: dict) -> None:
    """Restrict this process to reading ``reads``, running programs from ``execs`` and writing ``writes`` (a
    worker: its scratch directory; the builder: its scratch directory and the build cache), plus the GPU's device
    files on ``cuda``."""
    abi = landlock_abi()
    if abi < 1:
        miss["landlock"] = "not available on this kernel (reads, writes and signals rely on the other layers)"
        return
    fs = _LL_ABI1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    net = (_LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    fd = libc.syscall(_SYS_LL_CREATE, attr, len(attr), 0)
    if fd < 0:
        miss["landlock"] = err("landlock_create_ruleset")
        return
    fd = int(fd)
    read = _LL_READ_FILE | _LL_READ_DIR
    rules = [(p, read) for p in reads] + [(p, _LL_EXECUTE) for p in execs]
    rules += [(p, fs & ~_LL_EXECUTE) for p in writes]
    rules += [(p, _LL_READ_FILE | _LL_WRITE_FILE) for p in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")]
    if Device.parse(device).is_cuda:
        rules += [(f"/dev/{n}", _LL_READ_FILE | _LL_WRITE_FILE) for n in os.listdir("/dev")
                  if n.startswith(("nvidia", "dri"))]
    merged: dict = {}
    for p, access in rules:
        merged[p] = merged.get(p, 0) | access
    try:
        for path, access in merged.items():
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= _LL_FILE_RIGHTS
                rule = struct.pack("=Qi", access & fs, pfd)
                if libc.syscall(_SYS_LL_ADD, fd, 1, rule, 0) != 0:  # LANDLOCK_RULE_PATH_BENEATH
                    raise OSError(ctypes.get_errno(), err(f"landlock_add_rule({path})"))
            finally:
                os.close(pfd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), err("no_new_privs"))
        if libc.syscall(_SYS_LL_RESTRICT, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), err("landlock_restrict_self"))
    except OSError as exc:
        miss["landlock"] = str(exc)
        return
    finally:
        os.close(fd)
    extra = []
    if net:
        extra.append("TCP bind/connect denied")
    if scoped:
        extra.append("signals and abstract unix sockets scoped to the sandbox")
    else:
        miss["landlock_scoping"] = f"Landlock ABI {abi} < 6: signals to same-uid processes outside are not scoped"
    act["landlock"] = (f"ABI {abi}: reads from {len(reads)} system/Python/kbench paths + scratch + cache, writes to "
                       f"{' and '.join(writes)} only, programs from system/Python paths only"
                       + ("; " + "; ".join(extra) if extra else ""))

"""The privilege layer: no_new_privs always; as root, every capability dropped (bounding and ambient sets emptied,
SECBIT_NOROOT locked), so a uid-0 worker cannot remount, raise its limits, load modules or leave its cgroup."""

from __future__ import annotations

import ctypes
import errno
import os
import struct

from kbench_env.sandbox.confine.libc import PR_SET_NO_NEW_PRIVS, err, libc

_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT = 4, 24, 28, 47


def drop(act: dict, miss: dict) -> None:
    """no_new_privs; as root, every capability dropped for good."""
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() != 0:
        act["privileges"] = "unprivileged user, no_new_privs"
        return
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    libc.prctl(_PR_SET_SECUREBITS, 0xEF, 0, 0, 0)  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE (+locks)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)
    if libc.capset(header, data) != 0:
        miss["privileges"] = err("capset") + " (the uid-0 worker keeps its capabilities)"
        return
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    act["privileges"] = "uid 0 without capabilities (bounding set empty, SECBIT_NOROOT locked), no_new_privs"

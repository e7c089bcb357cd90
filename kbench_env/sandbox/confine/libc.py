"""The C library as the confinement layers call it (ctypes), the error text of a failed call, and the prctl
option that several layers set (no_new_privs)."""

from __future__ import annotations

import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

PR_SET_NO_NEW_PRIVS = 38


def err(what: str) -> str:
    """``what`` and the reason the last C library call gave (errno), if any."""
    e = ctypes.get_errno()
    return f"{what}: {os.strerror(e)}" if e else what

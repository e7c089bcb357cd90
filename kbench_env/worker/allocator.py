"""The worker's C allocator held steady on the CPU, set before any candidate code runs.

A timed block keeps its calls' outputs until the trusted side has read them, then frees them all (worker/executor.py).
By default glibc gives each allocation over its mmap threshold its own mapping and returns freed memory at the top
of the heap to the system: then every call of every block faults in its output's pages afresh, a cost that can
outweigh a small kernel many times over under load and that depends on the threshold glibc has adapted to from each
process's past allocations. With no mmap'd allocations and no trimming, the memory a block's outputs took is kept
for the next block: from the second block on, reference and candidate alike write their outputs into pages already mapped.
The candidate may change these settings in its own process; that changes only its own side's allocations.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def hold_steady() -> bool:
    """Set glibc's allocator as the module docstring says; False where there is no glibc ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: libc's, without a library search
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))

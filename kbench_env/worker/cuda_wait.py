"""How a GPU worker's thread waits for its device: asleep (CU_CTX_SCHED_BLOCKING_SYNC) between and inside its
untimed requests, spinning (CU_CTX_SCHED_SPIN) inside the requests that time.

Why: CUDA's own choice for a process with fewer contexts than the host has cores is to spin, so every wait of a
check (a candidate's runs, the outputs it hands over, its set-ups) keeps a core busy for as long as the device
works. A batch's checks run several at once while the next candidates compile on the same host's cores, and a
spinning wait takes its core from the compilers. A timed request must wait as it always has: an eager block timed
by the host's clock around a wait, the wall-clock run and the device's calibration would count a sleeping thread's
wake-up, and a candidate that waits inside its own forward would be timed with it. So the context spins for those
(``TIMED``: the schedule the context was started with, CUDA's own choice) and sleeps otherwise, switched with the
driver's ``cuCtxSetFlags`` (the context's flags, for every thread of the process). Where the driver cannot switch
(an older driver, no context yet), nothing changes: the context keeps CUDA's own choice for every request.

The candidate's code runs in this process and may switch the flags itself: it only changes how its own process
waits (a spinning check costs the host a core; a sleeping timing is slower, never faster).
"""

from __future__ import annotations

import contextlib
import ctypes

from kbench_env.protocol import messages as msg

CU_CTX_SCHED_SPIN = 0x01
CU_CTX_SCHED_BLOCKING_SYNC = 0x04
CU_CTX_SCHED_MASK = 0x07
#: The requests that time (the context spins while it serves them).
TIMED = frozenset({msg.GPU_BLOCK, msg.WALLCLOCK, msg.CALIBRATE})

_set_flags = None  # the driver's cuCtxSetFlags (the context's other flags kept), once it sleeps between requests
_timed = 0  # the schedule the context was started with: the timed requests'


def start(enabled: bool, driver=None) -> str:
    """Make the current CUDA context wait asleep (where ``enabled``); called once the context is current. What was
    done: "blocking", "off", or "unavailable: <why>" (the context then keeps CUDA's own choice). ``driver``: the
    loaded driver library (a stand-in in the tests)."""
    global _set_flags, _timed
    _set_flags = None
    if not enabled:
        return "off"
    try:
        lib = driver if driver is not None else ctypes.CDLL("libcuda.so.1")
        get_flags, put_flags = lib.cuCtxGetFlags, lib.cuCtxSetFlags
    except (OSError, AttributeError) as exc:
        return f"unavailable: {exc}"
    held = ctypes.c_uint(0)
    code = get_flags(ctypes.byref(held))
    if code != 0:
        return f"unavailable: cuCtxGetFlags returned {code}"
    others = held.value & ~CU_CTX_SCHED_MASK  # (cuCtxSetFlags sets every flag: the others are kept as they are)
    timed = held.value & CU_CTX_SCHED_MASK

    def set_flags(schedule: int) -> int:
        return put_flags(others | schedule)

    code = set_flags(CU_CTX_SCHED_BLOCKING_SYNC)
    if code != 0:
        return f"unavailable: cuCtxSetFlags returned {code}"
    # a driver that switches one way but not back would leave timings asleep: tried both ways before it is used
    back, again = set_flags(timed), set_flags(CU_CTX_SCHED_BLOCKING_SYNC)
    if back != 0 or again != 0:
        put_flags(held.value)
        return f"unavailable: cuCtxSetFlags returned {back}, {again} switching back"
    _set_flags, _timed = set_flags, timed
    return "blocking"


@contextlib.contextmanager
def during(kind: str):
    """Around the request ``kind``: waiting as the context was started to (spinning) if it is one of TIMED, asleep
    again after it, however it ends; other requests' waits sleep. A timed request whose context cannot be switched
    back fails (RuntimeError) rather than being timed asleep."""
    set_flags = _set_flags
    if set_flags is None or kind not in TIMED:
        yield
        return
    code = set_flags(_timed)
    if code != 0:  # (the candidate's own code can break its context) never timed asleep: the request fails
        raise RuntimeError(f"the device's context could not be made to spin for a timed request (cuCtxSetFlags "
                           f"returned {code})")
    try:
        yield
    finally:
        set_flags(CU_CTX_SCHED_BLOCKING_SYNC)

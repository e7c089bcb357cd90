"""A GPU's memory as every process on it sees it: how much is free, whether an error is the device running out, and
waiting (with a deadline) for memory to come back.

One host's evaluations share one device: the candidates' workers, the spare workers (a CUDA context each), the
references' workers and the trusted process all allocate from the same memory, and none of them can see what the
others will ask for next. The spare pool leaves a share of the device free for the evaluations in flight
(sandbox/spares.py), and an evaluation that still meets an exhausted device is given back its memory and run once
more rather than charged for it (pipeline/attempts.py).
"""

from __future__ import annotations

import time

import torch

from kbench_env.machine.device import Device

#: The share of a GPU's memory the spare pool leaves free for the evaluations in flight (their inputs and outputs,
#: the references' runs, the trusted side's staged blocks), and that an evaluation run again waits to see free.
FREE_RESERVE_SHARE = 0.25
#: What one more CUDA process takes before it allocates anything (its context and the forward audit's profiler),
#: rounded up; counted when deciding whether another spare fits.
PROCESS_BYTES = 1 << 30
#: How often ``wait_for_free`` looks again.
POLL_S = 0.25

_MARKS = ("OutOfMemoryError", "CUDA out of memory", "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY")


def free_and_total(device) -> tuple[int, int] | None:
    """(free, total) bytes of ``device``'s memory by the driver (every process's use counted); None on the CPU or
    where the driver gives no figure."""
    dev = Device.parse(device)
    if not dev.is_cuda:
        return None
    try:
        free, total = torch.cuda.mem_get_info(dev.index or 0)
    except Exception:  # noqa: BLE001 - no driver or no device here: no figure
        return None
    return int(free), int(total)


def room_for_processes(device, reserve_share: float = FREE_RESERVE_SHARE) -> int | None:
    """How many more CUDA processes fit on ``device`` while ``reserve_share`` of its memory stays free; None when
    there is no figure (the CPU, no driver): no bound from memory then."""
    figures = free_and_total(device)
    if figures is None:
        return None
    free, total = figures
    return max(0, int((free - reserve_share * total) // PROCESS_BYTES))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says a device ran out of memory: torch's own error in this process, or another process's
    (a worker's timed call) reported by its message."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = f"{type(exc).__name__}: {exc}"
    return any(mark in text for mark in _MARKS)


def give_back_cached(device) -> None:
    """Give ``device``'s free blocks cached by this process's allocator back to the driver, for other processes."""
    if Device.parse(device).is_cuda:
        torch.cuda.empty_cache()  # (nothing where this process never started CUDA)


def wait_for_free(device, timeout_s: float, reserve_share: float = FREE_RESERVE_SHARE, clock=time.monotonic,
                  sleep=time.sleep) -> bool:
    """Wait until ``reserve_share`` of ``device``'s memory is free, at most ``timeout_s`` seconds; whether it is
    (True at once where there is no figure)."""
    deadline = clock() + timeout_s
    while True:
        figures = free_and_total(device)
        if figures is None or figures[0] >= reserve_share * figures[1]:
            return True
        if clock() >= deadline:
            return False
        sleep(min(POLL_S, max(0.0, deadline - clock())))

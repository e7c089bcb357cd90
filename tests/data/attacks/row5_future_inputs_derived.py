"""Attack row 5 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: no patching and no
forged message. In the untimed warm-up of a timing, ``forward`` finds the harness's own timed-input maker in the
frames that call it (``make_inputs`` in the timing loop), derives every future timed input with it, bit for bit,
and computes their outputs; timed call j then returns stored output j (calls are counted from the warm-up's first).
Where no input maker is in reach the candidate is the honest kernel."""

import sys
import time

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

_STATE = {}  # the timing in progress: its loop's frame, the calls seen, its warm-up calls, the stored outputs

#: A faked call is padded to 1/PAD of the honest kernel's time on its shape (measured here, in the untimed
#: correctness runs): the claimed speedup is about PAD times the honest one, under the trusted side's re-timing
#: threshold (10x), as an attacker who knows that threshold would keep it.
PAD = 4.0
_HONEST_S = {}  # input shape -> the honest kernel's least time seen


def _kernel(x: torch.Tensor) -> torch.Tensor:
    """The honest kernel (the shipped solution's), timed."""
    t0 = time.perf_counter()
    out = logsumexp_rows(x)
    dt = time.perf_counter() - t0
    key = tuple(x.shape)
    _HONEST_S[key] = min(dt, _HONEST_S.get(key, dt))
    return out


def _pad(t0: float, x: torch.Tensor) -> None:
    """Spin until 1/PAD of the honest kernel's time on ``x``'s shape has passed since ``t0``."""
    until = t0 + _HONEST_S.get(tuple(x.shape), 0.0) / PAD
    while time.perf_counter() < until:
        pass


def _timing_frame():
    """The frame of the timing loop that called forward (its code holds the input maker), or None."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        if "make_inputs" in frame.f_code.co_varnames and "warmup" in frame.f_code.co_varnames:
            return frame
        frame = frame.f_back
    return None


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        frame = _timing_frame()
        if frame is None:
            return _kernel(x)
        if _STATE.get("frame") is not frame:  # the first (warm-up) call of this timing: derive every timed input
            names = frame.f_locals
            maker = names["make_inputs"]
            _STATE.update(frame=frame, calls=0, warmup=int(names["warmup"]),
                          outputs=[_kernel(maker(j)[0]) for j in range(int(names.get("max_reps", 200)))])
        j = _STATE["calls"] - _STATE["warmup"]
        _STATE["calls"] += 1
        if not 0 <= j < len(_STATE["outputs"]):
            return _kernel(x)
        _pad(t0, x)
        return _STATE["outputs"][j]

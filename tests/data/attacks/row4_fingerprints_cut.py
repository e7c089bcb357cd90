"""Attack row 4 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: only the first three
timed calls are computed; every later timed call returns an unwritten tensor, except the last, which returns the
third call's output again. Before the last call the worker's list of timed-output fingerprints is cut back to its
first two entries, so the reply carries three fingerprints, right for calls 0, 1 and 2, for all the timing's
repetitions (the trusted side picks the calls it checks among those it was sent).

Found in the frames that call ``forward``: the timing loop's call index ``j`` and ``max_reps`` (the loop runs to
``max_reps`` when the calls are this fast), and the worker's fingerprint list ``fps``. Where they are not there (the
correctness runs, or a worker that no longer times or fingerprints itself) the candidate is the honest kernel."""

import sys
import time

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

KEEP = 2  # fingerprints kept at the start; call KEEP's output stands in for the last call's
_KEPT = {}  # id(fingerprint list) -> call KEEP's output

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


def _timing_frames():
    """(the timing loop's locals, the list of fingerprints) from the frames that called forward, or Nones. Only the
    frames whose code has those names are read (reading a frame's locals costs)."""
    loop = fps = None
    frame = sys._getframe(2)
    while frame is not None and (loop is None or fps is None):
        code = frame.f_code
        if loop is None and "max_reps" in code.co_varnames and "j" in code.co_varnames:
            loop = frame.f_locals
            if not isinstance(loop.get("j"), int):  # the warm-up: no call index yet
                return None, None
        elif fps is None and "fps" in code.co_cellvars + code.co_varnames:
            fps = frame.f_locals.get("fps")
        frame = frame.f_back
    return loop, fps if isinstance(fps, list) else None


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        loop, fps = _timing_frames()
        if loop is None or fps is None:
            return _kernel(x)
        j, last = loop["j"], loop["max_reps"] - 1
        if j < KEEP:
            return _kernel(x)
        if j == KEEP:
            _KEPT[id(fps)] = _kernel(x)
            return _KEPT[id(fps)]
        if j == last:
            del fps[KEEP:]
            out = _KEPT.pop(id(fps))
        else:
            out = x.new_empty(x.shape[:1])
        _pad(t0, x)
        return out

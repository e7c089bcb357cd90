"""Attack row 3 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: any patch check the
worker keeps (an object of type ``HarnessGuard``, looked for in the frames that load this module, e.g. the worker's
``main``, and among all live objects) is emptied, so that it would report nothing changed (the worker keeps none:
the trusted side does not read its clocks). Then the clocks the worker's timing reads are slowed
4-fold (the claimed speedup stays under the trusted side's re-timing threshold, 10x).

The kernel is the shipped solution's. What is slowed: every ``_perf_counter`` a loaded kbench module holds, and
``time.perf_counter`` / ``perf_counter_ns`` / ``monotonic``. Where the worker's clock does not decide the time, the
candidate is the honest kernel."""

import gc
import sys
import time

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

SLOW = 4.0


def _is_guard(obj) -> bool:
    return type(obj).__name__ == "HarnessGuard"


def _silence_guards() -> int:
    found = []
    frame = sys._getframe()
    while frame is not None:
        found += [v for v in frame.f_locals.values() if _is_guard(v)]
        frame = frame.f_back
    found += [o for o in gc.get_objects() if _is_guard(o)]
    for guard in found:
        for value in list(vars(guard).values()):
            if isinstance(value, (list, dict, set)):
                value.clear()
    return len(found)


def _slowed(clock):
    return lambda: clock() / SLOW


GUARDS = _silence_guards()
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("kbench_env") and callable(getattr(_mod, "_perf_counter", None)):
        _mod._perf_counter = _slowed(_mod._perf_counter)
_ns = time.perf_counter_ns
time.perf_counter = _slowed(time.perf_counter)
time.monotonic = _slowed(time.monotonic)
time.perf_counter_ns = lambda: int(_ns() / SLOW)


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return logsumexp_rows(x)

"""The GPU worker's account of where a timed block's set-up went (worker/gpu_executor.py: each step's CPU, context
switches and threads; the capture's slowest call), a diagnosis the trusted side keeps in its trace: that each figure
is what it says, on the CPU (the GPU path itself runs in tests/test_gpu.py)."""

from __future__ import annotations

import threading
import time

import pytest

from kbench_env.worker import gpu_executor


def test_usage_tells_cpu_spent_from_waiting():
    before = gpu_executor._usage()
    x = 0
    for i in range(2_000_000):  # CPU in this thread
        x += i
    busy = gpu_executor._usage()
    for _ in range(5):  # waits: each sleep gives the core up
        time.sleep(0.002)
    waited = gpu_executor._usage()
    assert busy[0] > before[0] and busy[1] >= busy[0] - before[0] + before[1] - 1e-3  # thread CPU in the process's
    assert waited[2] - busy[2] >= 5  # voluntary switches: one a sleep at least
    assert waited[0] - busy[0] < busy[0] - before[0]  # sleeping spends less CPU than the loop did
    assert waited[4] == threading.active_count()


def test_the_capture_calls_are_timed_and_the_slowest_found(monkeypatch):
    took = [0.0002, 0.0001, 0.030, 0.0004, 0.002, 0.0005]  # each call's seconds on a clock the test drives
    now = [0.0]
    calls = iter(took)

    def clock():
        return now[0]

    def model(k):
        now[0] += next(calls)
        if k is None:
            raise ZeroDivisionError("the model's own error")
        return k * 2

    monkeypatch.setattr(gpu_executor.stats, "_perf_counter", clock)
    seconds: list = []
    timed = gpu_executor._timed_calls(model, seconds)
    assert [timed(k) for k in range(5)] == [0, 2, 4, 6, 8]  # what the model returns, unchanged
    assert seconds == pytest.approx(took[:5])
    got = gpu_executor._slowest(seconds)
    assert got == {"n": 5, "max_ms": 30.0, "at": 2, "over_1ms": 2, "sum_ms": 32.7}
    assert gpu_executor._slowest([]) == {"n": 0}
    try:
        timed(None)
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the model's error was swallowed")
    assert seconds[-1] == pytest.approx(took[5])  # a call that raised is timed too

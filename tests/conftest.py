"""Shared test set-up: one build cache for the whole session (C++ builds cost 10-30 s each on a CI machine),
a GPU marker that skips where no GPU is present, and small helpers."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("KBENCH_CACHE", str(ROOT / ".kbench-cache"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def cpu_evaluator(rules: str = "strict"):
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    # Short timing keeps tests fast; correctness is what the tests look at.
    return Evaluator(device="cpu", limits=Limits(build_timeout=600, run_timeout=30, time_timeout=60),
                     timing={"warmup": 1, "min_reps": 3, "max_reps": 20, "min_seconds": 0.02}, rules=rules)


@pytest.fixture(scope="session")
def evaluator():
    return cpu_evaluator()


@pytest.fixture
def own_evaluator(evaluator):
    """``own_evaluator(limits, **options)``: a CPU evaluator of a test's own limits, sharing the session evaluator's
    build cache and timing, closed when the test ends (its workers and spares do not outlive the test that made
    them)."""
    from kbench_env.pipeline.evaluator import Evaluator

    made = []

    def make(limits, **options):
        options.setdefault("timing", evaluator.timing)
        made.append(Evaluator(device="cpu", cache_dir=evaluator.cache_dir, limits=limits, **options))
        return made[-1]

    yield make
    for ev in made:
        ev.close()


@pytest.fixture(scope="session")
def kernelbench_evaluator():
    """The test evaluator under rules="kernelbench" (PyTorch operators allowed beside an own kernel)."""
    return cpu_evaluator("kernelbench")


def read(path) -> str:
    return Path(path).read_text()


def hold_row(mode: str, a: float, b: float, thread: int = 1) -> dict:
    """A device-hold log line (machine/device_lock.log_hold) from second ``a`` to ``b``, for the bench readers'
    tests (bench/phase_sums.py, bench/hold_timeline.py)."""
    return {"lock": "gpu-x.lock", "mode": mode, "pid": 1, "thread": thread, "start_ns": int(a * 1e9),
            "end_ns": int(b * 1e9)}


class Hung(BaseException):
    """Raised by ``no_hang`` (a BaseException: the evaluator's own ``except Exception`` must not swallow it)."""


@contextlib.contextmanager
def no_hang(seconds: int):
    """Turn a hang into a test failure: SIGALRM after ``seconds`` raises ``Hung`` in the main thread (a blocking
    read is interrupted, and so is a long regular-expression match). A guard against never returning, far above
    any honest duration: not a timing assertion."""
    def alarm(signum, frame):
        raise Hung(f"still running after {seconds} s: it hangs")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

"""The server's admission control without a server: token, per-client and queue limits, and a timed-out request
whose evaluation keeps its place until it really ends."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kbench_env.pipeline.result import EvalResult
from kbench_env.serving.admission import Admission, Refused, ServerLimits, check_source, check_token
from kbench_env.serving.evaluations import Evaluations
from kbench_env.serving.metrics import Metrics


def test_token_is_required_and_compared():
    check_token("Bearer s3cret", "s3cret")
    for header, why in ((None, "missing"), ("", "missing"), ("Bearer nope", "wrong"), ("Basic s3cret", "wrong"),
                        ("Bearer s3cret2", "wrong")):
        with pytest.raises(Refused, match=why) as exc:
            check_token(header, "s3cret")
        assert exc.value.status == 401


def test_per_client_limit_and_bounded_queue():
    adm = Admission(ServerLimits(workers=1, queue=2, per_client=2, retry_after=7))
    adm.enter_client("a")
    adm.enter_client("a")
    with pytest.raises(Refused) as exc:
        adm.enter_client("a")
    assert exc.value.status == 429 and exc.value.headers == {"Retry-After": "7"}
    adm.enter_client("b")  # another client is not held back by a's requests
    adm.leave_client("a")
    adm.enter_client("a")
    adm.take(2)
    with pytest.raises(Refused) as exc:
        adm.take(2)
    assert exc.value.status == 429 and "queue is full" in exc.value.message
    with pytest.raises(Refused) as exc:
        adm.take(4)  # never fits: 413, not a retry
    assert exc.value.status == 413
    adm.take(1)
    assert adm.admitted == 3 and adm.queued == 3


def test_source_limit():
    limits = ServerLimits(max_source_chars=10)
    assert check_source("x" * 10, limits) == "x" * 10
    assert check_source(123, limits) == 123  # the evaluator answers a non-string with "invalid", as in-process
    with pytest.raises(Refused, match="--max-source-chars") as exc:
        check_source("x" * 11, limits)
    assert exc.value.status == 413


class _Blocked:
    """An executor whose evaluation ends when the test says so."""

    def __init__(self):
        self.release = threading.Event()

    def evaluate(self, task, source, seed):
        self.release.wait(60)
        return EvalResult(task="t", backend="cpu", device="cpu", correct=True, reward=1.0)

    def close(self):
        pass


class _Task:
    name = "t"


def test_a_timed_out_request_keeps_its_place_until_the_evaluation_ends():
    executor = _Blocked()
    adm = Admission(ServerLimits(workers=1, queue=0, request_timeout=0.2))
    evals = Evaluations(executor, adm, Metrics())

    async def run():
        with pytest.raises(Refused) as exc:
            await evals.run(_Task(), "src", 0)
        assert exc.value.status == 504 and "--request-timeout" in exc.value.message
        assert adm.admitted == 1  # still running: the bound holds
        with pytest.raises(Refused) as full:
            adm.take(1)
        assert full.value.status == 429

    asyncio.run(run())
    executor.release.set()
    evals.close()  # waits for the evaluation
    assert adm.admitted == 0 and adm.running == 0
    assert evals.metrics.evaluations == 1 and evals.metrics.errors["request_timeout"] == 1

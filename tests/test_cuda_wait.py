"""worker/cuda_wait.py: a GPU worker's untimed waits asleep, its timed requests spinning, and nothing changed where
the driver cannot switch (a stand-in driver: this machine has no GPU)."""

import pytest

from kbench_env.protocol import messages as msg
from kbench_env.sandbox.job import worker_job
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.worker import cuda_wait


class Driver:
    """cuCtxGetFlags and cuCtxSetFlags as the driver has them: the context's flags start as ``flags``; each set
    recorded (its scheduling bits), answering ``codes`` in turn (then 0)."""

    def __init__(self, codes=(), flags=0):
        self.calls, self._codes, self.flags = [], list(codes), flags

    def cuCtxGetFlags(self, out):  # noqa: N802 - the driver's name
        out._obj.value = self.flags
        return 0

    def cuCtxSetFlags(self, flags):  # noqa: N802
        code = self._codes.pop(0) if self._codes else 0
        self.calls.append(flags & cuda_wait.CU_CTX_SCHED_MASK)
        if code == 0:
            self.flags = flags
        return code


SPIN, BLOCK = cuda_wait.CU_CTX_SCHED_SPIN, cuda_wait.CU_CTX_SCHED_BLOCKING_SYNC
AUTO = 0  # CU_CTX_SCHED_AUTO: CUDA's own choice, how torch starts a context (spinning on a host of more cores)


@pytest.fixture(autouse=True)
def _fresh():
    yield
    cuda_wait.start(False)  # (module state: no later test sees a stand-in driver)


def test_a_worker_waits_asleep_once_started_and_spins_only_for_the_requests_that_time():
    d = Driver(flags=SPIN)
    assert cuda_wait.start(True, d) == "blocking"
    assert d.calls == [BLOCK, SPIN, BLOCK]  # both ways tried before it is relied on
    d.calls.clear()
    for kind in (msg.RUN, msg.GPU_SLOTS):
        with cuda_wait.during(kind):
            assert d.calls == []
    for kind in (msg.GPU_BLOCK, msg.WALLCLOCK, msg.CALIBRATE):
        with cuda_wait.during(kind):
            assert d.calls[-1] == SPIN
        assert d.calls[-1] == BLOCK
    assert d.calls == [SPIN, BLOCK] * 3


def test_a_timed_request_waits_as_the_context_was_started_and_a_failed_one_leaves_it_asleep_again():
    d = Driver(flags=AUTO)
    cuda_wait.start(True, d)
    d.calls.clear()
    with pytest.raises(ValueError), cuda_wait.during(msg.GPU_BLOCK):
        assert d.flags == AUTO
        raise ValueError("the candidate failed")
    assert d.calls == [AUTO, BLOCK]


def test_a_timed_request_is_refused_rather_than_timed_asleep_when_the_context_cannot_spin():
    d = Driver()
    cuda_wait.start(True, d)
    d._codes = [201]  # CUDA_ERROR_INVALID_CONTEXT: the candidate's code broke its context
    ran = []
    with pytest.raises(RuntimeError, match="could not be made to spin"), cuda_wait.during(msg.GPU_BLOCK):
        ran.append(True)
    assert ran == []


@pytest.mark.parametrize("codes, why", [([1], "returned 1"), ([0, 3], "switching back"), ([0, 0, 3], "switching back")])
def test_a_driver_that_cannot_switch_both_ways_leaves_every_request_as_cuda_has_it(codes, why):
    d = Driver(codes, flags=AUTO)
    said = cuda_wait.start(True, d)
    assert said.startswith("unavailable") and why in said
    assert d.flags == AUTO  # left as it was started
    d.calls.clear()
    with cuda_wait.during(msg.GPU_BLOCK):
        pass
    assert d.calls == []


def test_the_contexts_other_flags_are_kept():
    d = Driver(flags=0x10 | cuda_wait.CU_CTX_SCHED_SPIN)  # CU_CTX_LMEM_RESIZE_TO_MAX, set by someone before
    cuda_wait.start(True, d)
    assert d.flags == 0x10 | BLOCK
    with cuda_wait.during(msg.WALLCLOCK):
        assert d.flags == 0x10 | SPIN
    assert d.flags == 0x10 | BLOCK


def test_off_or_without_a_driver_nothing_is_switched():
    d = Driver()
    assert cuda_wait.start(False, d) == "off" and d.calls == []
    assert cuda_wait.start(True, object()).startswith("unavailable")  # a library without cuCtxSetFlags
    with cuda_wait.during(msg.GPU_BLOCK):
        pass


def test_the_setting_reaches_the_worker_in_its_job(monkeypatch):
    def job():
        return worker_job(Limits(), None, "cuda", "cuda", "/tmp", "/tmp", True, None, None)

    monkeypatch.delenv("KBENCH_WORKER_BLOCKING_SYNC", raising=False)
    assert job()["blocking_sync"] is True
    monkeypatch.setenv("KBENCH_WORKER_BLOCKING_SYNC", "0")
    assert job()["blocking_sync"] is False

"""While this process holds a device alone, its interpreter's switch interval is short (machine/interpreter.py), so
that a timing's calls that let the interpreter go get it back without waiting out another thread's 5 ms; shared
holds leave it alone, overlapping exclusive holds of two devices restore it only when the last ends, and
KBENCH_TIMING_SWITCH_US=0 turns it off. (What the interval costs a timed block: bench/probes/gil_exchange.py.)"""

from __future__ import annotations

import sys

import pytest

from kbench_env.machine.device_lock import DeviceLock
from kbench_env.machine.shared_device_lock import SharedDeviceLock


@pytest.fixture
def python_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(old)


def test_an_exclusive_hold_shortens_the_interval_and_its_end_restores_it(tmp_path, python_interval):
    lock = DeviceLock(str(tmp_path / "gpu-a.lock"))
    with lock:
        assert sys.getswitchinterval() == pytest.approx(0.0002)
    assert sys.getswitchinterval() == pytest.approx(python_interval)


def test_overlapping_holds_of_two_devices_restore_it_when_the_last_ends(tmp_path, python_interval):
    a, b = DeviceLock(str(tmp_path / "gpu-a.lock")), SharedDeviceLock(str(tmp_path / "gpu-b.lock"))
    a.acquire()
    assert b.acquire()  # exclusive
    a.release()
    assert sys.getswitchinterval() == pytest.approx(0.0002)  # b still times
    b.release()
    assert sys.getswitchinterval() == pytest.approx(python_interval)


def test_shared_holds_leave_it_and_an_idle_hold_shortens_it(tmp_path, python_interval):
    lock = SharedDeviceLock(str(tmp_path / "gpu-c.lock"))
    assert lock.acquire(shared=True)
    assert sys.getswitchinterval() == pytest.approx(python_interval)  # checks beside each other: not timed
    lock.release()
    assert lock.acquire_idle(5.0)
    assert sys.getswitchinterval() == pytest.approx(0.0002)
    lock.release()
    assert sys.getswitchinterval() == pytest.approx(python_interval)


def test_it_can_be_turned_off(tmp_path, python_interval, monkeypatch):
    monkeypatch.setenv("KBENCH_TIMING_SWITCH_US", "0")
    with DeviceLock(str(tmp_path / "gpu-d.lock")):
        assert sys.getswitchinterval() == pytest.approx(python_interval)
    assert sys.getswitchinterval() == pytest.approx(python_interval)

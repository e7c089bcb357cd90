"""The freezer race of issue #34: a candidate's helper process that runs while the trusted side has the worker
stopped (to write a timed block's inputs and read its outputs), watching the input slots and computing ahead of
the clock. The trusted side used to read the worker's cgroup pid list and stop each pid in turn; a ``CLONE_VM``
helper in a process group of its own that changes pid every few tens of microseconds was never in the list when
the stop reached it (111 of 174 stops escaped in the issue's run).

The helper (tests/data/attacks/freezer_race_helper.cpp) increments a counter and answers an input word the test
writes while the worker is stopped. Each test asserts on that mechanism, not on a speed: the counter does not move
and the input is not answered while the worker is stopped (``_escapes`` counts the stops in which either did), or
the system calls the helper needs are refused (EPERM reported by the candidate). Before the change (the pid-list
stop, no seccomp rule), the CLONE_VM helper escaped in most stops and its clone and setpgid succeeded.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import time

import pytest

from conftest import ROOT, no_hang, read
from kbench_env.sandbox.confine.cgroup import PidsCgroup
from kbench_env.sandbox.confine.freeze_group import FreezeGroup
from kbench_env.sandbox.memory import MemoryError_
from kbench_env.sandbox.worker_process import Worker

HELPER_CPP = read(ROOT / "tests" / "data" / "attacks" / "freezer_race_helper.cpp")
#: Stops per test: each one is a chance for the helper to run; one escape is a failure.
STOPS = 40
#: How long each stop lasts (the helper, if it runs, does thousands of steps in this time).
STOP_S = 0.005

_CANDIDATE = '''
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = {cpp!r}
load_inline(name="kb_freezer_race", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True)
_info = torch.ops.kb_freezer_race.start({mode}).tolist()
with open("helper.txt", "w") as f:
    f.write(" ".join(str(int(v)) for v in _info))


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

has_cgroup = PidsCgroup.base() is not None


def _candidate(mode: int) -> str:
    return _CANDIDATE.format(cpp=HELPER_CPP, mode=mode)


@pytest.fixture(scope="module")
def ev(evaluator):
    return evaluator


def _start(ev, mode: int, off: tuple):
    limits = dataclasses.replace(ev.limits, isolation_off=off)
    w = Worker(_candidate(mode), "cpu", "cpu", ev.build_root, limits, builder=ev.builder)
    try:
        header, _ = w.recv(600, "build and load")
        assert header["type"] == "loaded", header.get("message")
        with open(os.path.join(w.scratch, "helper.txt")) as f:
            address, clone_errno, sigcont_errno = (int(v) for v in f.read().split())
    except BaseException:
        w.close()
        raise
    return w, address, clone_errno, sigcont_errno


def _word(mem, address: int, i: int) -> int:
    return int.from_bytes(mem.read(address + 8 * i, 8), "little", signed=True)


def _escapes(w, address: int) -> int:
    """Stop the worker ``STOPS`` times; the number of stops in which the helper's counter moved or it answered
    the input written while stopped."""
    freezer, mem = w.hands()
    escaped = 0
    for k in range(STOPS):
        freezer.freeze()
        try:
            value = 1000 + k
            before = _word(mem, address, 0)
            mem.write(address + 8, value.to_bytes(8, "little"))
            time.sleep(STOP_S)
            if _word(mem, address, 0) != before or _word(mem, address, 2) == value * 3 + 1:
                escaped += 1
        finally:
            freezer.thaw()
        time.sleep(0.001)
    return escaped


def _runs_when_thawed(w, address: int, seconds: float = 30.0) -> bool:
    """Whether the helper is alive: its counter moves while the worker runs."""
    _, mem = w.hands()
    before, deadline = _word(mem, address, 0), time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
        if _word(mem, address, 0) != before:
            return True
    return False


@pytest.mark.parametrize("off", [(), ("cgroup",)], ids=["cgroup", "no-cgroup"])
def test_a_clone_vm_helper_is_refused(ev, off):
    """The issue's helper: clone(CLONE_VM) without CLONE_THREAD fails with EPERM in the sandbox (seccomp, with or
    without a cgroup), so no process shares the worker's memory outside its thread group; and kill(SIGCONT),
    which resumes a process stopped by signal, is refused too."""
    with no_hang(900):
        w, address, clone_errno, sigcont_errno = _start(ev, 0, off)
        try:
            assert clone_errno == errno.EPERM, f"clone(CLONE_VM) without CLONE_THREAD returned errno {clone_errno}"
            assert sigcont_errno == errno.EPERM, f"kill(SIGCONT) returned errno {sigcont_errno}"
            assert _escapes(w, address) == 0
            _, mem = w.hands()
            assert _word(mem, address, 3) == 0  # no generation of the helper ever ran
        finally:
            w.close()


def _freezer_mounts() -> dict:
    """{version: mount point} of the hierarchies a freezer cgroup can be made in here."""
    found = {}
    with open("/proc/self/mountinfo") as f:
        for m in (line.split() for line in f):
            sep = m.index("-")
            if m[sep + 1] == "cgroup2":
                found.setdefault(2, m[4])
            elif m[sep + 1] == "cgroup" and "freezer" in m[sep + 3].split(","):
                found.setdefault(1, m[4])
    return found


@pytest.mark.skipif(not has_cgroup, reason="needs a cgroup (kbench as root)")
@pytest.mark.parametrize("version", [2, 1], ids=["cgroup-v2", "cgroup-v1"])
def test_a_pid_hopping_helper_does_not_run_while_the_worker_is_frozen(ev, version, monkeypatch):
    """With the seccomp layer off, the CLONE_VM helper runs and hops pids in a process group of its own; the
    worker's cgroup is frozen as one (cgroup.freeze, or the v1 freezer), so it stops with the worker every time."""
    mount = _freezer_mounts().get(version)
    if mount is None:
        pytest.skip(f"no cgroup v{version} freezer on this machine")
    if FreezeGroup.base() is None or FreezeGroup.base()[1] != version:
        path = os.path.join(mount, "kbench")
        os.makedirs(path, exist_ok=True)
        monkeypatch.setattr(FreezeGroup, "_base", (path, version))
        monkeypatch.setattr(FreezeGroup, "_detected", True)
    with no_hang(900):
        w, address, clone_errno, _ = _start(ev, 0, ("seccomp",))
        try:
            assert clone_errno == 0
            assert _runs_when_thawed(w, address), "the helper never ran: the test shows nothing"
            assert _escapes(w, address) == 0
            assert w.hands()[0].group.version == version  # (the freezer this test meant to try)
            _, mem = w.hands()
            assert _word(mem, address, 4) == 0, "the helper did not leave the worker's process group"
            assert _word(mem, address, 3) > STOPS, "the helper did not change pid"
        finally:
            w.close()


@pytest.mark.parametrize("off", [(), ("cgroup",)], ids=["cgroup", "no-cgroup"])
def test_a_forked_helper_sharing_memory_stays_stopped(ev, off):
    """A plain child sharing a MAP_SHARED page with the worker (no CLONE_VM): setpgid is refused, so it stays in
    the worker's process group, and with or without a cgroup it is stopped with the worker every time."""
    if not off and not has_cgroup:
        pytest.skip("needs a cgroup (kbench as root)")
    with no_hang(900):
        w, address, clone_errno, _ = _start(ev, 1, off)
        try:
            assert clone_errno == 0
            assert _runs_when_thawed(w, address), "the helper never ran: the test shows nothing"
            _, mem = w.hands()
            assert _word(mem, address, 4) == errno.EPERM, f"setpgid returned errno {_word(mem, address, 4)}"
            assert _escapes(w, address) == 0
        finally:
            w.close()


def test_a_worker_that_cannot_be_stopped_fails_within_the_deadline(monkeypatch):
    """The stop has a deadline: a process that never stops makes the freeze fail (the evaluation with it)
    instead of waiting for ever."""
    import subprocess
    import sys

    from kbench_env.sandbox import memory

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        monkeypatch.setattr(memory, "FREEZE_TIMEOUT_S", 0.2)
        freezer = memory.Freezer(proc.pid)
        monkeypatch.setattr(memory, "_thread_states", lambda pid: ["R"])  # as a thread that never stops
        with pytest.raises(MemoryError_, match="did not stop"):
            freezer.freeze()
        freezer.thaw()
    finally:
        proc.kill()
        proc.wait(timeout=10)


# ---------------------------------------------------------------------- the filter, and the clock's end


_FILTER_PROBE = r'''
import ctypes, errno, json, os, signal, subprocess, sys, threading
from kbench_env.sandbox.confine import seccomp
act, miss = {}, {}
seccomp.install(act, miss, signal_stop=True)
out = {"miss": miss}
def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
libc = ctypes.CDLL(None, use_errno=True)
def raw(name, *args):
    r = libc.syscall(*args)
    out[name] = errno.errorcode.get(ctypes.get_errno()) if r == -1 else "allowed"
attempt("thread", lambda: (lambda t: (t.start(), t.join()))(threading.Thread(target=lambda: None)))
attempt("subprocess", lambda: subprocess.run(["true"], check=True))
attempt("posix_spawn", lambda: os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0))
attempt("setpgid", lambda: os.setpgid(0, 0))
attempt("kill_sigcont", lambda: os.kill(os.getpid(), signal.SIGCONT))
attempt("tgkill_sigcont", lambda: signal.pthread_kill(threading.get_ident(), signal.SIGCONT))
attempt("kill_0", lambda: os.kill(os.getpid(), 0))
if os.uname().machine == "x86_64":
    raw("timer_create", 222, 1, None, ctypes.byref(ctypes.c_long()))
    raw("io_setup", 206, 8, ctypes.byref(ctypes.c_ulong(0)))
    raw("fcntl_setsig_cont", 72, 0, 10, signal.SIGCONT)
    raw("fcntl_setsig_usr1", 72, 0, 10, signal.SIGUSR1)
    raw("clone_exit_sigcont", 56, signal.SIGCONT, 0, 0, 0, 0)
print(json.dumps(out))
'''


def test_the_filter_refuses_what_undoes_a_stop_and_keeps_what_processes_need():
    """The seccomp filter (applied here in a fresh process): setpgid, SIGCONT by any call that names it, Linux
    AIO, and (where the stop is by signal) timer_create are refused; threads, fork and exec (subprocess's vfork,
    posix_spawn's CLONE_VM|CLONE_VFORK) and other signals still work."""
    import json
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _FILTER_PROBE], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out.pop("miss") == {}
    expected = {"thread": "allowed", "subprocess": "allowed", "posix_spawn": "allowed", "setpgid": "EPERM",
                "kill_sigcont": "EPERM", "tgkill_sigcont": "EPERM", "kill_0": "allowed"}
    if os.uname().machine == "x86_64":
        expected.update(timer_create="EPERM", io_setup="EPERM", fcntl_setsig_cont="EPERM",
                        fcntl_setsig_usr1="allowed", clone_exit_sigcont="EPERM")
    assert out == expected


class _SlowToStop:
    """A worker whose stop is confirmed only ``seconds`` after DONE (as a thread still in a system call, or still
    running on another core, holds a freeze off); its timed blocks answer at once."""

    def __init__(self, seconds: float):
        self.seconds, self.last, self.frozen = seconds, None, False

    def hands(self):
        return self, self

    def freeze(self):
        if self.last == "block":
            time.sleep(self.seconds)
        self.frozen = True

    def settle(self):  # (stopped is off its CPU here)
        pass

    def thaw(self):
        self.frozen = False

    def write(self, address, data):
        pass

    def unshare(self):  # (its buffers are on no memfd: every write goes to write)
        pass

    def send(self, header):
        self.last = header["type"]
        self.count = header.get("count") or header.get("calls")

    def recv(self, timeout, what):
        if self.last == "slots":
            return {"type": "buffers", "addresses": [[0]] * self.count}, None
        if self.last == "block":
            return {"type": "done", "layout": [], "table": [[] for _ in range(self.count)]}, None
        return {"type": "released"}, None


def test_a_blocks_clock_stops_once_the_worker_is_stopped_not_at_its_done():
    """Work after DONE: whatever still runs between the worker's DONE and the confirmation that every task of it
    is stopped is the block's work, so the clock runs until the confirmation (it used to stop at DONE)."""
    import torch

    from kbench_env.pipeline import blocks

    delay = 0.05
    bt = blocks.time_blocks(_SlowToStop(delay), "c", [torch.ones(4)], 0.01,
                            {"warmup": 1, "min_reps": 1, "max_reps": 3, "min_seconds": 0.0, "min_blocks": 3},
                            timeout=10)
    assert bt.timing is not None and bt.blocks == 3
    assert min(bt.timing.times_ms) >= delay * 1e3  # each block's one call waited for its stop

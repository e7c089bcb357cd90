"""The torch.compile baseline timed off the candidates' path (pipeline/compile_later.py): when it is on, that a
task's compiled reference waits for a device nobody's candidate holds, is timed once per configuration, kept in
memory and on disk apart from the eager timings, and found by the next candidate and the next process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, cpu_evaluator
from kbench_env.config import EvaluatorConfig
from kbench_env.machine.shared_device_lock import SharedDeviceLock
from kbench_env.pipeline import compile_later
from kbench_env.pipeline.compile_later import CompileLater
from kbench_env.pipeline.evaluator import resolve
from kbench_env.sandbox import idle_start
from kbench_env.tasks.suite import resolve_task

DEADLINE_S = 600.0  # (a deadline for the thread's work, never a figure asserted)


def _wait_for(predicate, what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout:.0f} s: {what}")
        time.sleep(0.05)


def test_settings_decide_where_the_compiled_reference_is_timed(monkeypatch):
    monkeypatch.delenv("KBENCH_COMPILE_LATER", raising=False)
    monkeypatch.delenv("KBENCH_COMPILE_BASELINE", raising=False)

    def later(device="cpu", **options):
        return resolve(EvaluatorConfig.from_options(device=device, **options)).timing.compile_later

    assert later() is False  # the CPU's default: no compile baseline at all
    assert later(compile_baseline=True) is False  # asked for with the eager one, as before
    assert later(compile_baseline=True, compile_later=True) is True
    assert later(compile_later=True) is False  # nothing to time later without the compile baseline
    assert later(baseline="compile", compile_later=True) is False  # the reward needs it with each candidate
    assert later("cuda") is True  # a GPU's default, its checks shared
    assert later("cuda", shared_checks=False) is False  # its lock then has no idle hold to time it under
    assert later("cuda", baseline="compile") is False and later("cuda", compile_baseline=False) is False
    monkeypatch.setenv("KBENCH_COMPILE_LATER", "0")  # the variable sets a config made without the option
    assert later("cuda") is False and later("cuda", compile_later=True) is True


class _Disk:
    def __init__(self):
        self.stored: dict = {}

    def get(self, fields):
        return self.stored.get(repr(sorted(fields.items())))

    def put(self, fields, times):
        self.stored[repr(sorted(fields.items()))] = times


class _Worker:
    def __init__(self):
        self.proc, self.closed, self.killed, self.trace = None, False, False, None

    def close(self):
        self.closed = True

    def kill(self):
        self.killed = True


class _Base:
    """What CompileLater uses of Baselines, with runs and timings that only record what was asked."""

    device = "cpu"

    def __init__(self, fail: bool = False):
        self.disk, self.fail = _Disk(), fail
        self.workers, self.runs, self.timings = [], [], []
        self.run_started = threading.Event()

    def key(self, task, cfg):
        return (task.name, cfg.name)

    def disk_fields(self, task, cfg):
        return {"task": task.name, "config": cfg.name}

    def _loaded_worker(self, task, compile_warm=False, started=None):
        assert compile_warm  # (its worker imports torch.compile's modules as it starts)
        self.workers.append(_Worker())
        if started is not None:
            started(self.workers[-1])
        return self.workers[-1]

    def _run_reference(self, w, task, cfg, prepared, label, compiled, hold=None):
        self.run_started.set()
        if self.fail:
            raise RuntimeError("the reference of the task failed (run): boom")
        self.runs.append((cfg.name, label, compiled))

    def _time_reference(self, w, task, cfg, prepared, ran, labels=None, detail=None):
        assert labels == [("compile", True)] and ran == {f"{cfg.name}#compile"}
        self.timings.append(cfg.name)
        # what a GPU timing reports of itself: its detail, and the worker's steps of the set-up in its trace
        detail["compile"] = {"set_up_s": 0.25, "block": 64, "method": "cuda-graph", "blocks": 3}
        w.trace.append({"recv": "timed block set-up", "steps_ms": {"capture": float(len(self.timings))},
                        "steps_usage": {"capture": [1.0, 2.0, 3, 0, 4]}})
        return {"compile_ms": 1.5 + len(self.timings)}


@pytest.fixture
def relu():
    task = resolve_task("level1/relu")
    return task, task.require_configs("cpu")


def test_compiled_reference_waits_for_the_candidates_hold_then_is_timed_once_and_stored(relu):
    task, configs = relu
    base, lock = _Base(), SharedDeviceLock(None)
    later = CompileLater(base, lock)
    try:
        lock.acquire()  # a candidate's stage holds the device alone
        assert later.times(task, configs) == {}  # nothing known: queued
        later.want(task, configs)  # queued already: not twice
        # The thread's run waits for a shared hold, which the candidate's exclusive one keeps out.
        assert not base.run_started.wait(1.0)
        assert base.runs == [] and base.timings == []
        lock.release()
        _wait_for(lambda: later.timed == len(configs), "the compiled reference timed")
        assert [r[0] for r in base.runs] == [c.name for c in configs]  # once each, compiled
        assert all(label == "compile" and compiled for _, label, compiled in base.runs)
        assert base.timings == [c.name for c in configs]
        # each configuration's diagnosis: where its time went, the timing's own account and the worker's set-up
        assert [(e["task"], e["config"]) for e in later.log] == [(task.name, c.name) for c in configs]
        assert [e["steps_ms"] for e in later.log] == [{"capture": float(i + 1)} for i in range(len(configs))]
        assert all(e["steps_usage"] == {"capture": [1.0, 2.0, 3, 0, 4]} for e in later.log)
        assert all(e["block"] == 64 and e["blocks"] == 3 and e["method"] == "cuda-graph" for e in later.log)
        assert all(isinstance(e[k], float) for e in later.log for k in ("run_s", "idle_wait_s", "hold_s"))
        got = later.times(task, configs)
        assert sorted(got) == sorted(c.name for c in configs)
        assert all(isinstance(v["compile_ms"], float) for v in got.values())
        # On disk apart from the eager entries (their fields, labelled), for the next process.
        assert all(base.disk.get({**base.disk_fields(task, c), "label": "compile"}) == got[c.name] for c in configs)
        assert all(base.disk.get(base.disk_fields(task, c)) is None for c in configs)
        fresh = CompileLater(base, lock)
        assert fresh.times(task, configs) == got and fresh.timed == 0
        fresh.close()
        _wait_for(lambda: all(w.closed for w in base.workers), "the reference worker closed")
    finally:
        later.close()


def test_a_failing_compiled_reference_is_reported_and_asked_for_again(relu):
    task, configs = relu
    base, lock = _Base(fail=True), SharedDeviceLock(None)
    later = CompileLater(base, lock)
    try:
        assert later.times(task, configs) == {}
        _wait_for(lambda: later.failed == 1, "the failure counted")
        assert "boom" in later.errors[-1] and base.workers[-1].closed
        _wait_for(lambda: not later._queued, "the task left the queue")
        base.fail = False
        later.want(task, configs)  # the next candidate asks again
        _wait_for(lambda: later.timed == len(configs), "timed on the second ask")
    finally:
        later.close()


def test_a_timing_that_never_gets_an_idle_device_leaves_the_task_for_later(relu, monkeypatch):
    task, configs = relu
    monkeypatch.setattr(compile_later, "IDLE_WAIT_S", 0.2)
    base, lock = _Base(), SharedDeviceLock(None)
    later = CompileLater(base, lock)
    try:
        hold_shared = threading.Event()
        real_run = base._run_reference

        def run_then_busy(*args, **kwargs):  # a candidate's check takes the device as soon as the run ends
            real_run(*args, **kwargs)
            if not hold_shared.is_set():
                threading.Thread(target=lambda: lock.acquire(shared=True), daemon=True).start()
                _wait_for(lambda: lock._shared >= 1, "the candidate's shared hold", 30)
                hold_shared.set()

        base._run_reference = run_then_busy
        later.times(task, configs)
        _wait_for(lambda: later.left == 1, "the task left")
        assert later.timed == 0 and base.timings == []
        assert later.times(task, configs) == {}
    finally:
        later.close()


def test_close_ends_the_worker_in_use_and_the_thread(relu):
    task, configs = relu
    base, lock = _Base(), SharedDeviceLock(None)
    later = CompileLater(base, lock)
    lock.acquire()  # the run waits for the device, with its worker loaded
    later.times(task, configs)
    _wait_for(lambda: base.workers, "the worker loaded")
    later.close()
    assert base.workers[-1].closed and not later._thread.is_alive()
    lock.release()
    later.want(task, configs)  # closed: nothing queued any more
    assert not later._queue


def test_a_compile_runs_behind_the_builds_and_its_worker_comes_back_for_the_timing():
    if not idle_start.may_raise():
        pytest.skip("needs CAP_SYS_NICE to raise a process again (compile_later then leaves its priority alone)")
    code = "import threading, time; threading.Thread(target=time.sleep, args=(30,)).start(); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        _wait_for(lambda: len(os.listdir(f"/proc/{p.pid}/task")) == 2, "the second thread", 30)
        tids = [int(t) for t in os.listdir(f"/proc/{p.pid}/task")]

        def nices():
            return [os.getpriority(os.PRIO_PROCESS, t) for t in tids]

        compile_later._renice(p.pid, compile_later.COMPILE_NICE)
        assert nices() == [19, 19]
        compile_later._renice(p.pid, 0)
        assert nices() == [0, 0]
    finally:
        p.kill()
        p.wait(30)


@pytest.mark.slow
def test_a_cpu_evaluator_times_the_compiled_reference_after_its_candidate_and_the_next_process_has_it(tmp_path,
                                                                                                       monkeypatch):
    from kbench_env.pipeline.evaluator import Evaluator

    monkeypatch.setenv("KBENCH_REFERENCE_TOLERANCE", "100")  # the drift check is not what this test looks at
    like = cpu_evaluator()
    like.close()
    task = resolve_task("level1/relu")
    source = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()

    def evaluator():
        return Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False,
                         reference_cache=tmp_path, compile_baseline=True, compile_later=True)

    ev = evaluator()
    try:
        r = ev.evaluate(task, source, seed=3)
        assert r.correct and r.speedup is not None, r.error
        assert r.speedup_compile is None and all(c.compile_ms is None for c in r.configs)  # not known yet
        n = len(r.configs)
        _wait_for(lambda: ev.baselines.later.timed == n or ev.baselines.later.failed, "the compiled reference")
        assert ev.baselines.later.failed == 0, list(ev.baselines.later.errors)
        again = ev.evaluate(task, source, seed=4)
        assert again.correct and again.speedup_compile is not None, again.error
        assert all(c.compile_ms and c.compile_ms > 0 for c in again.configs)
        assert ev.baselines.timed == n  # the eager reference timed once, the compiled one apart
    finally:
        ev.close()
    ev = evaluator()  # another process's evaluator: both references from the disk, nothing timed
    try:
        r = ev.evaluate(task, source, seed=5)
        assert r.correct and r.speedup_compile is not None, r.error
        assert ev.baselines.timed == 0 and ev.baselines.later.timed == 0
        assert [c.compile_ms for c in r.configs] == [c.compile_ms for c in again.configs]
    finally:
        ev.close()


def test_time_now_waits_for_the_thread_and_times_nothing_twice(relu):
    task, configs = relu
    base, lock = _Base(), SharedDeviceLock(None)
    later = CompileLater(base, lock)
    try:
        lock.acquire()  # as `kbench baseline` holds the device while the eager reference is timed
        later.times(task, configs)  # (which queues the compiled one for the thread)
        _wait_for(lambda: base.workers, "the thread's worker loaded")
        lock.release()
        later.time_now(task, configs)
        assert base.timings == [c.name for c in configs] and later.timed == len(configs)
        assert len(base.workers) == 1  # time_now found them timed
    finally:
        later.close()


class _NicesBase(_Base):
    """Baselines whose worker is a real process: the worker's niceness read at each step, and its compile let the
    device go as compile_gate's messages make a GPU evaluator's ``_run_reference`` do."""

    def __init__(self, pid: int, lock):
        super().__init__()
        self.pid, self.lock, self.seen = pid, lock, []

    def nice(self) -> int:
        return os.getpriority(os.PRIO_PROCESS, self.pid)

    def _loaded_worker(self, task, compile_warm=False, started=None):
        w = _Worker()
        w.proc = type("P", (), {"pid": self.pid})()
        self.workers.append(w)
        started(w)
        self.seen.append(("load", self.nice()))
        return w

    def _run_reference(self, w, task, cfg, prepared, label, compiled, hold=None):
        self.seen.append(("trace", self.nice()))  # under the shared hold: dynamo's trace
        hold.release()  # READY compiling
        free = self.lock.acquire(blocking=False)  # the device is let go: a candidate's timing may take it
        if free:
            self.lock.release()
        self.seen.append(("compile", self.nice(), free))
        hold.acquire()  # READY compiled, GO
        self.seen.append(("compiled run", self.nice()))
        self.runs.append((cfg.name, label, compiled))


def test_the_worker_is_behind_the_builds_exactly_while_it_holds_nothing(relu):
    if not idle_start.may_raise():
        pytest.skip("needs CAP_SYS_NICE to raise a process again (compile_later then leaves its priority alone)")
    task, configs = relu
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        own = os.getpriority(os.PRIO_PROCESS, p.pid)
        lock = SharedDeviceLock(None)
        base = _NicesBase(p.pid, lock)
        orig = base._time_reference

        def timed(w, *args, **kwargs):
            base.seen.append(("timing", base.nice()))
            return orig(w, *args, **kwargs)

        base._time_reference = timed
        later = CompileLater(base, lock)
        later._gated = True  # (as on a GPU: the hold is handed to the run, whose compile lets it go)
        try:
            later.times(task, configs)
            _wait_for(lambda: later.timed == len(configs), "the compiled reference timed")
            _wait_for(lambda: base.workers[-1].closed, "the worker closed")
        finally:
            later.close()
        low = compile_later.COMPILE_NICE
        per_config = [("trace", own), ("compile", low, True), ("compiled run", own), ("timing", own)]
        assert base.seen == [("load", low)] + per_config * len(configs)
        assert base.nice() == low  # (after the last timing, holding nothing)
    finally:
        p.kill()
        p.wait(30)


class _SlowBase(_Base):
    """Baselines whose first ``slow`` timings hold the device until their worker is killed (the timing in it then
    fails, as one in a worker a give-way ends does) or ``finish`` is set; ``started``: how many began."""

    def __init__(self, slow: int):
        super().__init__()
        self.slow, self.started, self.finish = slow, 0, threading.Event()

    def _time_reference(self, w, task, cfg, prepared, ran, labels=None, detail=None):
        self.started += 1
        if self.started <= self.slow:
            _wait_for(lambda: w.killed or self.finish.is_set(), "the worker killed or the timing let end", 60)
            if w.killed:
                raise RuntimeError("the worker ended during the timing")
        return super()._time_reference(w, task, cfg, prepared, ran, labels, detail)


def _gpu_later(base, lock) -> CompileLater:
    later = CompileLater(base, lock)
    later._gated = True  # (as on a GPU, where a timing gives way)
    return later


def _a_candidates_timing_waits(lock) -> threading.Thread:
    t = threading.Thread(target=lambda: (lock.acquire(), lock.release()), daemon=True)
    t.start()
    return t


def test_a_long_gpu_timing_gives_way_to_a_waiting_candidate_and_is_asked_for_again(relu, monkeypatch):
    task, configs = relu
    monkeypatch.setattr(compile_later, "GIVE_WAY_S", 0.1)
    base, lock = _SlowBase(slow=1), SharedDeviceLock(None)
    later = _gpu_later(base, lock)
    try:
        later.times(task, configs)
        _wait_for(lambda: base.started == 1, "the first configuration's timing holding the device alone")
        candidate = _a_candidates_timing_waits(lock)
        candidate.join(60)
        assert not candidate.is_alive()  # it had the device: the compiled reference's timing gave way
        assert later.gave_way == 1 and later.timed == 0 and later.failed == 0
        assert base.workers[0].killed and base.workers[0].closed and base.timings == []
        assert later.log[-1]["config"] == configs[0].name and later.log[-1]["gave_way"] is True
        assert later.log[-1]["gave_way_after_s"] >= compile_later.GIVE_WAY_S  # (never before its hold's threshold)
        _wait_for(lambda: not later._queued, "the task left the queue")
        assert later.times(task, configs) == {}  # nothing known: the next candidate asks again
        _wait_for(lambda: later.timed == len(configs), "timed on the next ask, nobody waiting")
        assert [e["gave_way"] for e in later.log] == [True] + [False] * len(configs)
        assert [e["gave_way_after_s"] is None for e in later.log] == [False] + [True] * len(configs)
    finally:
        base.finish.set()
        later.close()


def test_a_long_timing_runs_to_its_end_unless_a_gpu_candidate_waits_within_its_tries(relu, monkeypatch):
    task, configs = relu
    monkeypatch.setattr(compile_later, "GIVE_WAY_S", 0.05)
    watches = []

    class Watch(compile_later._GiveWay):
        def __init__(self, *args):
            super().__init__(*args)
            watches.append(self)

    monkeypatch.setattr(compile_later, "_GiveWay", Watch)
    # Nobody waits: watched past GIVE_WAY_S, never given way, timed when it ends.
    base, lock = _SlowBase(slow=1), SharedDeviceLock(None)
    looked = []
    seen = lock.waited_for
    lock.waited_for = lambda: (looked.append(1), seen())[1]
    later = _gpu_later(base, lock)
    try:
        later.times(task, configs)
        _wait_for(lambda: len(looked) >= 3, "the watch looking at the lock", 60)
        base.finish.set()
        _wait_for(lambda: later.timed == len(configs), "timed")
        assert later.gave_way == 0 and len(watches) == len(configs) and not any(w.fired for w in watches)
    finally:
        later.close()
    # Given way GIVE_WAY_TRIES times, the configuration is timed however long it holds the device.
    tries = compile_later.GIVE_WAY_TRIES
    watches.clear()
    base, lock = _SlowBase(slow=tries + 1), SharedDeviceLock(None)
    later = _gpu_later(base, lock)
    try:
        for k in range(tries):
            later.want(task, configs)
            _wait_for(lambda: base.started == k + 1, "the timing holding the device")
            _a_candidates_timing_waits(lock).join(60)
            _wait_for(lambda: later.gave_way == k + 1 and not later._queued, "given way")
        later.want(task, configs)
        _wait_for(lambda: base.started == tries + 1, "the timing after the tries")
        waiting = _a_candidates_timing_waits(lock)
        assert len(watches) == tries  # no watch on this one: the candidate waits for its end
        base.finish.set()
        waiting.join(60)
        _wait_for(lambda: later.timed == len(configs), "timed")
        assert later.gave_way == tries and base.timings == [c.name for c in configs]
    finally:
        base.finish.set()
        later.close()
    # The CPU's compiled reference (its timing on the cores, as the candidates'): never watched.
    watches.clear()
    base, lock = _Base(), SharedDeviceLock(None)
    later = CompileLater(base, lock)
    try:
        later.times(task, configs)
        _wait_for(lambda: later.timed == len(configs), "timed")
        assert watches == []
    finally:
        later.close()


_SLOW_LOAD = ("import time\nimport torch.nn as nn\ntime.sleep(600)\n\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        return x\n")


def test_a_real_worker_killed_by_another_thread_ends_the_wait_in_its_recv():
    """What a give-way does to the timing's thread: the watch kills the worker's processes from its own thread, and
    the timing thread's ``recv`` ends at once with the worker's death (not at its timeout), free to close it."""
    from kbench_env.sandbox.worker_process import Worker, WorkerError

    root = os.path.join(str(ROOT), ".kbench-cache", "builds", "cpu")
    os.makedirs(root, exist_ok=True)
    w = Worker(_SLOW_LOAD, "cpu", "cpu", root)
    try:
        killer = threading.Timer(1.0, w.kill)
        killer.start()
        with pytest.raises(WorkerError) as err:
            w.recv(300, "load")  # the load sleeps longer than this
        killer.join(30)
        assert "timed out" not in str(err.value), err.value
    finally:
        w.close()
    assert w.proc.exitcode is not None


_BURN = ("import sys, time\n"
         "while time.thread_time() < 0.5:\n"
         "    pass\n"
         "print('burned', flush=True)\n"
         "sys.stdin.readline()\n")  # (blocked in a read until the test closes its stdin)


def _burned_child():
    """A process that has used 0.5 s of CPU and is now blocked in a read (its main thread asleep: looked for, since
    it says "burned" just before it blocks)."""
    from kbench_env.sandbox.confine.proc_table import thread_states

    p = subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "burned"
    _wait_for(lambda: thread_states(p.pid).get(p.pid, {}).get("state") == "S", "the child blocked in its read")
    return p


def test_a_processs_threads_are_read_with_their_state_cpu_and_wait():
    from kbench_env.sandbox.confine.proc_table import thread_states

    p = _burned_child()
    try:
        threads = thread_states(p.pid)
        main = threads[p.pid]  # (the main thread's id is the process's)
        assert main["ticks"] >= 0.4 * os.sysconf("SC_CLK_TCK")  # its 0.5 s of CPU, in clock ticks
        assert main["state"] == "S" and main["syscall"] not in (None, "running")  # blocked in its read
    finally:
        p.stdin.close()
        p.wait(30)
    assert thread_states(p.pid) == {}  # gone: nothing to read


def test_a_give_way_looks_at_the_workers_threads_before_it_kills_them():
    p = _burned_child()

    class Worker:
        proc, killed_with = p, None

        def kill(self):  # what the snapshot saw, before the kill
            Worker.killed_with = watch.snapshot
            p.kill()

    lock = SharedDeviceLock(None)
    lock.waited_for = lambda: True  # a candidate waits
    watch = compile_later._GiveWay(lock, Worker(), 0.0)
    try:
        _wait_for(lambda: Worker.killed_with is not None, "the worker killed")
    finally:
        watch.stop()
        p.kill()
        p.wait(30)
    snap = Worker.killed_with
    assert watch.fired and snap["threads"] >= 1 and sum(snap["states"].values()) == snap["threads"]
    assert snap["states"].get("S", 0) >= 1 and snap["waits"]
    main = [r for r in snap["busiest"] if r["tid"] == p.pid]
    assert main and main[0]["cpu_ms"] == 0 and main[0]["state"] == "S"  # asleep in its read over the gap

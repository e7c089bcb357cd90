"""How evaluations share a device (issue #36): checks shared by default on GPUs and not on the CPU, and an exclusive
holder (timing) of one process not starved by another process's stream of shared holders (checks)."""

from __future__ import annotations

import multiprocessing as mp
import sys
import threading
import time

from kbench_env.config import EvaluatorConfig
from kbench_env.pipeline.device_hold import shared_checks_setting
from kbench_env.machine.shared_device_lock import SharedDeviceLock

#: How long the reading process keeps shared holds coming; a starved writer gets the lock only after it.
READ_SPAN_S = 4.0


def test_shared_checks_default_on_gpus_off_on_the_cpu(monkeypatch):
    monkeypatch.delenv("KBENCH_SHARED_CHECKS", raising=False)
    assert shared_checks_setting(None, "cuda:0") is True
    assert shared_checks_setting(None, "cuda") is True
    assert shared_checks_setting(None, "cpu") is False
    assert shared_checks_setting(False, "cuda:0") is False and shared_checks_setting(True, "cpu") is True
    # the variable is the setting of a config made without one (config/environ.py)
    assert EvaluatorConfig().resources.shared_checks is None
    monkeypatch.setenv("KBENCH_SHARED_CHECKS", "0")
    assert shared_checks_setting(EvaluatorConfig().resources.shared_checks, "cuda:0") is False
    monkeypatch.setenv("KBENCH_SHARED_CHECKS", "1")
    assert shared_checks_setting(EvaluatorConfig().resources.shared_checks, "cpu") is True
    given = EvaluatorConfig.from_options(shared_checks=False).resources.shared_checks
    assert shared_checks_setting(given, "cpu") is False  # an explicit setting wins over the variable


def _readers(path: str, started, out) -> None:
    """Four threads taking shared holds of 40 ms one after another, staggered so that one always holds (the
    process keeps LOCK_SH throughout unless something holds new ones back), for READ_SPAN_S."""
    lock = SharedDeviceLock(path, max_shared=4)
    holds, guard = [], threading.Lock()
    end = time.monotonic() + READ_SPAN_S

    def loop(k: int) -> None:
        time.sleep(0.01 * k)
        while time.monotonic() < end:
            lock.acquire(shared=True)
            t0 = time.monotonic()
            time.sleep(0.04)
            t1 = time.monotonic()
            lock.release()
            with guard:
                holds.append((t0, t1))

    threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    started.set()
    for t in threads:
        t.join(READ_SPAN_S + 30)
    out.put(("readers", holds))


def _writer(path: str, started, out) -> None:
    lock = SharedDeviceLock(path)
    started.wait(60)
    time.sleep(0.2)
    asked = time.monotonic()
    lock.acquire()
    t0 = time.monotonic()
    time.sleep(0.02)
    t1 = time.monotonic()
    lock.release()
    out.put(("writer", (asked, t0, t1)))


def test_a_writer_of_another_process_is_not_starved_by_a_stream_of_shared_holds(tmp_path):
    """Fails without the gate (machine/shared_device_lock.py): the reading process then keeps its file lock for as long as its
    shared holds keep coming, and the writer gets the lock only after the last of them."""
    ctx = mp.get_context("spawn")
    path = str(tmp_path / "locks" / "gpu-test.lock")
    started, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_readers, args=(path, started, out)),
             ctx.Process(target=_writer, args=(path, started, out))]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0]
    asked, w0, w1 = got["writer"]
    holds = got["readers"]
    assert not any(a < w1 and w0 < b for a, b in holds), "an exclusive hold overlapped a shared one"
    after = [a for a, _ in holds if a >= w1]
    assert after, (f"the writer waited {w0 - asked:.2f} s and got the lock only after the other process's last "
                   f"shared hold: starved by them")


def _bench(name: str):
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    return importlib.import_module(name)


def test_idle_while_waiting_counts_the_waits_no_holder_covers():
    hold_overlap = _bench("hold_overlap")
    s = 10**9
    rows = [{"lock": "g", "mode": "wait", "start_ns": 0, "end_ns": 4 * s},          # waits 0-4 and 3-6: 0-6 waited
            {"lock": "g", "mode": "wait", "start_ns": 3 * s, "end_ns": 6 * s},
            {"lock": "g", "mode": "exclusive", "start_ns": 1 * s, "end_ns": 2 * s},  # held 1-2 and 2.5-5
            {"lock": "g", "mode": "shared", "start_ns": int(2.5 * s), "end_ns": 5 * s},
            {"lock": "g", "mode": "exclusive", "start_ns": 7 * s, "end_ns": 8 * s}]   # nobody waits then
    got = hold_overlap.idle_while_waiting(rows)
    assert got == {"waiting_s": 6.0, "idle_s": 2.5, "idle_fraction": round(2.5 / 6, 4)}  # idle 0-1, 2-2.5, 5-6
    assert hold_overlap.overlaps(rows) == []  # a wait overlapping a hold is no overlap of holds
    assert hold_overlap.idle_while_waiting(rows, window=(0, 2 * s))["idle_s"] == 1.0


def test_waits_for_the_device_are_logged(tmp_path, monkeypatch):
    from kbench_env.pipeline.device_hold import _log_wait

    hold_overlap = _bench("hold_overlap")
    log = tmp_path / "holds.jsonl"
    monkeypatch.setenv("KBENCH_DEVICE_HOLD_LOG", str(log))
    lock = SharedDeviceLock(str(tmp_path / "gpu-w.lock"))
    t0 = time.monotonic_ns()
    lock.acquire(shared=True)
    _log_wait(lock, t0)
    lock.release()
    modes = [h["mode"] for h in hold_overlap.read_holds(log)]
    assert modes == ["wait", "shared"]
    assert hold_overlap.main([str(log)]) == 0


def test_the_default_executor_is_one_process_per_device_where_there_are_several(monkeypatch):
    import kbench_env.executors as executors

    made = []

    class Stub:
        def __init__(self, kind):
            self.kind = kind

    monkeypatch.setattr(executors, "LocalExecutor", lambda **kw: made.append(kw) or Stub("local"))
    monkeypatch.setattr(executors, "ProcessExecutor", lambda **kw: made.append(kw) or Stub("processes"))
    assert executors.make_executor(device="cpu").kind == "local"
    assert executors.make_executor(device=["cuda:0"]).kind == "local"
    assert executors.make_executor(device=["cuda:0", "cuda:1"]).kind == "processes"
    assert executors.make_executor("local", device=["cuda:0", "cuda:1"]).kind == "local"  # asked for: kept
    monkeypatch.setattr(executors, "local_devices", lambda device: ["cuda:0", "cuda:1", "cuda:2", "cuda:3"])
    assert executors.make_executor(device="cuda", workers=4).kind == "processes"
    assert made[-1] == {"device": "cuda", "workers": 4}


def test_under_shared_checks_the_reference_is_started_and_run_before_the_exclusive_hold(tmp_path):
    from conftest import ROOT, cpu_evaluator
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    like = cpu_evaluator()  # the test suite's short timing settings
    like.close()
    # the GPU's flow, on the CPU: a reference cache makes the CPU's timing unpaired, as a GPU's is (timing.is_paired)
    ev = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, shared_checks=True,
                   reference_cache=tmp_path / "references", cache_dir=tmp_path)
    task = resolve_task("level1/relu")
    good = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
    paired = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, shared_checks=True,
                       reference_cache=False, cache_dir=tmp_path)
    try:
        r = paired.evaluate(task, good, seed=3)  # paired timing starts its own reference worker: nothing prepared
        assert r.correct and r.speedup_ci, r.feedback()
        assert paired.baselines.timed == 0 and not paired.baselines._ready  # noqa: SLF001
    finally:
        paired.close()
    try:
        first = ev.evaluate(task, good, seed=3)
        assert first.correct and first.speedup, first.feedback()
        assert "reference_prepare" in first.phase_seconds and "reference_wait" in first.phase_seconds
        n = len(first.configs)
        _a_timing_waits_for_the_run_ahead(ev.baselines, task)
        assert ev.baselines.timed == n and not ev.baselines._ready  # noqa: SLF001 - timed once, nothing left waiting
        second = ev.evaluate(task, good, seed=4)
        assert second.correct and ev.baselines.timed == n  # cached: nothing prepared, nothing timed again
        assert [c.reference_ms for c in second.configs] == [c.reference_ms for c in first.configs]
        other = resolve_task("level1/gelu")
        configs = other.configs_for("cpu")
        from kbench_env.pipeline.check import instantiate
        prepared: dict = {}
        for i, cfg in enumerate(configs):
            instantiate(other, cfg, 1, i, prepared, "cpu")
        ev.baselines.prepare(other, configs, prepared)  # a candidate that never reached its timing
        (w, ran, _), = ev.baselines._ready.values()  # noqa: SLF001
        assert ran == {f"{c.name}#eager" for c in configs}
    finally:
        ev.close()
    w.proc.join(10)
    assert w.proc.exitcode is not None  # closed with the evaluator


def _a_timing_waits_for_the_run_ahead(baselines, task) -> None:
    """``wait_run_ahead``: while the task is being run ahead it waits (returning once the run ahead has left,
    told by the condition), and by its timeout when the run ahead does not end."""
    import threading
    key, events = (task.name, task.source_hash), []
    baselines._running.add(key)  # noqa: SLF001 - a run ahead under way

    def ends():
        events.append("run ahead over")
        with baselines._ready_cond:  # noqa: SLF001
            baselines._running.discard(key)  # noqa: SLF001
            baselines._ready_cond.notify_all()  # noqa: SLF001

    timer = threading.Timer(0.3, ends)
    timer.start()
    baselines.wait_run_ahead(task, 60)
    assert events == ["run ahead over"]  # it returned only once the run ahead was over
    timer.join(10)
    baselines._running.add(key)  # noqa: SLF001 - one that does not end
    baselines.wait_run_ahead(task, 0.2)
    assert key in baselines._running  # noqa: SLF001 - given up by its timeout
    baselines._running.discard(key)  # noqa: SLF001


def test_the_references_worker_starts_beside_the_build_and_one_not_taken_is_closed(tmp_path, monkeypatch):
    """Under shared checks, a task whose reference is not timed has its reference's worker started before the
    candidate's build (not inside its shared hold of the device), and the timing (the first, which calibrates) or
    the preparation takes that very worker; a task stored in the disk cache starts none, even before the
    calibration; a candidate that fails its checks leaves its started worker closed at its end."""
    from conftest import ROOT, cpu_evaluator
    from kbench_env.pipeline import evaluator as evaluator_mod, reference_start
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    events, made = [], []
    real_build = evaluator_mod.build
    real_init, real_take = reference_start.Started.__init__, reference_start.Started.take

    def build(*args, **kwargs):
        events.append("build")
        return real_build(*args, **kwargs)

    def init(self, make, timeout, then=None):
        events.append("start")
        made.append(self)

        def made_worker():
            w = make()
            self.made_worker = w
            return w
        real_init(self, made_worker, timeout, then)

    def take(self):
        w = real_take(self)
        events.append(("taken", w is not None and w is getattr(self, "made_worker", None)))
        return w

    monkeypatch.setattr(evaluator_mod, "build", build)
    monkeypatch.setattr(reference_start.Started, "__init__", init)
    monkeypatch.setattr(reference_start.Started, "take", take)
    like = cpu_evaluator()
    like.close()
    ev = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, shared_checks=True,
                   reference_cache=tmp_path / "references", cache_dir=tmp_path)
    try:
        relu = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
        assert ev.evaluate(resolve_task("level1/relu"), relu, seed=3).correct
        assert events == ["start", "build", ("taken", True)], events  # taken by the timing that calibrates
        events.clear()
        assert ev.evaluate(resolve_task("level1/relu"), relu, seed=4).correct and events == ["build"], events
        events.clear()
        again = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False,
                          shared_checks=True, reference_cache=tmp_path / "references", cache_dir=tmp_path)
        try:  # a new process's evaluator: relu on disk, known before the calibration: nothing to start
            task = resolve_task("level1/relu")
            assert again.baselines._unknown(task, task.configs_for("cpu")) is False  # noqa: SLF001
            assert again.evaluate(resolve_task("level1/relu"), relu, seed=5).correct
        finally:
            again.close()
        assert events == ["build"], events
        events.clear()
        gelu = (ROOT / "tasks/solutions/cpu/level1/gelu.py").read_text()
        r = ev.evaluate(resolve_task("level1/gelu"), gelu, seed=3)
        assert r.correct and r.speedup, r.feedback()
        assert events == ["start", "build", ("taken", True)], events
        assert ev.baselines.timed == len(r.configs) + 3 and not ev.baselines._starts  # noqa: SLF001
        events.clear()
        wrong = ev.evaluate(resolve_task("level1/softmax_rows"), relu, seed=3)  # a kernel, not softmax's
        assert not wrong.correct and events == ["start", "build"], (events, wrong.feedback())
        assert not ev.baselines._starts  # noqa: SLF001 - closed with its evaluation, not left for the evaluator
        made[-1]._thread.join(60)  # noqa: SLF001 - a start under way at its evaluation's end closes its worker
        w = made[-1].made_worker
        w.proc.join(10)
        assert w.proc.exitcode is not None
    finally:
        ev.close()


def test_the_trusted_sides_shared_holders_have_places_of_their_own():
    """A reference run ahead (``trusted``) shares the device beside the candidates' checks without taking their
    places or waiting for them, up to a cap of its own; exclusive holders, holding or waiting, keep both out."""
    lock = SharedDeviceLock(None, max_shared=1)
    lock.max_trusted = 1
    assert lock.acquire(shared=True)  # a candidate's check: the one candidates' place
    assert not lock.acquire(blocking=False, shared=True)
    assert lock.acquire(blocking=False, shared=True, trusted=True)  # beside it, in the trusted side's place
    assert not lock.acquire(blocking=False, shared=True, trusted=True)  # that place taken too
    lock.release(trusted=True)
    try:
        lock.release(trusted=True)  # no trusted holder left: refused
    except RuntimeError:
        pass
    else:
        raise AssertionError("a trusted release without a trusted holder was taken")
    assert lock.acquire(blocking=False, shared=True, trusted=True)
    lock.release()  # the check's
    assert not lock.acquire(blocking=False, shared=True, trusted=True)  # the trusted place is still held
    assert lock.acquire(blocking=False, shared=True)  # the candidates' place is free again
    lock.release()
    waiting = threading.Thread(target=lambda: (lock.acquire(), lock.release()), daemon=True)
    waiting.start()  # a timing waits for the trusted holder ...
    deadline = time.monotonic() + 10
    while not lock.exclusive_waiting() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lock.exclusive_waiting()
    assert not lock.acquire(blocking=False, shared=True)  # ... and keeps new shared holders of both kinds out
    lock.release(trusted=True)
    waiting.join(10)
    assert not waiting.is_alive()
    assert lock.acquire(blocking=False)  # nothing held: the exclusive hold is free
    assert not lock.acquire(blocking=False, shared=True, trusted=True)
    lock.release()


def test_a_fresh_tasks_reference_runs_ahead_beside_the_build(tmp_path, monkeypatch):
    """Where the reference's worker starts beside the build (a GPU's flow, here on the CPU with run-ahead switched
    on), its thread also calibrates the device, runs every configuration (the preparation of the check slot) and
    times them before the candidate is checked: the candidate's preparation and timing find it done, and a build
    that fails still leaves the reference timed for the task's next candidate."""
    from conftest import ROOT, cpu_evaluator
    from kbench_env.pipeline import baseline as baseline_mod, evaluator as evaluator_mod
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    runs, calibrations, starts, timings = [], [], [], []
    real_run, real_cal = baseline_mod.Baselines._run_reference, baseline_mod.Baselines._calibrate_once
    real_time = baseline_mod.Baselines._time_reference

    def time_reference(self, w, task, cfg, prepared, ran):
        timings.append((threading.current_thread().name, cfg.name))
        return real_time(self, w, task, cfg, prepared, ran)
    real_start, real_build = baseline_mod.Baselines.start, evaluator_mod.build

    order = []

    def run_reference(self, w, task, cfg, prepared, label, compiled, hold=None):
        runs.append((threading.current_thread().name, cfg.name, label))
        order.append("run")
        return real_run(self, w, task, cfg, prepared, label, compiled, hold)

    def calibrate(self, w, task, configs):
        if w is not None and self.calibration is None:
            calibrations.append(threading.current_thread().name)
            order.append("calibration")
        return real_cal(self, w, task, configs)

    def start(self, *args, **kwargs):
        started = real_start(self, *args, **kwargs)
        starts.append(started)
        return started

    def build(*args, **kwargs):  # the run ahead ends before the build: the order this test is about
        for s in starts:
            if s is not None:
                s.join(120)
        return real_build(*args, **kwargs)

    monkeypatch.setattr(baseline_mod.Baselines, "_run_reference", run_reference)
    monkeypatch.setattr(baseline_mod.Baselines, "_calibrate_once", calibrate)
    monkeypatch.setattr(baseline_mod.Baselines, "_time_reference", time_reference)
    monkeypatch.setattr(baseline_mod.Baselines, "start", start)
    monkeypatch.setattr(evaluator_mod, "build", build)
    like = cpu_evaluator()
    like.close()
    ev = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, shared_checks=True,
                   reference_cache=tmp_path / "references", cache_dir=tmp_path)
    ev.baselines.runs_ahead = True
    try:
        task = resolve_task("level1/relu")
        r = ev.evaluate(task, (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text(), seed=3)
        assert r.correct and r.speedup, r.feedback()
        n = len(r.configs)
        assert calibrations == ["kbench-reference-start"], calibrations
        # the runs (and their compiles) first, holding the device shared; the calibration, alone on it, after them
        assert order == ["run"] * n + ["calibration"], order
        assert len(runs) == n and {name for name, _, _ in runs} == {"kbench-reference-start"}, runs
        assert ev.baselines.ran_ahead == ev.baselines.timed_ahead == 1 and ev.baselines.timed == n
        up, ran, timed = (list(ev.baselines.ahead_times[k]) for k in ("up", "ran", "timed"))
        assert len(up) == len(ran) == len(timed) == 1 and up[0] <= ran[0] <= timed[0]  # the run ahead's timeline
        assert len(timings) == n and {name for name, _ in timings} == {"kbench-reference-start"}, timings
        assert not ev.baselines._ready and not ev.baselines._starts  # noqa: SLF001 - timed ahead, closed
        runs.clear()
        gelu = resolve_task("level1/gelu")
        gelu_source = (ROOT / "tasks/solutions/cpu/level1/gelu.py").read_text()
        broken = ev.evaluate(gelu, gelu_source.replace("#include <cmath>", "#include <cmath>\nnot C++;"), seed=3)
        assert not broken.compiled, broken.feedback()
        assert ev.baselines.ran_ahead == ev.baselines.timed_ahead == 2 and len(runs) == len(gelu.configs_for("cpu"))
        assert ev.baselines.timed == n + len(gelu.configs_for("cpu"))  # timed though its first candidate failed
        assert not ev.baselines._ready  # noqa: SLF001
        good = ev.evaluate(gelu, gelu_source, seed=5)
        assert good.correct and good.speedup, good.feedback()
        assert len(runs) == len(gelu.configs_for("cpu")) and ev.baselines.timed == n + len(gelu.configs_for("cpu"))
    finally:
        ev.close()


def test_a_run_ahead_waits_while_as_many_prepared_references_wait_as_their_cap(monkeypatch):
    """Prepared references hold device memory until their timings: past AHEAD_READY of them a run ahead waits for
    one to be taken, and gives up at once when its own worker was taken meanwhile."""
    from conftest import cpu_evaluator
    from kbench_env.pipeline import reference_start

    class _Start:
        dropped = False

    monkeypatch.setattr(reference_start, "AHEAD_READY", 1)
    ev = cpu_evaluator()
    try:
        b = ev.baselines
        b._ready[("t", "h")] = (None, set(), {})  # noqa: SLF001 - one prepared reference waiting for its timing
        got, start = [], _Start()
        waiting = threading.Thread(target=lambda: got.append(b._ready_place(start)), daemon=True)  # noqa: SLF001
        waiting.start()
        waiting.join(1.5)
        assert waiting.is_alive() and not got  # no place
        with b._ready_cond:  # noqa: SLF001 - its timing takes it (as _times_locked does)
            b._ready.pop(("t", "h"))  # noqa: SLF001
            b._ready_cond.notify_all()  # noqa: SLF001
        waiting.join(10)
        assert got == [True]
        b._ready[("t", "h")] = (None, set(), {})  # noqa: SLF001
        start.dropped = True  # its worker taken by a candidate's own preparation: nothing to wait for
        assert b._ready_place(start) is False  # noqa: SLF001
        b._ready.clear()  # noqa: SLF001
    finally:
        ev.close()


class _CountingLock:
    """An evaluator's shared lock, its shared acquisitions counted, a waiting timing said or not."""

    def __init__(self, lock, waiting: bool):
        self.lock, self.waiting, self.shared_acquires = lock, waiting, 0
        self.max_shared = lock.max_shared

    def acquire(self, blocking: bool = True, shared: bool = False, timeout: float | None = None) -> bool:
        self.shared_acquires += shared
        return self.lock.acquire(blocking, shared, timeout=timeout)

    def release(self) -> None:
        self.lock.release()

    def exclusive_waiting(self) -> bool:
        return self.waiting


def test_a_check_steps_aside_between_configurations_for_a_waiting_timing(tmp_path):
    from conftest import ROOT, cpu_evaluator
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    like = cpu_evaluator()
    like.close()
    task = resolve_task("level1/relu")
    good = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
    n = len(task.configs_for("cpu"))
    assert n > 1
    got = {}
    for waiting in (False, True):
        ev = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, shared_checks=True,
                       time_candidates=False, cache_dir=tmp_path)
        ev._device_lock = _CountingLock(ev._device_lock, waiting)  # noqa: SLF001
        try:
            r = ev.evaluate(task, good, seed=2)
        finally:
            ev.close()
        assert r.correct and not r.integrity_flags and len(r.configs) == n, r.feedback()
        got[waiting] = ev._device_lock.shared_acquires  # noqa: SLF001
    assert got == {False: 1, True: n}  # once between each two configurations, and only when a timing waits


def test_the_lock_says_when_an_exclusive_holder_waits(tmp_path):
    lock = SharedDeviceLock(str(tmp_path / "gpu-e.lock"))
    lock.acquire(shared=True)
    assert not lock.exclusive_waiting()
    writer = threading.Thread(target=lambda: (lock.acquire(), lock.release()), daemon=True)
    writer.start()
    _seen_then_let_in(lock, lock.exclusive_waiting, writer, "the waiting writer")
    assert not lock.exclusive_waiting()


def _seen_then_let_in(lock, seen, waiter, what: str) -> None:
    """Wait until ``seen()`` says ``waiter`` waits (within a deadline), then let the hold go and ``waiter`` end."""
    deadline = time.monotonic() + 30
    while not seen():
        assert time.monotonic() < deadline, f"{what} was never seen"
        time.sleep(0.001)
    lock.release()
    waiter.join(30)
    assert not waiter.is_alive()


def test_the_lock_says_when_anyone_waits_for_its_holder(tmp_path):
    """``waited_for``: a candidate's check or a timing of this process, or another process's timing at the gate (a
    second lock on the same file stands for it: flock holds per open file), waits; a trusted shared holder (a
    reference run ahead) does not count, nor does the holder itself."""
    path = str(tmp_path / "gpu-w.lock")
    lock, other = SharedDeviceLock(path), SharedDeviceLock(path)

    assert lock.acquire_idle(5.0)
    assert not lock.waited_for()  # held alone, nobody waiting
    for waiter in (lambda: (lock.acquire(shared=True), lock.release()),  # a candidate's check
                   lambda: (lock.acquire(), lock.release()),  # a timing of this process
                   lambda: (other.acquire(), other.release())):  # another process's timing
        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        _seen_then_let_in(lock, lock.waited_for, t, "the waiter")
        assert lock.acquire_idle(30.0)
        assert not lock.waited_for()
    trusted = threading.Thread(target=lambda: (lock.acquire(shared=True, trusted=True), lock.release(trusted=True)),
                               daemon=True)
    trusted.start()  # a reference run ahead waits for the hold too, and is no reason to give way
    deadline = time.monotonic() + 30
    while not _in_wait(trusted):
        assert time.monotonic() < deadline, "the trusted holder never waited"
        time.sleep(0.001)
    assert not lock.waited_for()
    lock.release()
    trusted.join(30)
    assert not trusted.is_alive()


def _in_wait(thread) -> bool:
    """Whether ``thread`` is inside the lock's wait for its turn (its stack read, not guessed from time)."""
    frame = sys._current_frames().get(thread.ident)  # noqa: SLF001
    while frame is not None:
        if frame.f_code.co_name == "_wait":
            return True
        frame = frame.f_back
    return False

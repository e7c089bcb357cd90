"""The device-hold log (``KBENCH_DEVICE_HOLD_LOG``, kbench_env/machine/device_lock.py) and its overlap check
(bench/hold_overlap.py): every hold of a lock file is logged by every process, the check finds none overlapping
when the lock works, and finds the one that does in a log where it does not."""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import threading
import time
from pathlib import Path

from kbench_env.machine.device_lock import DeviceLock
from kbench_env.machine.shared_device_lock import SharedDeviceLock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import hold_overlap  # noqa: E402


def _hold(path: str, log: str, n: int) -> None:
    import os
    os.environ["KBENCH_DEVICE_HOLD_LOG"] = log
    lock = DeviceLock(path)
    for _ in range(n):
        with lock:
            time.sleep(0.01)


def test_every_process_logs_its_holds_and_none_overlap(tmp_path):
    log, path = str(tmp_path / "holds.jsonl"), str(tmp_path / "gpu-a.lock")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(path, log, 6)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    holds = hold_overlap.read_holds(log)
    assert len(holds) == 18 and {h["mode"] for h in holds} == {"exclusive"}
    assert len({h["pid"] for h in holds}) == 3
    assert hold_overlap.overlaps(holds) == []
    assert hold_overlap.main([log]) == 0


def test_shared_holds_are_logged_once_per_process_and_exclusive_ones_apart(tmp_path, monkeypatch):
    log = tmp_path / "holds.jsonl"
    monkeypatch.setenv("KBENCH_DEVICE_HOLD_LOG", str(log))
    lock = SharedDeviceLock(tmp_path / "gpu-b.lock")
    both_in = threading.Barrier(2)

    def checker():
        lock.acquire(shared=True)
        both_in.wait(timeout=10)  # both shared holders are in at once
        time.sleep(0.01)
        lock.release()

    threads = [threading.Thread(target=checker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    with lock:
        time.sleep(0.01)
    holds = hold_overlap.read_holds(log)
    assert [h["mode"] for h in holds] == ["shared", "exclusive"]
    assert hold_overlap.overlaps(holds) == []


def test_the_check_finds_an_exclusive_hold_overlapping_another(tmp_path, capsys):
    log = tmp_path / "holds.jsonl"
    rows = [{"lock": "gpu-x", "mode": "exclusive", "pid": 1, "start_ns": 0, "end_ns": 100},
            {"lock": "gpu-x", "mode": "shared", "pid": 2, "start_ns": 100, "end_ns": 200},   # touches, no overlap
            {"lock": "gpu-x", "mode": "shared", "pid": 3, "start_ns": 150, "end_ns": 250},   # shared with shared
            {"lock": "gpu-x", "mode": "exclusive", "pid": 4, "start_ns": 240, "end_ns": 300},  # overlaps pid 3
            {"lock": "gpu-y", "mode": "exclusive", "pid": 5, "start_ns": 0, "end_ns": 1000}]   # another GPU
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    found = hold_overlap.overlaps(hold_overlap.read_holds(log))
    assert [(a["pid"], b["pid"]) for a, b in found] == [(4, 3)]
    assert hold_overlap.main([str(log)]) == 1
    assert "overlaps with an exclusive hold: 1" in capsys.readouterr().out


def test_no_log_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("KBENCH_DEVICE_HOLD_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    with DeviceLock(tmp_path / "gpu-c.lock"):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["gpu-c.lock"]


def test_the_longest_holds_are_listed_per_mode_with_when_and_who(tmp_path, capsys):
    s = 10**9
    lock = "/tmp/kbench-locks/gpu-x.lock"

    def hold(mode, start, end, thread):
        return {"lock": lock, "mode": mode, "pid": 7, "thread": thread,
                "start_ns": int(start * s), "end_ns": int(end * s)}

    holds = [hold("exclusive", 1, 2, 1), hold("exclusive", 3, 12, 2), hold("exclusive", 13, 13.5, 6),
             hold("shared", 14, 15, 3), hold("shared", 15, 22, 4), hold("wait", 2, 30, 5)]
    top = hold_overlap.longest(holds, n=2)[lock]
    # the two longest of each mode, longest first, each with its own length and start from the log's first start
    t0 = min(h["start_ns"] for h in holds)
    for mode, threads in (("exclusive", [2, 1]), ("shared", [4, 3])):
        assert [h["thread"] for h in top[mode]] == threads
        for got in top[mode]:
            src = next(h for h in holds if h["mode"] == mode and h["thread"] == got["thread"])
            assert got["s"] == (src["end_ns"] - src["start_ns"]) / s and got["at_s"] == (src["start_ns"] - t0) / s
    log = tmp_path / "holds.jsonl"
    log.write_text("".join(json.dumps(h) + "\n" for h in holds))
    assert hold_overlap.main([str(log)]) == 0
    out = capsys.readouterr().out
    for mode in ("exclusive", "shared"):  # the longest of each named first on its line
        first = top[mode][0]
        assert f"longest {mode}: {first['s']:.2f} s at {first['at_s']:.1f} s (pid 7 thread {first['thread']})" in out

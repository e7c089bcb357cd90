"""The workers' CPU time by role and stage (sandbox/cpu_tally.py): read from /proc before a worker is killed, split by
the stages the worker reports when its candidate loads, and attributed to the role the worker had."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from kbench_env.sandbox import cpu_tally
from kbench_env.sandbox.cpu_tally import TALLY, CpuTally, process_cpu_seconds, since
from kbench_env.sandbox.worker_process import Worker

ROOT = Path(__file__).resolve().parent.parent

#: A candidate that spends about half a CPU-second of its own when it loads (a busy loop at import): its load stage
#: must show it.
_BUSY_LOAD = ("import time\nimport torch.nn as nn\n_t = time.process_time()\nwhile time.process_time() - _t < 0.5:\n"
              "    pass\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")


def _burn(seconds: float) -> None:
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def test_a_process_cpu_time_is_read_from_proc_and_grows_with_work():
    before = process_cpu_seconds(os.getpid())
    _burn(0.3)
    after = process_cpu_seconds(os.getpid())
    assert before is not None and after - before >= 0.25, (before, after)
    assert process_cpu_seconds(None) is None
    assert process_cpu_seconds(2**22 + 12345) is None  # (above pid_max's default: no such process)


def test_the_tally_sums_by_role_and_keeps_only_stages_that_fit_the_whole():
    t = CpuTally()
    t.record("candidate", 4.0, {"warm_up": 1.0, "loaded": 1.5})
    t.record("candidate", 2.0, {"warm_up": 0.5, "loaded": 0.75})
    t.record("candidate", 3.0, {"warm_up": 2.0, "loaded": 9.0})  # (past the whole: the worker's word refused)
    t.record("candidate", 3.0, {"warm_up": -1.0, "loaded": 1.0})  # (negative)
    t.record("candidate", 3.0, "not a mapping")
    t.record("candidate", None, {"warm_up": 1.0, "loaded": 2.0})  # (the whole not read: no stages either)
    t.record("spare_unused", 1.25)
    got = t.snapshot()
    c = got["candidate"]
    assert (c["workers"], c["measured"], c["staged"]) == (6, 5, 2)
    assert c["total"] == pytest.approx(15.0)
    assert (c["start"], c["load"], c["serve"]) == pytest.approx((1.5, 0.75, 3.75))
    assert got["spare_unused"]["workers"] == 1 and got["spare_unused"]["total"] == pytest.approx(1.25)
    assert got["reference"]["workers"] == 0
    with pytest.raises(ValueError):
        t.record("trusted", 1.0)
    later = CpuTally()
    later.record("reference", 2.0, {"warm_up": 0.5, "loaded": 1.0})
    assert since(t.snapshot(), t.snapshot())["candidate"]["total"] == 0
    assert since(CpuTally().snapshot(), later.snapshot())["reference"]["serve"] == pytest.approx(1.0)


def test_a_real_workers_life_is_counted_once_by_its_role_with_its_stages():
    """A worker without a builder (a reference's) that loads a candidate busy at import, then a spare that never got
    one: each counted once, under its role, with its CPU time read; the busy load lands in the load stage."""
    root = os.path.join(str(ROOT), ".kbench-cache", "builds", "cpu")
    os.makedirs(root, exist_ok=True)
    before = TALLY.snapshot()
    with Worker(_BUSY_LOAD, "cpu", "cpu", root) as w:
        header, _ = w.recv(120, "load")
        assert header["type"] == "loaded", header.get("message")
        assert w.cpu_marks and w.cpu_marks["loaded"] > w.cpu_marks["warm_up"] >= 0.0
    mid = since(before, TALLY.snapshot())
    ref = mid["reference"]
    assert (ref["workers"], ref["measured"], ref["staged"]) == (1, 1, 1), mid
    assert ref["load"] >= 0.4, ref  # the candidate's half second at import
    assert ref["start"] + ref["load"] + ref["serve"] == pytest.approx(ref["total"], abs=0.05)
    assert mid["candidate"]["workers"] == 0 and mid["spare_unused"]["workers"] == 0
    with tempfile.TemporaryDirectory() as scratch:
        spare = Worker(None, "cpu", "cpu", root, scratch_root=scratch)
        spare.close()
    after = since(before, TALLY.snapshot())
    assert after["spare_unused"]["workers"] == 1 and after["spare_unused"]["measured"] == 1, after
    assert after["reference"]["workers"] == 1  # (not counted again)


def test_rl_batch_reports_the_tally_per_role():
    from bench.rl_batch import worker_stages

    t = CpuTally()
    t.record("candidate", 4.0, {"warm_up": 1.0, "loaded": 1.5})
    t.record("candidate", 2.0)
    t.record("spare_unused", 1.0)
    line = worker_stages(since(CpuTally().snapshot(), t.snapshot()))
    assert line == ("candidate 2 (2 read): 3.00 a worker; stages of 1: start 1.00, load 0.50, serve 2.50; "
                    "spare unused 1 (1 read): 1.00 a worker"), line
    assert worker_stages(CpuTally().snapshot()) == "none closed"
    assert cpu_tally.ROLES == ("candidate", "reference", "spare_unused")

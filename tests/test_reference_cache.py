"""Reference timings on disk (pipeline/reference_cache.py): reused across evaluators and processes, re-timed when
the device calibration drifts, never torn by concurrent writers; ``kbench baseline`` precomputes and resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, cpu_evaluator
from kbench_env.config import EvaluatorConfig
from kbench_env.pipeline.reference_cache import ReferenceCache, drifted, resolve_root

CAL = {"bandwidth": 1.0e10, "flops": {"float32": 1.0e11}, "type": "calibration"}
FIELDS = {"task": "level1/relu", "source": "abc", "config": "small", "dtype": "float32", "shapes": [[4, 8]],
          "settings": {"timing": {}, "noise": 0.01}}


def _scaled(cal: dict, f: float) -> dict:
    return {**cal, "bandwidth": cal["bandwidth"] * f, "flops": {k: v * f for k, v in cal["flops"].items()}}


def test_entries_need_a_checked_calibration_and_come_back_as_stored(tmp_path):
    c = ReferenceCache(tmp_path, {"m": 1})
    c.put(FIELDS, {"median_ms": 1.0, "iqr_ms": 0.1})
    assert c.get(FIELDS) is None and c.entries() == 0  # nothing trusted or written before the drift check
    assert c.check(CAL) is False
    times = {"median_ms": 1.0, "iqr_ms": 0.1, "compile_ms": 0.7, "anything_new": [1, 2]}  # opaque: kept whole
    c.put(FIELDS, times)
    again = ReferenceCache(tmp_path, {"m": 1})
    again.check(CAL)
    assert again.get(FIELDS) == times
    assert again.get({**FIELDS, "dtype": "float16"}) is None
    assert ReferenceCache(tmp_path, {"m": 2}).dir != again.dir  # another machine, another folder


def test_drift_beyond_tolerance_invalidates_and_small_noise_does_not(tmp_path):
    c = ReferenceCache(tmp_path, {"m": 1}, tolerance=0.05)
    c.check(CAL)
    c.put(FIELDS, {"median_ms": 1.0, "iqr_ms": 0.1})
    near = ReferenceCache(tmp_path, {"m": 1}, tolerance=0.05)
    assert near.check(_scaled(CAL, 1.03)) is False and near.get(FIELDS) is not None
    far = ReferenceCache(tmp_path, {"m": 1}, tolerance=0.05)
    assert far.check(_scaled(CAL, 0.8)) is True
    assert far.epoch == c.epoch + 1 and far.get(FIELDS) is None
    assert any("bandwidth" in d for d in far.drift) and any("flops[float32]" in d for d in far.drift)
    assert c.get(FIELDS) is not None  # a process keeps the epoch it checked: its own entries, nobody else's
    later = ReferenceCache(tmp_path, {"m": 1}, tolerance=0.05)
    assert later.check(_scaled(CAL, 0.81)) is False and later.epoch == far.epoch  # compared with the new one


def test_drifted_compares_known_figures_only():
    assert drifted(CAL, {**CAL, "busy_s": 9.0}, 0.05) == []
    assert drifted({**CAL, "graph_gap_ms": 0.0010}, {**CAL, "graph_gap_ms": 0.0015}, 0.05) == []  # under 1 us
    assert drifted({**CAL, "graph_gap_ms": 0.002}, {**CAL, "graph_gap_ms": 0.004}, 0.05) != []


def test_unreadable_entry_is_a_miss(tmp_path):
    c = ReferenceCache(tmp_path, {"m": 1})
    c.check(CAL)
    c.put(FIELDS, {"median_ms": 1.0})
    (path,) = (c.dir / "entries").glob("*.json")
    path.write_text('{"epoch": 0, "fields": ')
    assert c.get(FIELDS) is None
    c.put(FIELDS, {"median_ms": 2.0})
    assert c.get(FIELDS) == {"median_ms": 2.0}


def test_an_unwritable_folder_leaves_the_cache_off(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = ReferenceCache(blocker / "ref", {"m": 1})
    assert c.check(CAL) is False and c.epoch is None
    c.put(FIELDS, {"median_ms": 1.0})
    assert c.get(FIELDS) is None


_WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from kbench_env.pipeline.reference_cache import ReferenceCache
    me, root = sys.argv[1], sys.argv[2]
    c = ReferenceCache(root, {{"m": 1}})
    c.check({cal!r})
    for rnd in range(40):
        for k in range(10):
            f = {{"task": f"t{{k}}"}}
            c.put(f, {{"writer": me, "round": rnd, "pad": "x" * 20000, "k": k}})
            got = c.get(f)
            assert got is not None and got["k"] == k and got["writer"] in ("a", "b") and len(got["pad"]) == 20000, got
    print("ok")
""")


def test_two_processes_writing_the_same_keys_never_tear_an_entry(tmp_path):
    script = tmp_path / "w.py"
    script.write_text(_WRITER.format(root=str(ROOT), cal=CAL))
    procs = [subprocess.Popen([sys.executable, str(script), who, str(tmp_path / "c")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    c = ReferenceCache(tmp_path / "c", {"m": 1})
    c.check(CAL)
    assert c.entries() == 10 and not list((c.dir / "entries").glob(".*"))  # no temporary file left behind
    for k in range(10):
        got = c.get({"task": f"t{k}"})
        assert got["round"] == 39 and got["writer"] in ("a", "b")


def test_default_is_on_for_gpus_and_off_on_the_cpu(tmp_path, monkeypatch):
    monkeypatch.delenv("KBENCH_REFERENCE_CACHE", raising=False)
    assert resolve_root(None, "cpu", tmp_path) is None
    assert resolve_root(None, "cuda:0", tmp_path) == tmp_path / "reference"
    assert resolve_root(False, "cuda:0", tmp_path) is None
    # the variable is the setting of a config made without one (config/environ.py); an option given wins
    assert EvaluatorConfig().timing.reference_cache is None
    monkeypatch.setenv("KBENCH_REFERENCE_CACHE", "1")
    assert resolve_root(EvaluatorConfig().timing.reference_cache, "cpu", tmp_path) == tmp_path / "reference"
    monkeypatch.setenv("KBENCH_REFERENCE_CACHE", str(tmp_path / "shared"))
    assert resolve_root(EvaluatorConfig().timing.reference_cache, "cpu", tmp_path) == tmp_path / "shared"
    monkeypatch.setenv("KBENCH_REFERENCE_CACHE", "0")
    assert resolve_root(EvaluatorConfig().timing.reference_cache, "cuda", tmp_path) is None
    assert EvaluatorConfig.from_options(reference_cache=True).timing.reference_cache is True


def _evaluate_relu(ref_root):
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    like = cpu_evaluator()  # the test suite's short timing settings
    like.close()
    ev = Evaluator(device="cpu", limits=like.limits, timing=like.timing, spare_worker=False, reference_cache=ref_root)
    try:
        r = ev.evaluate(resolve_task("level1/relu"), (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text(), seed=3)
        assert r.correct, r.error
        return [c.reference_ms for c in r.configs], ev.baselines
    finally:
        ev.close()


@pytest.mark.slow
def test_evaluators_reuse_stored_references_until_the_calibration_drifts(tmp_path, monkeypatch):
    monkeypatch.setenv("KBENCH_REFERENCE_TOLERANCE", "100")  # this test's drift is forged, not the machine's load
    first, b1 = _evaluate_relu(tmp_path)
    assert b1.timed == len(first) and b1.disk.entries() == len(first)
    second, b2 = _evaluate_relu(tmp_path)
    assert b2.timed == 0 and second == first  # a fresh evaluator timed nothing: the stored figures came back
    cal_path = b2.disk.dir / "calibration.json"
    stored = json.loads(cal_path.read_text())
    stored["calibration"]["bandwidth"] *= 1000  # a machine that has changed: far beyond any tolerance
    cal_path.write_text(json.dumps(stored))
    third, b3 = _evaluate_relu(tmp_path)
    assert b3.disk.drift and b3.disk.epoch == stored["epoch"] + 1
    assert b3.timed == len(first) and third != first  # re-timed


@pytest.mark.slow
def test_kbench_baseline_precomputes_and_a_rerun_times_only_what_is_missing(tmp_path, monkeypatch):
    env = {**os.environ, "KBENCH_REFERENCE_TOLERANCE": "100"}
    cmd = [sys.executable, "-m", "kbench_apps.cli", "baseline", "--suite", "level1/relu,level1/gelu", "--device",
           "cpu", "--timing", "quick", "--cache", str(tmp_path)]

    def run():
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    out = run()
    assert "[1/2] level1/relu: 3 configurations timed, 0 cached" in out
    assert "[2/2] level1/gelu: 2 configurations timed, 0 cached" in out
    (machine,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    entries = sorted((machine / "entries").glob("*.json"))
    assert len(entries) == 5
    # A run killed after some configurations: what it stored stays, the rest is timed on the next run.
    for p in entries[:2]:
        p.unlink()
    out = run()
    assert "done: 2 timed, 3 cached" in out
    assert len(list((machine / "entries").glob("*.json"))) == 5
    # An evaluation with the same settings then times no reference of its own.
    from kbench_apps.runner import TIMING_PRESETS
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    monkeypatch.setenv("KBENCH_REFERENCE_TOLERANCE", "100")
    ev = Evaluator(device="cpu", timing=TIMING_PRESETS["quick"], spare_worker=False, reference_cache=tmp_path)
    try:
        r = ev.evaluate(resolve_task("level1/gelu"), (ROOT / "tasks/solutions/cpu/level1/gelu.py").read_text())
        assert r.correct and r.speedup is not None, r.error
        assert ev.baselines.timed == 0 and ev.baselines.disk.epoch == 0
    finally:
        ev.close()


def test_keys_change_with_what_changes_a_timing():
    from kbench_env.pipeline.baseline import Baselines
    from kbench_env.pipeline.reference_cache import machine_fingerprint
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.tasks.suite import resolve_task

    def fields(timing, cfg_index=0, threads=2, compile_baseline=False):
        b = Baselines("cpu", "cpu", "/nonexistent", Limits(threads=threads), timing, compile_baseline, 1e-2)
        task = resolve_task("level1/relu")
        return b.disk_fields(task, task.configs_for("cpu")[cfg_index])

    base = fields({})
    assert fields({}) == base and base["shapes"]
    assert fields({"min_reps": 5}) != base and fields({}, threads=1) != base
    assert fields({}, compile_baseline=True) != base and fields({}, cfg_index=1) != base
    cpu = machine_fingerprint("cpu", "cpu")
    assert cpu == machine_fingerprint("cpu", "cpu") and cpu != machine_fingerprint("cpu", "triton")
    assert cpu["torch"] and cpu["method"] and "cores" in cpu["model"]["cpu"]


def test_each_gpu_of_a_host_has_its_own_machine_id(monkeypatch):
    """Two cards of one model are two timing machines (an H100 x2 host's calibrations read 9 % apart, and a shared
    cache was invalidated at every switch): the card's UUID is part of the fingerprint, so cuda:0 and cuda:1 get
    different ids, while one card keeps its id."""
    import types

    from kbench_env.pipeline import reference_cache as rc

    cards = {i: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                                      total_memory=85 << 30, clock_rate=1980000, memory_clock_rate=2619000,
                                      memory_bus_width=5120, L2_cache_size=50 << 20, uuid=f"GPU-{i}f6979fb1")
             for i in (0, 1)}
    monkeypatch.setattr(rc.torch.cuda, "get_device_properties", lambda i: cards[i])
    monkeypatch.setattr(rc, "nvidia_driver", lambda: "NVRM version: 580")
    ids = [rc.digest(rc.machine_fingerprint(d, "cuda"))[:16] for d in ("cuda:0", "cuda:1", "cuda:0", "cuda")]
    assert ids[0] != ids[1] and ids[0] == ids[2] == ids[3]
    assert rc.gpu_model("cuda:1")["uuid"] == "GPU-1f6979fb1"

"""bench/timing_log.py: every GPU timing of a bench run as a line of its figures against the reference's bound,
with the task and source of the evaluation that asked for it and what blocks it ran on (a stand-in time_gpu)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbench_env.pipeline import gpu_blocks
from kbench_env.pipeline.gpu_blocks import GpuTiming

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
timing_log = importlib.import_module("timing_log")

REF = {"block": 8, "wall_ms": 2.0, "staged_ms": 0.5, "fixed_ms": 0.4, "method": "cuda-graph"}


@pytest.fixture
def logged(monkeypatch, tmp_path):
    ratios = iter([1.4, 0.9])

    def fake(*a, ahead=None, **k):
        if k.get("fail"):
            raise RuntimeError("the worker broke")
        out = GpuTiming(block=8, method="cuda-graph", walls_ms=[2.0, 2.2, 2.1], device_ms=[1.0, 1.1, 1.0],
                        staged_ms=[0.5, 0.6, 0.5], ratio=next(ratios), set_up_seconds=0.0 if ahead else 0.3)
        out.timing = gpu_blocks.Timing(0.125, 0.01, 24, [0.125])
        return out

    monkeypatch.setattr(gpu_blocks, "time_gpu", fake)
    path = tmp_path / "timings.jsonl"
    undo = timing_log.install(path)
    yield path
    undo()
    assert gpu_blocks.time_gpu is fake


def _stage(ctx, *a, **k):  # a stage's frame holds its StageContext as ``ctx``, as timing.py's do
    return gpu_blocks.time_gpu(*a, **k)


def test_each_timing_is_a_line_with_its_evaluation_and_its_figures(logged):
    ctx = SimpleNamespace(task=SimpleNamespace(name="level1/relu"), result=SimpleNamespace(source_hash="ab12"))
    _stage(ctx, None, "small", reference=REF)
    kept = gpu_blocks.Ahead(None, 8, "cuda-graph", None, REF)  # (the blocks a timing before left set up)
    _stage(ctx, None, "small", reference=REF, ahead=kept)
    first, again = [json.loads(line) for line in logged.read_text().splitlines()]
    assert first["task"] == "level1/relu" and first["source_hash"] == "ab12" and first["config"] == "small"
    assert first["on"] == "new" and again["on"] == "the timing before's blocks"
    assert first["ratio"] == 1.4 and again["ratio"] == 0.9 and first["blocks"] == 3
    assert first["wall_ms"] == 2.1 and first["device_ms"] == 1.0 and first["staged_ms"] == 0.5
    assert first["fixed_ms"] == pytest.approx(0.5) and first["reference"]["fixed_ms"] == 0.4
    assert first["set_up_s"] == 0.3 and again["set_up_s"] == 0.0


def test_a_timing_that_fails_is_logged_and_still_raises(logged):
    with pytest.raises(RuntimeError, match="broke"):
        gpu_blocks.time_gpu(None, "odd", reference=REF, fail=True)
    (row,) = [json.loads(line) for line in logged.read_text().splitlines()]
    assert row["error"] == "RuntimeError" and row["config"] == "odd" and row["task"] is None

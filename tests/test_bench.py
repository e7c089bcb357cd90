"""The throughput benchmark runs end to end on the CPU (small): naive and kbench side by side."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_throughput_benchmark_small(tmp_path):
    out = tmp_path / "tp.md"
    p = subprocess.run([sys.executable, str(ROOT / "bench/throughput.py"), "--device", "cpu", "--n", "2",
                        "--naive", "1", "--cold", "1", "--out", str(out)], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = out.read_text()
    assert "throughput ratio" in text and "cold step latency" in text and "env overhead" in text
    assert (tmp_path / "tp.jsonl").exists()


@pytest.mark.slow
def test_rl_batch_benchmark_small(tmp_path):
    """A GRPO-like batch, tiny: distinct candidates evaluated cold then warm, with the figures an RL user reads."""
    import json

    out = tmp_path / "rl.md"
    p = subprocess.run([sys.executable, str(ROOT / "bench/rl_batch.py"), "--device", "cpu", "--tasks", "1",
                        "--per-task", "2", "--timing", "quick", "--reference-cache", "on", "--cache-dir",
                        str(tmp_path / "cache"), "--serve", "--out", str(out)], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = out.read_text()
    for figure in ("candidates per minute", "step latency p95", "build CPU-seconds per candidate",
                   "device hold per candidate"):
        assert figure in text
    lines = [json.loads(x) for x in (tmp_path / "rl.jsonl").read_text().splitlines()]
    rows = [r for r in lines if "summary" not in r]
    summary = {r["summary"]["pass"]: r["summary"] for r in lines if "summary" in r}
    assert [r["pass"] for r in rows] == ["cold"] * 2 + ["warm"] * 2
    assert all(r["correct"] and not r["flags"] for r in rows), rows
    assert len({r["candidate"] for r in rows}) == 2 and len({r["task"] for r in rows}) == 1  # two distinct kernels
    assert summary["cold"]["build_cpu_s"] > summary["warm"]["build_cpu_s"]  # the warm pass finds its builds cached
    assert list((tmp_path / "cache" / "reference").glob("*/entries/*.json"))  # references kept for the warm pass
    assert {r["device"] for r in rows} == {"cpu"}
    served = summary["warm, served"]  # the same batch through kbench serve's /batch, same caches
    assert served["candidates"] == 2 and served["correct"] == 2
    assert "Through HTTP (`kbench serve`" in text

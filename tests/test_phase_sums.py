"""bench/phase_sums.py: a pass's phases summed over its candidates, and the hold log cut into steps with the time
each held the device alone and only shared (the stretches that kept timings waiting)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from conftest import hold_row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
phase_sums = importlib.import_module("phase_sums")

_hold = hold_row


def test_a_pass_sums_each_phase_over_its_candidates(tmp_path):
    rows = [{"run": {}}, {"pass": "train 1", "phases": {"check": 1.0, "timing": 0.5}},
            {"pass": "train 1", "phases": {"check": 3.0}}, {"pass": "train 2", "phases": {"check": 2.0}}]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    got = phase_sums.phase_sums(phase_sums.read_rows(path))
    assert list(got) == ["train 1", "train 2"] and got["train 1"]["candidates"] == 2
    assert got["train 1"]["phases"]["check"] == {"n": 2, "sum": 4.0, "median": 2.0, "max": 3.0}
    assert list(got["train 1"]["phases"]) == ["check", "timing"]  # largest sum first
    assert got["train 2"]["phases"] == {"check": {"n": 1, "sum": 2.0, "median": 2.0, "max": 2.0}}


def test_the_hold_log_is_cut_into_steps_with_their_shared_only_stretches():
    holds = [_hold("shared", 0, 3), _hold("exclusive", 3, 4), _hold("shared", 4, 4.5), _hold("exclusive", 4.5, 6),
             _hold("wait", 0, 6, thread=2),  # a wait holds nothing
             # the next step, 10 s on: a long shared stretch first, a shared hold partly under an exclusive one
             _hold("shared", 16, 21), _hold("exclusive", 21, 22), _hold("shared", 21.5, 23)]
    first, second = phase_sums.stretches(holds, gap_s=2.0, top=2)
    assert first["start_s"] == 0 and first["span_s"] == pytest.approx(6.0)
    assert first["alone_s"] == pytest.approx(2.5) and first["shared_only_s"] == pytest.approx(3.5)
    assert first["shared_only_stretches"] == 2 and first["longest_shared_only"] == [(0.0, 3.0), (4.0, 0.5)]
    assert second["start_s"] == pytest.approx(16.0) and second["span_s"] == pytest.approx(7.0)
    assert second["alone_s"] == pytest.approx(1.0) and second["shared_only_s"] == pytest.approx(6.0)
    assert second["longest_shared_only"] == [(0.0, 5.0), (6.0, 1.0)]
    assert phase_sums.stretches([_hold("wait", 0, 1)]) == []


def test_the_command_prints_a_pass_and_its_steps(tmp_path, capsys):
    rows, holds = tmp_path / "rows.jsonl", tmp_path / "holds.jsonl"
    rows.write_text(json.dumps({"pass": "train 2", "phases": {"check": 1.5}}) + "\n")
    holds.write_text("\n".join(json.dumps(h) for h in (_hold("shared", 0, 2), _hold("exclusive", 2, 3))) + "\n")
    assert phase_sums.main([str(rows), "--holds", str(holds), "--pass", "train 2"]) == 0
    out = capsys.readouterr().out
    assert "train 2: 1 candidates" in out and "sum=    1.500" in out
    assert "held alone 1.00 s, held only shared 2.00 s in 1" in out


def test_the_time_between_timings_is_split_by_when_the_next_one_asked():
    holds = [_hold("exclusive", 0, 1, thread=1),
             _hold("wait", 2.5, 3, thread=2), _hold("exclusive", 3, 4, thread=2),  # asked 1.5 s after, drained 0.5
             _hold("wait", 3.5, 6, thread=3), _hold("exclusive", 6, 7, thread=3),  # asked during the last: 2 s drained
             _hold("exclusive", 8, 9, thread=4),  # no wait logged (the trusted side's own hold)
             _hold("shared", 1, 3), _hold("shared", 4, 6), _hold("shared", 7, 8)]
    (s,) = phase_sums.stretches(holds, gap_s=2.0)
    assert s["gaps"] == 3 and s["between_s"] == pytest.approx(5.0)
    assert s["not_asked_s"] == pytest.approx(1.5) and s["draining_s"] == pytest.approx(2.5)
    assert s["unmatched_s"] == pytest.approx(1.0)

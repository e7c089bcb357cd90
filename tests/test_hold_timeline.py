"""bench/hold_timeline.py: a step of the device-hold log drawn as lanes: the device (held alone, held only shared)
and, per thread that held it alone, its wait from when it asked and its hold."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from conftest import hold_row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
hold_timeline = importlib.import_module("hold_timeline")

S = 1_000_000_000  # ns a second
_hold = hold_row


HOLDS = [_hold("shared", 0, 2, thread=9), _hold("exclusive", 2, 3, thread=1),
         _hold("wait", 2.5, 3, thread=2), _hold("exclusive", 3, 4, thread=2),
         _hold("shared", 4, 5, thread=9), _hold("exclusive", 6, 7, thread=3),  # asked at once: no wait logged
         _hold("exclusive", 20, 21, thread=1)]  # the next step


def test_a_step_is_drawn_as_the_device_and_each_timed_thread():
    bounds = hold_timeline.stretch_bounds(HOLDS, gap_s=2.0)
    assert bounds == [(0, 7 * S), (20 * S, 21 * S)]
    got = hold_timeline.lanes(HOLDS, *bounds[0])
    assert got["span_s"] == pytest.approx(7.0)
    assert got["device"]["alone"] == [(2.0, 4.0), (6.0, 7.0)]
    assert got["device"]["shared_only"] == [(0.0, 2.0), (4.0, 5.0)]
    assert [lane["holds"] for lane in got["threads"]] == [[(2.0, 3.0)], [(3.0, 4.0)], [(6.0, 7.0)]]
    assert [lane["waits"] for lane in got["threads"]] == [[], [(2.5, 3.0)], []]


def test_the_command_writes_a_png_of_the_stretch_asked(tmp_path, capsys):
    log, png = tmp_path / "holds.jsonl", tmp_path / "step.png"
    log.write_text("\n".join(json.dumps(h) for h in HOLDS) + "\n{torn")
    assert hold_timeline.main([str(log), "--stretch", "1", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "stretch 1 of 2" in capsys.readouterr().out
    assert hold_timeline.main([str(log), "--stretch", "3", "--out", str(png)]) == 1  # there are two

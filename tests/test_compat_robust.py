"""bench/compat_robust.py end to end on a small tree in robust-kbench's layout: loading figures (a broken folder and a
random reference skipped with their reasons), a record per task, the Markdown record, and a second run that takes
its results from the JSONL file instead of evaluating again."""

from __future__ import annotations

import json

from bench import compat_robust
from test_robust_kbench_cpu import DROPOUT, HEADS, LINEAR, LINEAR_CONFIG, write


def test_sweep_records_every_task_and_resumes(tmp_path, capsys):
    checkout = tmp_path / "robust-kbench"
    tasks = checkout / "tasks"
    write(tasks / "kernelbench" / "level_1" / "task_1", LINEAR, LINEAR, LINEAR_CONFIG)
    write(tasks / "kernelbench" / "level_2" / "task_1", HEADS)
    write(tasks / "dropout", DROPOUT)
    write(tasks / "broken", LINEAR.replace("import torch\n", "import no_such_module_rk\n", 1))
    jsonl, record = tmp_path / "sweep.jsonl", tmp_path / "sweep.md"
    args = ["--robust-kbench", str(checkout), "--jsonl", str(jsonl), "--record", str(record)]
    assert compat_robust.main(args) == 0, capsys.readouterr().out[-3000:]
    recs = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["task"] for r in recs] == ["robust-kbench/kernelbench/level_1/task_1/forward",
                                         "robust-kbench/kernelbench/level_1/task_1/backward",
                                         "robust-kbench/kernelbench/level_2/task_1/forward"]
    for r in recs:
        assert r["reference_ok"] and r["correct"] and len(r["references"]) == len(r["cpu_configs"]) == 2
        assert [f.split(":")[0] for f in r["integrity_flags"]] == ["pytorch_compute_in_forward"]  # strict rules
    text = record.read_text()
    assert "4 task folders, 3 tasks loaded" in text and "names unique: True" in text
    assert "**3/3 build their reference" in text and "3/3 honest candidates correct" in text
    assert "`broken`: TaskError" in text and "no_such_module_rk" in text
    assert "`dropout`: TaskError" in text and "not deterministic" in text
    capsys.readouterr()
    assert compat_robust.main(args + ["--only", "level_1"]) == 0
    assert "2 already in" in capsys.readouterr().out  # nothing evaluated again
    assert len(jsonl.read_text().splitlines()) == 3

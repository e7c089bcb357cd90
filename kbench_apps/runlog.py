"""The results file of a run: append-only JSONL, one record per line, flushed and fsynced as it is written.

A killed run loses nothing it finished: on restart, ``done()`` tells which (agent, task) pairs are complete and
the run skips them. Records are plain dicts: ``{"kind": "attempt" | "task_done", "agent", "task", ...}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class RunLog:
    def __init__(self, path: str | Path, fresh: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fresh and self.path.exists():
            self.path.unlink()

    def records(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a kill: everything before it is kept
                    continue
        return out

    def done(self) -> dict:
        """``{(agent, task): task_done record}`` for every finished pair."""
        return {(r["agent"], r["task"]): r for r in self.records() if r.get("kind") == "task_done"}

    def append(self, record: dict) -> None:
        line = json.dumps(record, default=str)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

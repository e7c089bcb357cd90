"""The worker's report channel, read on the trusted side: separate from the protocol, it carries the worker's
confinement status (sent before any candidate code ran), then every attempt the audit hook refused. Read without
ever waiting and a bounded number of reports at a time, so a candidate that floods or breaks it cannot hold the
caller; a malformed report or a channel closed while the worker runs is itself reported."""

from __future__ import annotations

import json
import time
from typing import Callable

from kbench_env.protocol import wire

_MAX_REPORT_BYTES = 1 << 16  # one sandbox report (the confinement sends a few hundred bytes)
_MAX_REPORTS_PER_DRAIN = 256
_MAX_VIOLATIONS = 64


class ReportChannel:
    """The read end of one worker's report channel (a multiprocessing connection) and what it has said."""

    def __init__(self, conn):
        self.conn = conn  # None once closed
        self._reader = wire.FrameReader(conn.fileno(), _MAX_REPORT_BYTES)
        self.protections: dict = {}  # the worker's confinement status (confinement.apply), once it has reported
        self._violations: list = []
        self._closed_early = False

    def drain(self, worker_running: Callable[[], bool]) -> None:
        """Read what is there now: the status (first), then the attempts the audit hook refused. At the channel's
        end, ``worker_running()`` says whether the worker still runs (then the candidate closed the channel)."""
        r = self.conn
        if r is None:
            return
        try:
            # What is there now, never waiting (a report begun and not finished stays for the next call), and at
            # most so many reports a call: a candidate that floods the channel cannot hold the caller here.
            for _ in range(_MAX_REPORTS_PER_DRAIN):
                data = self._reader.read(time.monotonic())
                if data is None:
                    break
                try:
                    msg = json.loads(bytes(data))
                except ValueError:
                    msg = {"kind": "violation", "what": "sent an unreadable sandbox report"}
                if not isinstance(msg, dict):
                    continue
                if msg.get("kind") == "status" and not self.protections:
                    self.protections = msg
                elif msg.get("kind") == "violation" and len(self._violations) < _MAX_VIOLATIONS:
                    self._violations.append(str(msg.get("what"))[:300])
        except wire.FrameError as exc:  # only the candidate writes such a thing: the channel is closed to it
            self._violations.append(f"sent a malformed sandbox report ({exc})"[:300])
            self.conn = None
            r.close()
        except (EOFError, OSError):
            # The channel closed. At exit that is normal; while the worker still runs, the candidate closed it.
            if worker_running():
                self._closed_early = True
            self.conn = None
            r.close()

    def violations(self) -> list[str]:
        """What the candidate tried that the sandbox refused, as read so far."""
        out = list(self._violations)
        if self._closed_early:
            out.append("closed the sandbox's report channel")
        return out

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

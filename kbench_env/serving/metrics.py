"""The server's counters and their Prometheus text exposition (``GET /metrics``): queue depth, evaluations
running, evaluations per minute, failures by stage, refusals by reason, sessions open."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque


class Metrics:
    def __init__(self):
        self.evaluations = 0
        self.failures: Counter = Counter()  # by the stage an incorrect evaluation failed at
        self.errors: Counter = Counter()  # evaluations that raised or timed out, by kind
        self.refused: Counter = Counter()  # requests refused, by HTTP status
        self.requests: Counter = Counter()  # by route
        self._recent: deque = deque()  # end times of evaluations of the last minute
        self._lock = threading.Lock()

    def evaluated(self, result: dict) -> None:
        """Count one finished evaluation (an EvalResult as a dict)."""
        now = time.monotonic()
        with self._lock:
            self.evaluations += 1
            self._recent.append(now)
            if not result.get("correct"):
                self.failures[result.get("error_stage") or result.get("stage") or "unknown"] += 1

    def per_minute(self) -> int:
        cutoff = time.monotonic() - 60.0
        with self._lock:
            while self._recent and self._recent[0] < cutoff:
                self._recent.popleft()
            return len(self._recent)

    def render(self, *, queued: int, running: int, capacity: int, sessions: int) -> str:
        lines = [
            "# HELP kbench_queue_depth Evaluations admitted and waiting for a worker.",
            "# TYPE kbench_queue_depth gauge", f"kbench_queue_depth {queued}",
            "# HELP kbench_running Evaluations running now.", "# TYPE kbench_running gauge", f"kbench_running {running}",
            "# HELP kbench_capacity Evaluations the server holds at once (workers + queue).",
            "# TYPE kbench_capacity gauge", f"kbench_capacity {capacity}",
            "# HELP kbench_sessions Episodes (sessions) open.", "# TYPE kbench_sessions gauge",
            f"kbench_sessions {sessions}",
            "# HELP kbench_evaluations_per_minute Evaluations finished in the last 60 s.",
            "# TYPE kbench_evaluations_per_minute gauge", f"kbench_evaluations_per_minute {self.per_minute()}",
            "# HELP kbench_evaluations_total Evaluations finished.", "# TYPE kbench_evaluations_total counter",
            f"kbench_evaluations_total {self.evaluations}",
        ]
        with self._lock:
            series = [("kbench_failures_total", "Incorrect evaluations by the stage they failed at.", "stage",
                       self.failures),
                      ("kbench_errors_total", "Evaluations that raised or timed out.", "kind", self.errors),
                      ("kbench_refused_total", "Requests refused, by HTTP status.", "status", self.refused),
                      ("kbench_requests_total", "Requests by route.", "route", self.requests)]
            for name, help_, label, counter in series:
                lines += [f"# HELP {name} {help_}", f"# TYPE {name} counter"]
                lines += [f'{name}{{{label}="{key}"}} {n}' for key, n in sorted(counter.items())]
        return "\n".join(lines) + "\n"

"""The other evaluations' workers stopped while one evaluation times on the CPU.

Evaluations in flight in one process (``evaluate_many``, a server's batch) each hold a worker; only one at a time
holds the CPU device (device_hold.py: one lock per process for the CPU, whichever Evaluator), so the others are
building, loading or waiting for the device. A candidate's code may still run in them (threads it started when its
module loaded), and on a machine with fewer free cores than evaluations in flight that would be timed as part of
the holder's blocks. While the holder times, ``LIVE.others_stopped`` keeps every other registered worker frozen
(sandbox/memory.py's ``Freezer``, the stop the timing uses on its own workers), a worker registered meanwhile
included, and resumes them after: timing takes the cores to itself and the others wait. Their owners only see a
longer build or load (a stage timeout measures wall time: a timing lasts seconds, those timeouts minutes).

Workers of other processes are not seen: two kbench processes on one machine still time under each other's load
(paired timing, paired.py, puts that load on both sides of each ratio).
"""

from __future__ import annotations

import contextlib
import logging
import threading

log = logging.getLogger("kbench.quiet")


class LiveWorkers:
    """The candidate workers of this process's evaluations, and the stopping of all but a timing's own."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live: set = set()
        self._keep: tuple | None = None  # the timing's own workers while one holds ``others_stopped``
        self._stopped: list = []
        self.stops = 0  # workers stopped so far (for tests and benches)

    @contextlib.contextmanager
    def member(self, worker):
        """``worker`` is registered while the block runs (stopped at once if a timing is under way)."""
        with self._lock:
            self._live.add(worker)
            if self._keep is not None and worker not in self._keep:
                self._stop(worker)
        try:
            yield worker
        finally:
            with self._lock:
                self._live.discard(worker)
                if worker in self._stopped:
                    self._stopped.remove(worker)
                    _resume(worker)

    @contextlib.contextmanager
    def others_stopped(self, keep: list):
        """Every registered worker but those in ``keep`` frozen while the block runs. The caller holds the CPU
        device (one holder at a time)."""
        with self._lock:
            self._keep = tuple(keep)
            for w in list(self._live):
                if w not in self._keep:
                    self._stop(w)
        try:
            yield
        finally:
            with self._lock:
                for w in self._stopped:
                    _resume(w)
                self._stopped, self._keep = [], None

    def _stop(self, worker) -> None:
        try:
            freezer = worker.hands()[0]
            if freezer.frozen:
                return
            self._stopped.append(worker)  # first: a stop that fails half-way is resumed all the same
            self.stops += 1
            freezer.freeze()
        except Exception as exc:  # noqa: BLE001 - a worker that ended or will not stop is left as it is
            log.warning("could not stop another evaluation's worker while timing: %s", exc)


def _resume(worker) -> None:
    try:
        worker.hands()[0].thaw()
    except Exception:  # noqa: BLE001 - it ended while stopped (killed by its owner): nothing to resume
        pass


#: This process's registry (the CPU device is one per process).
LIVE = LiveWorkers()

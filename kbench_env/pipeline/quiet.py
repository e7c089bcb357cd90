"""The other evaluations' workers stopped while one evaluation times on the CPU.

Evaluations in flight in one process (``evaluate_many``, a server's batch) each hold a worker; only one at a time
holds the CPU device (device_hold.py: one lock per process for the CPU, whichever Evaluator), so the others are
building, loading or waiting for the device. A candidate's code may still run in them (threads it started when its
module loaded), and on a machine with fewer free cores than evaluations in flight that would be timed as part of
the holder's blocks. While the holder times, ``LIVE.others_stopped`` keeps every other registered worker frozen
(sandbox/memory.py's ``Freezer``, the stop the timing uses on its own workers), a worker registered meanwhile
included (a worker's start and its registration wait for the timing to end: ``starting``), and resumes them after:
timing takes the cores to itself and the others wait. Their owners only see a longer build or load (a stage
timeout measures wall time: a timing lasts seconds, those timeouts minutes).

Workers of other processes are not seen: two kbench processes on one machine still time under each other's load
(paired timing, paired.py, puts that load on both sides of each ratio).
"""

from __future__ import annotations

import contextlib
import logging
import threading

log = logging.getLogger("kbench.quiet")


#: Seconds a worker's start waits for a timing under way to end, and a timing for the starts under way, before
#: going on regardless (a timing's stage lasts seconds, a start a fraction of one: neither is reached but in a fault).
START_WAIT_S = 300.0


class LiveWorkers:
    """The candidate workers of this process's evaluations, and the stopping of all but a timing's own."""

    def __init__(self):
        self._lock = threading.Condition()
        self._starting = 0  # workers being started (``starting``): not registered yet, so not stoppable
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
    def starting(self):
        """Around the start of a worker and its registration (``member``): a worker's process runs from its start,
        before it can be registered and so stopped, so a start waits while a timing is under way and a timing
        waits for the starts under way (each at most START_WAIT_S)."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._keep is None, START_WAIT_S):
                log.warning("a worker starts while another evaluation times (waited %.0f s)", START_WAIT_S)
            self._starting += 1
        try:
            yield
        finally:
            with self._lock:
                self._starting -= 1
                self._lock.notify_all()

    @contextlib.contextmanager
    def others_stopped(self, keep: list):
        """Every registered worker but those in ``keep`` frozen while the block runs, once no worker is being
        started (``starting``). The caller holds the CPU device (one holder at a time)."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._starting == 0, START_WAIT_S):
                log.warning("timing while a worker is being started (waited %.0f s)", START_WAIT_S)
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
                self._lock.notify_all()

    def _stop(self, worker) -> None:
        try:
            freezer = worker.hands()[0]
            if freezer.frozen:
                return
            self._stopped.append(worker)  # first: a stop that fails half-way is resumed all the same
            self.stops += 1
            freezer.freeze()
            freezer.settle()
        except Exception as exc:  # noqa: BLE001 - a worker that ended or will not stop is left as it is
            log.warning("could not stop another evaluation's worker while timing: %s", exc)


def _resume(worker) -> None:
    try:
        worker.hands()[0].thaw()
    except Exception:  # noqa: BLE001 - it ended while stopped (killed by its owner): nothing to resume
        pass


#: This process's registry (the CPU device is one per process).
LIVE = LiveWorkers()

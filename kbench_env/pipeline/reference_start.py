"""A task's reference worker started while the candidate builds, for the reference's preparation and timing to take.

On a GPU under shared checks, ``Baselines.prepare`` runs a task's reference configurations inside the candidate's
shared hold of the device (device_hold.py), so that the exclusive hold only times. Starting the reference's worker
there too (a process, torch's import, the device's context: seconds, more on a host whose cores are building) would
keep one of the few shared places on the device and one of the slots between the checks and the timing while the
device has nothing of it to run. So it starts beside the build, as the candidate's own worker does (spare workers,
or ``live_worker``), and ``prepare`` or ``times`` takes it when it comes (``Baselines.start`` and ``_new_worker``).
"""

from __future__ import annotations

import threading

#: Seconds past a start's own deadline (the worker's load timeout) that a taker waits for its thread at most.
JOIN_GRACE_S = 30.0


class Started:
    """One reference worker being started in a thread of its own by ``make`` (a loaded Worker, or an exception
    within ``timeout`` seconds). ``take`` waits for it and hands the worker over once; ``close`` closes it if
    nobody took it, now or when its start ends."""

    def __init__(self, make, timeout: float):
        self.timeout = timeout
        self._lock = threading.Lock()
        self._worker = None
        self._dropped = False  # taken or closed: a worker that comes later is closed by the thread
        self._thread = threading.Thread(target=self._run, args=(make,), daemon=True, name="kbench-reference-start")
        self._thread.start()

    def _run(self, make) -> None:
        try:
            w = make()
        except Exception:  # noqa: BLE001 - the taker starts a worker of its own, which says what failed
            return
        with self._lock:
            if not self._dropped:
                self._worker = w
                return
        w.close()

    def take(self):
        """The started worker (waiting for its start, at most its timeout and JOIN_GRACE_S), or None where it failed
        or is late: the caller then starts one itself."""
        self._thread.join(self.timeout + JOIN_GRACE_S)
        with self._lock:
            w, self._worker, self._dropped = self._worker, None, True
        return w

    def close(self) -> None:
        """Close the worker if it was started and not taken (or have the thread close it when it comes)."""
        with self._lock:
            w, self._worker, self._dropped = self._worker, None, True
        if w is not None:
            w.close()

"""Clean-up after workers, in the background and in order: scratch directories removed, a closed worker's wait for its processes and its release, the build cache brought back under its bound.
``flush_cleanups`` waits for all of it (tests, and at exit)."""

from __future__ import annotations

import atexit
import threading
import time

from kbench_env.builder.cache import remove_tree


class _Reaper:
    """One background thread that runs the clean-ups submitted to it, in order; it leaves when idle."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: list = []
        self._wake = threading.Condition(self._lock)
        self._thread = None

    def submit(self, path) -> None:
        """A directory to remove, or a clean-up function to run, in the background, in order."""
        with self._lock:
            self._pending.append(path)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kbench-reaper", daemon=True)
                self._thread.start()
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    if not self._wake.wait(timeout=30):
                        self._thread = None
                        return
                item = self._pending[0]
            if callable(item):  # a closed worker's wait for its processes, then its release (Worker.close)
                try:
                    item()
                except Exception:  # noqa: BLE001 - one worker's clean-up must not stop the others'
                    pass
            else:
                remove_tree(item)
            with self._lock:
                self._pending.pop(0)
                self._wake.notify_all()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted directory is gone (True) or the timeout passes (False)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(timeout=left)
        return True


REAPER = _Reaper()
flush_cleanups = REAPER.flush
atexit.register(REAPER.flush, 10.0)

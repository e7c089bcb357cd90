"""A device lock with shared and exclusive holders (the Evaluator's ``shared_checks`` option): correctness runs
may share the device with each other, timing has it to itself.

Shared holders (candidates' correctness checks) overlap each other, at most ``max_shared`` at once per lock (one
per Evaluator), which bounds the device memory they take together; the trusted side's shared holders (a task's
reference run ahead of its timing, ``acquire(shared=True, trusted=True)``) have a cap of their own
(``max_trusted``), so that they neither wait for the candidates' places nor take them; an exclusive holder
(timing, reference timing, plausibility) overlaps nobody, in this process (threads) and in others on the same
lock file (``flock``).

``flock`` on one open file converts its lock rather than stacking it, so the threads of this process agree among
themselves first and the file lock follows: the first shared holder takes ``LOCK_SH`` and the last one out drops
it; an exclusive holder waits for this process's shared holders to leave, then takes ``LOCK_EX``. In this process
a waiting exclusive holder stops new shared ones (writer preference), so timing is not starved by a stream of
checks.

Between processes the same preference goes through a second file, ``<lock>.gate``: an exclusive holder takes it
(``LOCK_EX``) while it waits for the lock file and drops it once it has the lock; a new shared holder first looks
whether the gate is free (a non-blocking ``LOCK_SH`` taken and dropped at once, on a descriptor of its own) and
waits while it is not. Without the gate a process whose shared holders follow one another keeps ``LOCK_SH`` for
as long as they keep coming (its threads hand the file lock on among themselves), and another process's timing
waits for all of them: a writer starved for as long as the other process has checks to run.
"""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

from kbench_env.machine import interpreter
from kbench_env.machine.device_lock import DeviceLock, flock_by, log_hold, open_shared_file

#: Shared holders at once per lock (each Evaluator has its own), by default: the correctness runs that may be on
#: the device together.
SHARED_CAP = 4
#: The trusted side's shared holders at once per lock: references run ahead of their timing (a torch.compile each,
#: mostly the host's work), which a fresh machine's first batch has one of per task, all while its candidates build.
TRUSTED_CAP = 8
#: How often a shared holder held back by another process's waiting exclusive holder looks at the gate again
#: (seconds): the other process cannot wake it.
GATE_POLL_S = 0.005
#: How often ``acquire_idle`` looks at another process's holders (seconds): it goes after everyone, so it need not
#: look as often, and a fresh batch has one such waiter per reference run ahead, for the whole of its builds.
IDLE_POLL_S = 0.05


class SharedDeviceLock(DeviceLock):
    """``acquire(shared=True)`` for a shared hold, ``acquire()`` (or ``with lock:``) for an exclusive one;
    ``release()`` ends whichever this holder has.

    ``path`` is the lock file or a callable returning it, as for DeviceLock; None keeps the lock to this process's
    threads (the CPU device), with the same semantics. ``held_seconds`` is the time this process held the lock at
    all (shared or exclusive; overlapping holds count once).
    """

    def __init__(self, path=None, max_shared: int | None = None):
        super().__init__(path)
        max_shared = SHARED_CAP if max_shared is None else max_shared  # read now: a bench run may set it
        if max_shared < 1:
            raise ValueError(f"SharedDeviceLock: max_shared must be at least 1, not {max_shared}")
        self._failed = path is None  # no lock file: this process's threads only
        self.max_shared = max_shared
        self.max_trusted = TRUSTED_CAP
        self._cond = threading.Condition()
        self._shared = 0  # this process's shared holders
        self._trusted = 0  # of them, the trusted side's (their own cap)
        self._exclusive = False  # this process's exclusive holder (also while it waits for the file lock)
        self._writers_waiting = 0
        self._untrusted_waiting = 0  # candidates' shared holders waiting (``acquire_idle`` goes after them)
        self._file_busy = False  # the first shared holder is taking LOCK_SH: the others wait for it
        self._held_since: float | None = None
        self.held_seconds = 0.0
        self._gate: tuple[int, int] | None = None  # (the exclusive holders' descriptor, the shared holders' probe)
        self._gate_failed = False

    def acquire(self, blocking: bool = True, shared: bool = False, trusted: bool = False,
                timeout: float | None = None) -> bool:
        """A shared or exclusive hold; False when not ``blocking`` and it cannot be had now, or when it cannot be
        had within ``timeout`` seconds (None: no deadline, for callers that bound the wait themselves)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        return (self._acquire_shared(blocking, trusted, deadline) if shared
                else self._acquire_exclusive(blocking, deadline))

    def acquire_idle(self, timeout: float, before_trusted: bool = False) -> bool:
        """An exclusive hold taken only while nobody holds the lock or waits for it (in this process; another
        process's holders: its file lock tried, never waited for), by ``timeout`` seconds or not at all (False).
        For the trusted side's work that a candidate's own stage would do anyway when it comes (a reference timed
        ahead): it never holds back a candidate's shared holder nor goes before a waiting exclusive one.
        ``before_trusted``: the trusted side's own shared holders (references run ahead) are not waited out as if
        they were candidates': it waits for them to leave as a waiting writer, holding new shared holders back,
        but steps out of that wait as soon as a candidate's shared holder or a timing waits (``_ahead_wait``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                busy = self._exclusive or self._file_busy or self._writers_waiting or self._untrusted_waiting
                if not busy and self._gate_open():
                    if self._shared and before_trusted and self._shared == self._trusted:
                        self._ahead_wait(deadline)
                        if time.monotonic() < deadline:
                            continue  # (the condition still held: nobody came in between)
                        return False
                    if not self._shared:
                        self._exclusive = True  # this process's others wait while the file lock is tried
                        if self._lock_file(fcntl.LOCK_EX, False):
                            self._held_since, self._since_ns = time.monotonic(), time.monotonic_ns()
                            interpreter.hold_started()
                            return True
                        self._exclusive = False
                        self._cond.notify_all()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, IDLE_POLL_S if self._gate is not None else left))  # (this process's: told)

    def _ahead_wait(self, deadline: float) -> None:
        """``acquire_idle(before_trusted=True)``'s wait for the trusted side's shared holders to leave, as a waiting
        writer (new shared holders wait), until they have, a candidate's shared holder or another timing waits
        too (it goes first: this one steps back), or ``deadline`` (called and left with the condition held)."""
        self._writers_waiting += 1
        try:
            while self._shared and not self._untrusted_waiting and self._writers_waiting == 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(min(left, IDLE_POLL_S))
        finally:
            self._writers_waiting -= 1
            self._cond.notify_all()

    def release(self, trusted: bool = False) -> None:
        """End a hold: the exclusive one, else a shared one (``trusted``: one taken with ``trusted``)."""
        with self._cond:
            mode = "exclusive" if self._exclusive else "shared"
            if self._exclusive:
                self._exclusive = False
                interpreter.hold_ended()
            elif (self._trusted if trusted else self._shared - self._trusted) > 0:
                self._shared -= 1
                self._trusted -= trusted
            else:
                raise RuntimeError("SharedDeviceLock.release: the lock is not held")
            if not (self._exclusive or self._shared):
                log_hold(self._file, mode, self._since_ns)  # the process's whole hold, before its unlock
                self._unlock_file()
                self.held_seconds += time.monotonic() - self._held_since
                self._held_since = None
            self._cond.notify_all()

    def exclusive_waiting(self) -> bool:
        """Whether an exclusive holder (a timing) waits for this lock, in this process or another: a shared holder
        between two steps of its work may then step aside (``release``, then ``acquire(shared=True)``)."""
        with self._cond:
            return bool(self._writers_waiting or self._exclusive) or not self._gate_open()

    def waited_for(self) -> bool:
        """Whether anyone waits for this lock: a timing (this process's, or another's at the gate) or a candidate's
        shared holder of this process; a holder whose work is not a candidate's may then give way."""
        with self._cond:
            return bool(self._writers_waiting or self._untrusted_waiting) or not self._gate_open()

    def _acquire_exclusive(self, blocking: bool, deadline: float | None = None) -> bool:
        with self._cond:
            self._writers_waiting += 1
            self._cond.notify_all()  # a reference's timing waiting ahead (``_ahead_wait``) steps back for it
            try:
                if not self._wait(lambda: not (self._exclusive or self._shared or self._file_busy), blocking,
                                  deadline):
                    return False
            finally:
                self._writers_waiting -= 1
                self._cond.notify_all()  # shared holders held back by this waiter look again
            self._exclusive = True
        gated = self._close_gate(blocking, deadline)
        ok = gated and self._lock_file(fcntl.LOCK_EX, blocking, deadline)
        if gated:
            self._open_gate()
        if ok:
            self._held_since, self._since_ns = time.monotonic(), time.monotonic_ns()  # no other holder now
            interpreter.hold_started()
            return True
        with self._cond:
            self._exclusive = False
            self._cond.notify_all()
        return False

    def _acquire_shared(self, blocking: bool, trusted: bool = False, deadline: float | None = None) -> bool:
        def may_enter():  # (the gate last: its probe is two system calls)
            places = self._trusted < self.max_trusted if trusted else self._shared - self._trusted < self.max_shared
            return (not (self._exclusive or self._writers_waiting or self._file_busy)
                    and places and self._gate_open())

        with self._cond:
            self._untrusted_waiting += not trusted  # (seen by others only while it waits)
            if not trusted and self._writers_waiting:
                self._cond.notify_all()  # a reference's timing waiting ahead (``_ahead_wait``) steps back for it
            try:
                if not self._wait(may_enter, blocking, deadline):
                    return False
            finally:
                self._untrusted_waiting -= not trusted
            if self._shared:  # the process holds LOCK_SH already
                self._shared += 1
                self._trusted += trusted
                return True
            self._file_busy = True
        ok = self._lock_file(fcntl.LOCK_SH, blocking, deadline)  # outside the condition: another process's LOCK_EX
        with self._cond:
            self._file_busy = False
            if ok:
                self._shared, self._held_since, self._since_ns = 1, time.monotonic(), time.monotonic_ns()
                self._trusted = int(trusted)
            self._cond.notify_all()
        return ok

    def _wait(self, predicate, blocking: bool, deadline: float | None = None) -> bool:
        if not blocking:
            return predicate()
        while not predicate():  # with a gate, also woken to look again: another process's holder cannot wake it
            poll = GATE_POLL_S if self._gate is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                poll = left if poll is None else min(poll, left)
            self._cond.wait(poll)
        return True

    # ------------------------------------------------------------------ the gate between processes
    def _gate_fds(self) -> tuple[int, int] | None:
        """The gate's two descriptors (two open file descriptions: a probe on one never converts a lock held on
        the other), opened beside the lock file once it is open; None without a lock file."""
        if self._gate is None and not self._gate_failed and self._open() is not None:
            try:
                path = Path(self._file + ".gate")
                self._gate = tuple(open_shared_file(path) for _ in range(2))
            except (OSError, TypeError):
                self._gate_failed = True
        return self._gate

    def _close_gate(self, blocking: bool, deadline: float | None = None) -> bool:
        """Hold the gate (``LOCK_EX``) for an exclusive holder about to wait for the lock file; False only when
        not ``blocking`` and another exclusive holder has it, or it still has it at ``deadline``."""
        fds = self._gate_fds()
        if fds is None:
            return True
        try:
            if blocking and deadline is not None:
                return flock_by(fds[0], fcntl.LOCK_EX, deadline)
            fcntl.flock(fds[0], fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            self._gate_failed = True  # no gate: the lock itself still excludes, without the preference
        return True

    def _open_gate(self) -> None:
        if self._gate is not None:
            try:
                fcntl.flock(self._gate[0], fcntl.LOCK_UN)
            except OSError:
                pass

    def _gate_open(self) -> bool:
        """No exclusive holder of any process waits at the gate (called with the condition held: one probe at a
        time; this process's own exclusive holder is kept out by ``_exclusive`` before this is asked)."""
        fds = self._gate_fds()
        if fds is None or self._gate_failed:
            return True
        try:
            fcntl.flock(fds[1], fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            return True
        fcntl.flock(fds[1], fcntl.LOCK_UN)
        return True

"""Running a compiler (or ninja) in the builder: in a process group of its own, under a deadline, killed with its
children when the deadline passes; its output becomes the CompileError's message when it fails.

A build runs under a ticket (``Tiers.ticket``): the builder serves more builds at once than it has build slots, and a
build's compilers start at a priority graded by how many builds that came before it are still building, from the
builder's own (none) down LOWEST_NICE (``first`` or more). The host's cores are then busy while any build waits
(the lower ones take what the higher leave idle), and the builds end about in the order they came, one after
another, rather than all together at the end of a step or in waves of ``first``: the device checks and times the
first candidates while the others build (a trainer's step is a build stage on the cores feeding a device stage of
about a second a candidate). A build is a chain of processes, so a promotion takes effect at its next compiler: no
process's priority is raised, which an unprivileged process may not do.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import signal
import subprocess
import threading

#: How much lower than the builder's own the build with ``first`` or more builds ahead of it runs (a nice increment;
#: the builder's own is 10 below the trusted side's, so the lowest is 19).
LOWEST_NICE = 9
_TICKET: contextvars.ContextVar = contextvars.ContextVar("kbench_build_ticket", default=None)


class Tiers:
    """The builds in progress, in the order they came: a build's nice increment is graded from 0 (no build ahead of
    it) to LOWEST_NICE (``first`` or more ahead), asked afresh for every compiler it starts (``nice``)."""

    def __init__(self, first: int):
        self.first = max(1, int(first))
        self._lock = threading.Lock()
        self._active: set = set()
        self._order = itertools.count()

    @contextlib.contextmanager
    def ticket(self):
        """Around one build (in the thread that serves it; threads it starts take its ticket with
        ``contextvars.copy_context``); yields a dict whose ``nice`` is the largest increment its compilers got."""
        with self._lock:
            seq = next(self._order)
            self._active.add(seq)
        seen = {"nice": 0}
        token = _TICKET.set((self, seq, seen))
        try:
            yield seen
        finally:
            _TICKET.reset(token)
            with self._lock:
                self._active.discard(seq)

    def nice(self, seq: int) -> int:
        """The nice increment of the build ``seq`` now, by the builds that came before it and are still building."""
        with self._lock:
            ahead = sum(1 for s in self._active if s < seq)
        return min(LOWEST_NICE, ahead * LOWEST_NICE // self.first)


def _niced(command: list) -> list:
    """``command`` under the current build's tier (``nice`` prefixed where it runs lower)."""
    ticket = _TICKET.get()
    if ticket is None:
        return command
    tiers, seq, seen = ticket
    n = tiers.nice(seq)
    seen["nice"] = max(seen["nice"], n)
    return ["nice", "-n", str(n), *command] if n else command


class CompileError(RuntimeError):
    """The compiler failed (its output is the message), timed out, or the build is over its size bound."""


def run(command: list, cwd: str, timeout: float, what: str) -> str:
    """Run ``command`` in ``cwd``; its output (stdout and stderr), or CompileError ``"<what>: <output>"`` if it
    fails or outlives ``timeout``."""
    if timeout <= 0:
        raise CompileError(f"{what}: no time left for the build (its deadline has passed)")
    try:
        p = subprocess.Popen(_niced(command), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, process_group=0)
    except OSError as exc:
        raise CompileError(f"{what}: could not start {command[0]}: {exc}") from None
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # the compilers ninja started are in its group
        p.communicate()
        raise CompileError(f"{what}: timed out after {timeout:.0f} s (the compiler was killed)") from None
    finally:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if p.returncode != 0:
        raise CompileError(f"{what}: {out.decode('utf-8', 'replace')}")
    return out.decode("utf-8", "replace")

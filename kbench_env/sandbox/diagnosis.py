"""What went wrong with a worker, in words for people: ``WorkerError`` (a worker that died, hung or broke the
protocol, with the tail of its own output), the meaning of the signal that killed it or the exception behind its exit
status, and the resident memory its watchdog reads."""

from __future__ import annotations

import re
import signal
from typing import Callable

_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b.*")

_SIGNAL_HINTS = {"SIGSEGV": " (segmentation fault: an out-of-bounds access or a bad pointer in the kernel)",
                 "SIGABRT": " (abort: an assertion or a C++ exception escaping)",
                 "SIGKILL": " (killed: out of memory or a resource limit)",
                 "SIGBUS": " (bus error: misaligned or unmapped memory)",
                 "SIGFPE": " (arithmetic error, e.g. an integer division by zero)",
                 "SIGXCPU": " (the worker used up its CPU-time limit)",
                 "SIGSYS": " (a forbidden system call: the sandbox's seccomp filter)",
                 "SIGXFSZ": " (a file grew past the size limit)"}


class WorkerError(RuntimeError):
    """The worker died, hung or broke the protocol."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


def exit_description(code: int, when: str, log_tail: Callable[[], str]) -> str:
    """How a worker that exited with ``code`` (negative: the signal that killed it) ended ``when``: the signal and
    what it usually means, or the exit status and the last exception in its log (``log_tail()``)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker crashed with {name}{_SIGNAL_HINTS.get(name, '')} {when}"
    last = last_exception(log_tail())
    return f"the worker exited with status {code} {when}" + (f": {last}" if last else "")


def last_exception(log: str, max_chars: int = 400) -> str | None:
    """The last ``SomeError: message`` line of a Python traceback in the worker's log (the cause behind an exit
    status), trimmed."""
    for line in reversed(log.splitlines()):
        line = line.strip()
        if _EXC_LINE.match(line):
            return line[:max_chars]
    return None


def partial_note(got: int, size: int | None) -> str:
    """The note on a message the worker began and did not finish (``size``: its announced length, if read)."""
    whole = f"the {size:,} bytes" if size is not None else "the length"
    return f"; it had begun a message, sent {got:,} of {whole} of it and stopped"


def rss_bytes(pid) -> int:
    """Resident memory of process ``pid`` (0 if it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0

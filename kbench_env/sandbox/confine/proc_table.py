"""The process table as ``/proc`` shows it: each process's parent, process group, session and state, read from
its ``stat`` file. The parent's side reads it to kill a session where no cgroup is at hand (cgroup.kill_session);
bench/soak.py reads it to find leaked processes. ``thread_states``: what one process's threads are doing (state,
CPU, the kernel function they wait in, their system call), a diagnosis of a worker that is slow from outside."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple


class Proc(NamedTuple):
    """One process of the table: its pid, state letter (``man 5 proc``: R, S, D, Z, X, ...), parent, process group
    and session."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int

    @property
    def live(self) -> bool:
        """Not a zombie (Z) nor dead (X): a process that still runs or can be killed."""
        return self.state not in ("Z", "X")


def processes() -> Iterator[Proc]:
    """Every process ``/proc`` lists now; one that ends while the table is read is left out."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            state, ppid, pgrp, session = stat_fields(f"/proc/{name}/stat")[:4]
            yield Proc(int(name), state, int(ppid), int(pgrp), int(session))
        except (OSError, ValueError):
            continue


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def stat_fields(path: str) -> list[str]:
    """A ``stat`` file's fields from the state on (stat's field 3 is index 0): read after the command name's last
    ")", which may itself hold spaces and parentheses. OSError where it cannot be read."""
    text = _read(path)
    if text is None:
        raise OSError(f"{path} could not be read")
    return text[text.rindex(")") + 2 :].split()


def thread_states(pid: int) -> dict:
    """Each thread of process ``pid`` as /proc shows it now, by thread id: its state letter, user plus system CPU
    in clock ticks, the kernel function it sleeps in (``wchan``: "0" while it runs, or where the kernel hides it) and
    its system call's number ("running", or None where unreadable). Empty when the process is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            fields = stat_fields(f"/proc/{pid}/task/{tid}/stat")
            ticks = int(fields[11]) + int(fields[12])  # utime, stime (stat's fields 14 and 15)
        except (OSError, ValueError, IndexError):
            continue
        syscall = _read(f"/proc/{pid}/task/{tid}/syscall")
        out[int(tid)] = {"state": fields[0], "ticks": ticks,
                         "wchan": (_read(f"/proc/{pid}/task/{tid}/wchan") or "").strip() or None,
                         "syscall": syscall.split()[0] if syscall else None}
    return out

"""The process table as ``/proc`` shows it: each process's parent, process group, session and state, read from
its ``stat`` file. The parent's side reads it to kill a session where no cgroup is at hand (cgroup.kill_session);
bench/soak.py reads it to find leaked processes."""

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
    """Every process ``/proc`` lists now; one that ends while the table is read is left out. ``stat`` is read
    after the command name's last ")", which may itself hold spaces and parentheses."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                st = f.read()
            state, ppid, pgrp, session = st[st.rindex(")") + 2 :].split()[:4]
            yield Proc(int(name), state, int(ppid), int(pgrp), int(session))
        except (OSError, ValueError):
            continue

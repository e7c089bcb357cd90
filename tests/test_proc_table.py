"""The process table as /proc shows it (``sandbox/confine/proc_table.py``) and the kill of a whole session that
reads it where no cgroup is at hand (``cgroup.kill_session``, the worker's and the builder's last resort)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kbench_env.sandbox.confine.cgroup import kill_session
from kbench_env.sandbox.confine.proc_table import processes

# a session leader whose child sits in a process group of its own, as ninja puts the compilers it starts
LEADER = ("import subprocess, sys, time\n"
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], process_group=0)\n"
          "time.sleep(300)\n")


def _live_in_session(sid: int) -> list:
    return [p for p in processes() if p.session == sid and p.live]


def test_the_table_shows_this_process_with_its_parent_group_and_session():
    (me,) = [p for p in processes() if p.pid == os.getpid()]
    assert me.live and me.state in "RS"
    assert (me.ppid, me.pgrp, me.session) == (os.getppid(), os.getpgrp(), os.getsid(0))
    assert all(p.pid > 0 for p in processes())


def test_kill_session_kills_every_process_of_the_session_and_nothing_else():
    leader = subprocess.Popen([sys.executable, "-c", LEADER], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(_live_in_session(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = _live_in_session(leader.pid)
        assert len(members) == 2, members
        (child,) = [p for p in members if p.pid != leader.pid]
        assert child.ppid == leader.pid and child.pgrp == child.pid != leader.pid  # a group of its own
        kill_session(leader.pid)
        assert leader.wait(timeout=60) == -9
        deadline = time.monotonic() + 60  # the child, adopted by init, is reaped there
        while _live_in_session(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _live_in_session(leader.pid) == []
        assert [p for p in processes() if p.pid == os.getpid() and p.live]
    finally:  # whatever a failure left of the session
        for p in _live_in_session(leader.pid):
            os.kill(p.pid, 9)
        leader.wait(timeout=60)

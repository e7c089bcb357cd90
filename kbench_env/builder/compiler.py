"""Running a compiler (or ninja) in the builder: in a process group of its own, under a deadline, killed with its
children when the deadline passes; its output becomes the CompileError's message when it fails.

ninja starts each command in a process group of its own (so that an interrupt at a terminal reaches ninja alone):
killing ninja's group leaves the compilers it started running, writing into a build folder given up on. The tree
under it is killed instead, every process group in it (``_kill_tree``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

#: Seconds to wait for a killed compiler's output to end (its pipe closed by its death) and for it to be reaped.
KILLED_WAIT_S = 30.0
#: Rounds of the process table read and killed: a compiler that started a child between two reads is found in the
#: next (its group is killed in the first either way, unless the child left the group).
KILL_ROUNDS = 3


class CompileError(RuntimeError):
    """The compiler failed (its output is the message), timed out, or the build is over its size bound."""


def run(command: list, cwd: str, timeout: float, what: str) -> str:
    """Run ``command`` in ``cwd``; its output (stdout and stderr), or CompileError ``"<what>: <output>"`` if it
    fails or outlives ``timeout``."""
    if timeout <= 0:
        raise CompileError(f"{what}: no time left for the build (its deadline has passed)")
    try:
        p = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, process_group=0)
    except OSError as exc:
        raise CompileError(f"{what}: could not start {command[0]}: {exc}") from None
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(p.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.communicate(timeout=KILLED_WAIT_S)
        raise CompileError(f"{what}: timed out after {timeout:.0f} s (the compiler was killed)") from None
    finally:
        if p.poll() is None:
            _kill_tree(p.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(KILLED_WAIT_S)
    if p.returncode != 0:
        raise CompileError(f"{what}: {out.decode('utf-8', 'replace')}")
    return out.decode("utf-8", "replace")


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every process under ``pid`` with its own group (never this process's
    group), the table read again KILL_ROUNDS times: the children are found by their parent while it lives, and a
    child orphaned meanwhile is still in a group killed."""
    from kbench_env.sandbox.confine.proc_table import processes  # late: the worker imports this module

    own, groups = os.getpgrp(), {pid}
    for _ in range(KILL_ROUNDS):
        try:
            table = [q for q in processes() if q.live]
        except OSError:  # (no process table to read: ninja's own group at least)
            table = []
        children: dict = {}
        for q in table:
            children.setdefault(q.ppid, []).append(q)
        found, todo = [], [pid]
        while todo:
            for child in children.get(todo.pop(), ()):
                found.append(child.pid)
                todo.append(child.pid)
                groups.add(child.pgrp)
        for group in groups - {own}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for child in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        if not found:
            return

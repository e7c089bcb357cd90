"""Running a compiler (or ninja) in the builder: in a process group of its own, under a deadline, killed with its
children when the deadline passes; its output becomes the CompileError's message when it fails."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


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

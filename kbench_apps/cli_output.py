"""How the ``kbench`` command writes for people and for pipes: help that shows defaults, counts in words
("1 task", "3 tasks"), a device check made before anything is charged, and a closed pipe taken as the reader
having had enough (no traceback).

Output to a terminal may be a rich table; output to a pipe or a file is whole and plain (tab-separated lines, or
JSON Lines with ``--json``), so that ``| cat``, ``| grep`` and ``> file`` see every character of every name.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from rich.console import Console

from kbench_env.machine.device import Device

#: The exit status of a command whose reader closed the pipe: 128 + SIGPIPE, what ``yes | head`` gives.
CLOSED_PIPE_EXIT = 141


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults-in-help, except where a default says nothing (None, False) or the help already
    names it."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS \
                or "default" in help_text:
            return help_text
        return super()._get_help_string(action)


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``"1 task"``, ``"2 tasks"``."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def is_terminal(stream=None) -> bool:
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


#: The width tables are laid out at when the output is not a terminal: wide enough that no cell is cut or wrapped.
PIPED_WIDTH = 400


def console(stream=None):
    """A rich Console for ``stream`` (stdout): a terminal's own width; piped or redirected, whole lines and tables
    laid out at PIPED_WIDTH columns instead of rich's default 80, so nothing is cut."""
    piped = not is_terminal(stream)
    return Console(file=stream, soft_wrap=piped, width=PIPED_WIDTH if piped else None)


def require_device(device: str) -> None:
    """Refuse a CUDA device this machine does not have, before any candidate is built or charged."""
    dev = Device.parse(device)
    if not dev.is_cuda:
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ValueError(f"--device {device}: no CUDA device on this machine (torch {torch.__version__} sees no "
                         f"GPU; torch.version.cuda is {torch.version.cuda}): use --device cpu, or auto")
    if dev.index is not None and dev.index >= count:
        raise ValueError(f"--device {device}: no such CUDA device; this machine has {plural(count, 'GPU')} "
                         f"(cuda:0..cuda:{count - 1})")


def quiet_closed_pipe() -> int:
    """After a BrokenPipeError on stdout: point stdout at /dev/null so that the interpreter's last flush does not
    raise again, and return the conventional exit status."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout has no file descriptor (captured): nothing left to flush
        pass
    return CLOSED_PIPE_EXIT


__all__ = ["CLOSED_PIPE_EXIT", "HelpFormatter", "is_terminal", "plural", "quiet_closed_pipe", "require_device"]

"""A real ``kbench serve`` process on a free localhost port, for the serving tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "test-token-for-kbench-serve"


class ServerProcess:
    """``lines``: what the server wrote to stdout and, unless ``stderr_apart``, stderr; with ``stderr_apart``,
    stderr's lines (the log) are ``err_lines``."""

    def __init__(self, *args: str, startup: float = 120.0, env: dict | None = None, stderr_apart: bool = False):
        env = {**os.environ, "KBENCH_TOKEN": TOKEN, "KBENCH_SPARE_WORKER": "0", **(env or {})}  # ``env`` wins
        cmd = [sys.executable, "-m", "kbench_apps", "serve", "--port", "0", "--device", "cpu", "--timing", "off",
               "--suite", "all", *args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                                     stderr=subprocess.PIPE if stderr_apart else subprocess.STDOUT)
        self.lines: list[str] = []
        self.err_lines: list[str] = []
        found = threading.Event()
        if stderr_apart:
            self._err_reader = threading.Thread(target=lambda: self.err_lines.extend(self.proc.stderr), daemon=True)
            self._err_reader.start()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                if "listening on" in line:
                    found.set()
            found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        found.wait(startup)
        match = next((re.search(r"http://[\d.]+:\d+", ln) for ln in self.lines if "listening on" in ln), None)
        if match is None:
            self.proc.kill()
            raise RuntimeError("kbench serve did not start:\n" + "".join(self.lines))
        self.url = match.group(0)

    def descendants(self) -> set[int]:
        """Processes under the server now (from /proc's parent links)."""
        parents = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                parents[int(stat.parent.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
        out, frontier = set(), {self.proc.pid}
        while frontier:
            frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - out
            out |= frontier
        return out

    def stop(self, timeout: float = 120.0) -> int:
        self.proc.terminate()
        code = self.proc.wait(timeout)
        self._reader.join(timeout)  # until the last lines are read
        if self.proc.stderr is not None:
            self._err_reader.join(timeout)
        return code


def cmdline(pid: int) -> str:
    """The command line of ``pid`` as it shows itself (Ray names its actor processes ``ray::Class``)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"

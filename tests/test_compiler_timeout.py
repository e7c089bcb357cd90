"""A compiler run past its deadline is killed with everything it started (builder/compiler.py): ninja starts each
command in a process group of its own, so killing ninja's group alone would leave the compilers running, writing
into a build folder given up on."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from kbench_env.builder import compiler
from kbench_env.builder.compiler import CompileError, run
from kbench_env.sandbox.confine.proc_table import processes

NINJA = shutil.which("ninja") or shutil.which("ninja", path=os.path.dirname(sys.executable))


def _alive(pid: int) -> bool:
    return any(q.pid == pid and q.live for q in processes())


def _pid_from(path: Path, within: float = 30.0) -> int:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


@pytest.mark.skipif(NINJA is None, reason="ninja is a core dependency; not found here")
@pytest.mark.parametrize("nested", [False, True])
def test_a_build_past_its_deadline_leaves_none_of_ninjas_commands_running(tmp_path, nested):
    """Each command writes its pid, then sleeps past the deadline; ``nested``: the sleep is the command's own child
    (a compiler driver's cicc or ptxas). After the CompileError no process of the command is alive."""
    # (ninja's text: $$ is a dollar for the shell, $out ninja's; the inner shell's \\$\\$ its own pid)
    inner = "sleep 120" if not nested else 'sh -c "echo \\$$\\$$ > $out.inner; sleep 120"'
    (tmp_path / "build.ninja").write_text(
        "rule slow\n"
        f"  command = sh -c 'echo $$$$ > $out.pid; {inner}; touch $out'\n"
        "build a.txt: slow\n"
        "build b.txt: slow\n")
    raised, t0 = [], time.monotonic()

    def build():
        try:
            run([NINJA, "-j", "2"], str(tmp_path), 2.0, "the test's build")
        except CompileError as exc:
            raised.append(str(exc))

    t = threading.Thread(target=build, daemon=True)
    t.start()
    pids = [_pid_from(tmp_path / f"{n}.txt.pid") for n in ("a", "b")]
    if nested:
        pids += [_pid_from(tmp_path / f"{n}.txt.inner") for n in ("a", "b")]
    t.join(compiler.KILLED_WAIT_S + 30)
    assert not t.is_alive(), "run() did not return after its deadline"
    assert raised and "timed out after 2 s" in raised[0]
    assert time.monotonic() - t0 < 60  # (not the commands' 120 s)
    end = time.monotonic() + 10  # (a killed process may take a moment to be gone from the table)
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "a command ninja started outlived the build's deadline"
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()

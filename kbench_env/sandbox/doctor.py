"""``kbench doctor``: start sandboxed workers and report which protections are active on this machine, which are
not and why, and what the sandbox does not stop."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from kbench_env.sandbox.confine.cgroup import PidsCgroup
from kbench_env.sandbox.confine.confinement import LIMITATIONS
from kbench_env.sandbox.confine.landlock import landlock_abi
from kbench_env.sandbox.worker_process import Worker


def doctor(device: str = "cpu") -> dict:
    """Start one sandboxed worker and report which protections are active on this machine (and which not, why)."""
    out: dict = {"machine": {"uid": os.geteuid(), "kernel": os.uname().release, "landlock_abi": landlock_abi(),
                             "pids_cgroup": (PidsCgroup.base() or (None, None))[0]}}
    tools = {}
    for tool in ("bwrap", "nsjail"):
        tools[tool] = shutil.which(tool) or "not installed"
    out["machine"]["tools"] = tools
    with tempfile.TemporaryDirectory(prefix="kbench-doctor-") as root:
        src = "class ModelNew:\n    pass\n"
        times = []
        for _ in range(4):  # the first one starts the fork server
            t0 = time.perf_counter()
            with Worker(src, "cpu", device, root) as w:
                w.recv(60.0, "load")
                w._drain_reports()
                status = w.protections
            times.append((time.perf_counter() - t0) * 1e3)
        out.update(status or {"active": {}, "missing": {"sandbox": "the worker sent no status"}})
        out["worker_start_ms"] = round(sorted(times[1:])[1], 1)
    out["limitations"] = list(LIMITATIONS)
    return out


def format_doctor(report: dict) -> str:
    """The report of ``doctor`` as text for people."""
    m = report["machine"]
    lines = [f"kbench sandbox on this machine (uid {m['uid']}, kernel {m['kernel']}, Landlock ABI {m['landlock_abi']})",
             f"a sandboxed worker starts, loads a trivial candidate and is cleaned up in {report.get('worker_start_ms')} ms "
             f"(confining itself: {report.get('confine_ms')} ms)",
             "", "active:"]
    lines += [f"  + {k}: {v}" for k, v in report.get("active", {}).items()]
    lines += ["", "not active:"]
    lines += [f"  - {k}: {v}" for k, v in report.get("missing", {}).items()] or ["  (none)"]
    lines += ["", "not stopped by design or for want of a mechanism:"]
    lines += [f"  * {x}" for x in report.get("limitations", [])]
    lines += ["", "tools not used (namespaces and Landlock are applied directly): "
              + ", ".join(f"{k}: {v}" for k, v in m.get("tools", {}).items())]
    return "\n".join(lines)

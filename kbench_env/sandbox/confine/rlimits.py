"""The resource-limit layer: address space, CPU seconds, file size, open files, no core files, and processes
(RLIMIT_NPROC where not root; a root parent bounds them with the pids cgroup instead)."""

from __future__ import annotations

import os
import resource

from kbench_env.machine.device import Device


def set_limits(limits: dict, device: str, act: dict, miss: dict, cgroup: bool = False) -> None:
    """Set the resource limits ``limits`` names (``cgroup``: the parent bounds processes with a pids cgroup)."""
    def setl(which, value):
        value = int(value)
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    done = []
    # Address-space limits break CUDA (its runtime reserves terabytes of virtual memory: cudaGetDeviceCount fails
    # with "out of memory"); on a GPU the parent watches the worker's resident memory instead
    # (worker_process.Worker).
    if limits.get("memory_bytes") and not Device.parse(device).is_cuda:
        setl(resource.RLIMIT_AS, _vmsize() + int(limits["memory_bytes"]))
        done.append(f"address space +{int(limits['memory_bytes']) >> 20} MiB")
    if limits.get("file_bytes"):
        setl(resource.RLIMIT_FSIZE, limits["file_bytes"])
        done.append(f"files {int(limits['file_bytes']) >> 20} MiB")
    if limits.get("open_files"):
        setl(resource.RLIMIT_NOFILE, limits["open_files"])
        done.append(f"{limits['open_files']} open files")
    if limits.get("cpu_seconds"):
        cpu = int(limits["cpu_seconds"]) + int(resource.getrusage(resource.RUSAGE_SELF).ru_utime)
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5 if hard == resource.RLIM_INFINITY else min(hard, cpu + 5)))
        done.append(f"{limits['cpu_seconds']:.0f} CPU seconds")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    done.append("no core files")
    act["rlimits"] = ", ".join(done)
    if limits.get("processes") and os.getuid() != 0:
        # RLIMIT_NPROC counts all processes of the real user: allow what the user runs now plus the worker's share.
        n = _user_processes(os.getuid()) + int(limits["processes"])
        setl(resource.RLIMIT_NPROC, n)
        act["process_limit"] = f"RLIMIT_NPROC: {limits['processes']} more processes than the user has"
    elif os.getuid() == 0 and not cgroup:
        miss["process_limit"] = "RLIMIT_NPROC does not apply to uid 0 and there is no pids cgroup: processes unbounded"


def _vmsize() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _user_processes(uid: int) -> int:
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                n += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                pass
    return n

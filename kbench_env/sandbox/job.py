"""The job a worker is started with: its candidate, scratch directory and the (read-only) build cache, its limits,
and the sandbox settings its confinement reads (confine/confinement.py), all decided on the trusted side."""

from __future__ import annotations


from kbench_env.config import environ
from kbench_env.sandbox.confine import policy
from kbench_env.sandbox.confine.environment import scrubbed_environment
from kbench_env.sandbox.confine.paths import compiler_dirs
from kbench_env.sandbox.confine.forkserver import forkserver_dir
from kbench_env.sandbox.confine.policy import Limits


def worker_job(limits: Limits, source: str | None, backend: str, device: str, scratch: str, build_root: str,
               audit: bool, report, cgroup: str | None, builds: bool = True, compile_warm: bool = False) -> dict:
    """The job of a worker for ``source`` (None: a spare, which waits for its candidate); ``report``: the write end
    of its report channel; ``cgroup``: the path of its pids cgroup, if it has one; ``builds``: the trusted builder
    compiles for it, so the compilers' own programs are hidden from it where its mount namespace can hide them (a
    reference worker keeps them: torch.compile's baseline compiles in it); ``compile_warm``: it imports
    torch.compile's modules as it starts (worker/compile_gate.warm)."""
    off = set(limits.isolation_off)
    hide = [d for d in (forkserver_dir(),) if d] + (compiler_dirs() if builds else [])
    return {
        "source": source, "backend": backend, "device": device, "scratch": scratch,
        "build_root": build_root, "env": scrubbed_environment(worker=True),
        "threads": limits.threads, "audit": audit, "spare_idle_s": policy.SPARE_IDLE_S, "compile_warm": compile_warm,
        # Settings that trade a GPU evaluation's cost, read here: the worker's environment is scrubbed of them
        "audit_mode": environ.get("KBENCH_GPU_AUDIT"),
        "warmup": environ.get("KBENCH_WORKER_WARMUP"),
        "blocking_sync": environ.get("KBENCH_WORKER_BLOCKING_SYNC"),
        "limits": {"memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes,
                   "open_files": limits.open_files, "cpu_seconds": limits.cpu_seconds,
                   "processes": limits.processes},
        "sandbox": {"isolate": limits.isolation, "off": sorted(off), "report": report,
                    "cgroup": cgroup, "hide": hide,
                    "extra_read": list(limits.extra_read_paths),
                    # what an unprivileged parent gets: a user namespace (KBENCH_SANDBOX_USERNS=1 tries it as root)
                    "userns": environ.get("KBENCH_SANDBOX_USERNS"),
                    "gpu_isolation": limits.gpu_isolation, "netns_only": limits.netns_only,
                    "unix_sockets": limits.unix_sockets},
    }

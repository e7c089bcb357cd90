"""The confinement's entry point: ``apply`` runs the layers (the modules beside this one) in order in a freshly forked
worker and reports which are active; ``LIMITATIONS`` lists what they do not stop."""

from __future__ import annotations

import os
import signal
import sys
import time

from kbench_env.machine.device import Device
from kbench_env.sandbox.confine import environment, namespaces, privileges, rlimits, seccomp
from kbench_env.sandbox.confine.audit_hook import Guard
from kbench_env.sandbox.confine.landlock import landlock_abi, restrict
from kbench_env.sandbox.confine.libc import libc
from kbench_env.sandbox.confine.paths import allowed_paths

_PR_SET_PDEATHSIG = 1

LIMITATIONS = (
    "native code (C++ kernels, ctypes) is not seen by the audit hook: its blocked attempts fail but are not reported",
    "the candidate can read other candidates' cached builds (sources and binaries), not change them",
    "the compiler runs on the candidate's sources in the trusted builder (flags checked, confined by Landlock and "
    "without network): a compiler bug that a source can exploit would run in the builder",
    "/bin/sh stays executable (ninja runs its commands through it); the audit hook refuses shells from Python only",
    "other processes' command lines (/proc/<pid>/cmdline) stay readable",
    "CUDA workers have no mount namespace and no Landlock (CUDA does not start under them): their native code can "
    "read and write files wherever the user running kbench can, the shared build cache included (the builder "
    "rebuilds a build whose library no longer matches its digest, but cannot stop a change made between its check "
    "and a load), and AF_UNIX sockets are allowed (no network)",
    "CUDA workers can connect to the fork server's socket (AF_UNIX allowed, its directory not hidden without the "
    "mount namespace): a bare connection stops the fork server, and a crafted request would have it fork a process "
    "outside the sandbox",
    "without a freezer cgroup (kbench not run as root), the worker is stopped by SIGSTOP to its process group: "
    "seccomp keeps every process in it and refuses SIGCONT where it can read the signal; a thread on another core "
    "runs on for the few microseconds the stop signal takes to reach it, and the trusted side confirms the stop of "
    "the worker's own threads only (not of its child processes)",
)


def apply(job: dict, keep_fds=()) -> dict:
    """Confine this (freshly forked, single-threaded) worker process; ``keep_fds``: its protocol channel. Returns
    {layer: description} of what is active and {"missing": {layer: why}} of what is not; the parent gets it on the
    report channel."""
    t0 = time.perf_counter()
    status: dict = {"active": {}, "missing": {}}
    act, miss = status["active"], status["missing"]
    sb = job.get("sandbox") or {}
    report = sb.get("report")
    isolate = sb.get("isolate", True)
    off = set(sb.get("off", ()))
    if Device.parse(job.get("device", "cpu")).is_cuda and not sb.get("gpu_isolation"):
        sb = _relax_for_cuda(sb, off, miss)
    scratch = os.path.realpath(job["scratch"])
    build_root = os.path.realpath(job["build_root"])
    limits = job.get("limits", {})
    device = job.get("device", "cpu")
    home = os.environ.get("HOME")

    environment.close_inherited(keep_fds, report, act)
    os.setsid()  # own process group and session: the parent kills compilers and any children with it
    act["session"] = "own session and process group, killed as a whole"
    if not sb.get("cgroup") and isolate and "cgroup" not in off and os.geteuid() == 0:
        miss["pids_cgroup"] = "no pids cgroup controller found (processes are bounded by nothing as uid 0)"
    _log_to(scratch)
    environment.scrub(scratch, build_root, job.get("threads", 1), job.get("env"))
    act["environment"] = "scrubbed (build and run variables only, no credentials)"
    use_landlock = isolate and "landlock" not in off and landlock_abi() > 0
    _namespace_layer(sb, off, isolate, use_landlock, home, scratch, build_root, act, miss)
    rlimits.set_limits(limits, device, act, miss, cgroup=bool(sb.get("cgroup")))
    read_roots, exec_roots = allowed_paths(scratch, build_root, device, sb.get("extra_read", ()))
    if use_landlock:
        restrict([scratch], read_roots, exec_roots, device, act, miss)  # the build cache: read-only
    elif isolate:
        miss["landlock"] = ("turned off (Limits.isolation_off)" if "landlock" in off else
                            "not available on this kernel: reads outside the sandbox are stopped only where the mount "
                            "namespace hides them (home, /tmp), signals to same-uid processes are not scoped")
    privileges.drop(act, miss)
    if isolate and "seccomp" not in off:
        seccomp.install(act, miss, unix_sockets=bool(sb.get("unix_sockets")), signal_stop=not sb.get("freezer"))
    elif isolate:
        miss["seccomp"] = "turned off (Limits.isolation_off)"
    if sb.get("cgroup"):  # the parent moves this process into its pids (and freezer) cgroup while it confines itself
        if _await_cgroup(os.path.basename(sb["cgroup"]), int(sb.get("cgroup_hierarchies", 1))):
            act["pids_cgroup"] = f"at most {limits.get('processes')} processes and threads (pids cgroup)"
            if sb.get("freezer"):
                act["freezer_cgroup"] = (f"stopped as one for the trusted side's reads and writes (cgroup v"
                                         f"{sb['freezer']} freezer)")
        else:
            miss["pids_cgroup"] = "the parent did not move the worker into its pids cgroup"
    if not sb.get("freezer") and isolate:
        miss["freezer_cgroup"] = ("no freezer cgroup (not root, or no cgroup v2 / v1 freezer): stopped by SIGSTOP to "
                                  "its process group, which seccomp keeps every process of it in")
    # Parent-death signal last: credential changes clear it.
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
        act["parent_death"] = "killed if the parent dies"
    if os.getppid() == 1:  # the parent died before the signal was armed
        os._exit(1)
    guard = Guard(scratch, build_root, read_roots, report, enforce=isolate and "audit" not in off)
    sys.addaudithook(guard)
    act["audit_hook"] = ("Python-level attempts refused and reported" if guard.enforce else
                         "Python-level attempts reported, not refused")
    status["confine_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
    if report is not None:
        guard.send({"kind": "status", **status})
    return status


def _relax_for_cuda(sb: dict, off: set, miss: dict) -> dict:
    """The sandbox a CUDA worker gets unless ``Limits.gpu_isolation`` asks for the full one: ``off`` gains
    Landlock; returns the sandbox settings with a network namespace only and seccomp allowing AF_UNIX.

    On a GPU (bench/gpu_sandbox_probe.py) torch.cuda.init() fails with CUDA error 304
    ("OS call failed") under the mount namespace, under Landlock, and under a seccomp filter that refuses AF_UNIX
    sockets, each on its own; it works in a network namespace with seccomp refusing every other socket family. GPU
    workers get that, the audit hook enforcing, and the environment, limit, capability, cgroup and watchdog layers;
    no Landlock and no mount namespace (files outside the scratch directory are guarded by the audit hook at the
    Python level only). Limits(gpu_isolation=True) asks for the full sandbox
    (tests/test_gpu_faults.py::test_full_sandbox_on_the_gpu)."""
    off.add("landlock")
    miss["gpu_isolation"] = ("GPU workers: network namespace without mount namespace, seccomp allowing AF_UNIX "
                             "sockets, no Landlock (CUDA does not start under those: bench/gpu_sandbox_probe.py); "
                             "native code can write outside the scratch directory")
    return {**sb, "netns_only": True, "unix_sockets": True}


def _log_to(scratch: str) -> None:
    """Work in the scratch directory, stdout and stderr appended to its worker.log."""
    os.chdir(scratch)
    log = os.open(os.path.join(scratch, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _namespace_layer(sb: dict, off: set, isolate: bool, use_landlock: bool, home: str | None, scratch: str,
                     build_root: str, act: dict, miss: dict) -> None:
    """Enter the namespaces unless turned off; where Landlock is missing, also hide what holds users' files."""
    if not isolate:
        for layer in ("namespaces", "landlock", "seccomp"):
            miss[layer] = "sandbox isolation turned off (Limits.isolation)"
    elif "namespaces" in off:
        miss["namespaces"] = "turned off (Limits.isolation_off)"
    else:
        hide = ["/run"] + list(sb.get("hide", ()))
        if not use_landlock:  # nothing else keeps reads in: hide what holds users' files
            hide += [h for h in {home, os.path.expanduser("~root"), "/home", "/root", "/tmp", "/var/tmp", "/mnt",
                                 "/media", "/srv"} if h]
        namespaces.enter(scratch, build_root, hide, act, miss, user_ns=os.geteuid() != 0 or bool(sb.get("userns")),
                         net_only=bool(sb.get("netns_only")))


def _await_cgroup(name: str, hierarchies: int = 1, timeout: float = 10.0) -> bool:
    """Wait until this process is in the cgroups named ``name`` of ``hierarchies`` hierarchies (moving a process
    costs the parent an RCU grace period, so it is done while the worker confines itself rather than before)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open("/proc/self/cgroup") as f:
                if sum(line.rstrip("\n").endswith("/" + name) for line in f) >= hierarchies:
                    return True
        except OSError:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)

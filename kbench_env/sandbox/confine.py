"""Confinement of a candidate's worker process, applied by the worker to itself before any candidate code runs.

Owns the operating-system side of the sandbox (sandbox.py owns the parent's side: the policy, the cgroup, the
report channel, publishing new builds, the watchdogs). Every layer is applied where this machine allows it, and
``apply`` returns which ones are active; the parent reports them (``kbench doctor``). In the order applied:

1. Process: no descriptor but stdio and its two channels (multiprocessing's resource tracker pipe and the fork
   server's closed), its own session (the parent kills the group), a pids cgroup made by the parent (root), a
   scrubbed environment (only what builds and runs need, named one by one; nothing named like a credential; the
   fork server it was forked from started with no more), stdout/stderr to a log.
2. Namespaces (root, or unprivileged user namespaces): a network namespace with no interface up (no network at
   all, loopback included); a mount namespace in which every mount is read-only except the scratch directory and
   the build cache, the build cache being an overlay whose writes land in the scratch directory (the parent
   publishes the new builds under the worker's own source's directory, buildcache.py; existing builds are never
   changed); /run hidden (daemon sockets),
   and the home directory hidden where the Landlock layer is missing.
3. Resource limits: address space, CPU seconds, file size, open files, no core files, processes
   (RLIMIT_NPROC where not root: root ignores it, so a root parent uses the pids cgroup instead).
4. Landlock: reads only from system, Python and kbench directories, the scratch directory and the build cache;
   writes only to the scratch directory and the build cache; programs run only from system and Python
   directories; TCP bind/connect denied (ABI 4+); signals and abstract unix sockets scoped to the worker (ABI 6+);
   and Landlock's ptrace rules make /proc/<pid>/environ and /mem of processes outside the sandbox unreadable.
5. Capabilities (root): bounding and ambient sets emptied, SECBIT_NOROOT locked, every capability dropped, so the
   uid-0 worker cannot remount, raise its limits, load modules or leave the cgroup; no_new_privs in any case.
6. seccomp: socket() fails with EACCES (every family: no network, no daemon sockets); mount, namespace, module,
   kexec, bpf, ptrace, keyring, io_uring and perf system calls fail with EPERM, and so does setsid() (every
   descendant stays in the worker's session, which the parent kills where no cgroup is at hand); clone3 reports
   ENOSYS (glibc falls back to clone, whose namespace flags are refused); 32-bit and x32 system calls kill.
7. A Python audit hook that refuses, and reports to the parent on a channel of its own, what the candidate's Python
   code tries outside the sandbox: opening files outside it, writing into the build cache from candidate code,
   sockets, running programs other than the compiler tool chain, reading another process's /proc entries. It is a
   report layer, not the wall: native code (a C++ kernel, ctypes) bypasses it; the layers above do not.

CUDA workers (unless ``Limits.gpu_isolation``): CUDA's initialisation fails under the mount namespace, under Landlock
and under a seccomp filter that refuses AF_UNIX sockets (H100, bench/results/gpu_runs.md), so they get the network
namespace alone (``netns_only``) and a filter that refuses every socket family but AF_UNIX (``unix_sockets``), with
the other layers; they have no read-only view of the file system.

What is not stopped, by design or for want of a mechanism, is listed in ``LIMITATIONS`` (``kbench doctor``).

This module must not import anything that runs candidate code, and ``apply`` must run before the candidate loads.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import platform
import re
import resource
import signal
import socket
import struct
import sys

LIMITATIONS = (
    "native code (C++ kernels, ctypes) is not seen by the audit hook: its blocked attempts fail but are not reported",
    "the candidate can read other candidates' cached builds (sources and binaries), not change them",
    "a worker's new builds are published as it left them, but only under its own source's directory of the cache: "
    "what a candidate plants there is loaded only by the same source",
    "/bin/sh stays executable (ninja runs its commands through it); the audit hook refuses shells from Python only",
    "other processes' command lines (/proc/<pid>/cmdline) stay readable",
    "CUDA workers have no mount namespace and no Landlock (CUDA does not start under them): their native code can "
    "read and write files wherever the user running kbench can (the shared build cache included: no quota, and "
    "builds of other sources can be replaced), and AF_UNIX sockets are allowed (no network)",
    "CUDA workers can connect to the fork server's socket (AF_UNIX allowed, its directory not hidden without the "
    "mount namespace): a bare connection stops the fork server, and a crafted request would have it fork a process "
    "outside the sandbox",
)

# Environment variables a build or a run may need (a worker's whole environment); anything named like a credential,
# or whose value holds one in a URL, is dropped even if listed.
_ENV_KEEP = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "CC", "CXX", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
             "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "TRITON_INTERPRET", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST",
             "KBENCH_LIGHT_HEADERS", "KBENCH_CUTLASS", "CUTLASS_PATH"}
CUTLASS_VARS = ("KBENCH_CUTLASS", "CUTLASS_PATH")  # a CUTLASS checkout for builds (backends/cutlass.py): readable
_ENV_PREFIX_KEEP = ("KBENCH_THREADS", "CUDA_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM", "TRITON_", "LC_")
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
_URL_CREDENTIAL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]*@")  # scheme://user[:password]@
# The fork server (whose environment every worker's /proc/self/environ shows) also gets what Python and torch read
# when they start; never a whole family such as KBENCH_*, which holds the LLM client's settings.
_SERVER_KEEP = {"PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "VIRTUAL_ENV", "CONDA_PREFIX", "HOME", "USER",
                "LOGNAME", "TMPDIR", "TERM"}
_SERVER_PREFIX_KEEP = ("OMP_", "MKL_", "OPENBLAS_", "TORCH", "HIP_", "ROCM_")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

# Linux constants
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_CLONE_NS_MASK = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
_SYS_MOUNT_SETATTR, _SYS_LL_CREATE, _SYS_LL_ADD, _SYS_LL_RESTRICT = 442, 444, 445, 446
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 1, 4, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _PR_CAP_AMBIENT = 38, 22, 47

# Landlock access rights
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_ABI1 = (1 << 13) - 1
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_FILE_RIGHTS = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1, 2
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1, 2

# seccomp: per-architecture audit arch and system call numbers
_SECCOMP_ARCH = {
    "x86_64": (0xC000003E, dict(
        socket=41, ptrace=101, mount=165, umount2=166, pivot_root=155, chroot=161, swapon=167, swapoff=168,
        reboot=169, acct=163, init_module=175, delete_module=176, finit_module=313, kexec_load=246,
        kexec_file_load=320, add_key=248, request_key=249, keyctl=250, unshare=272, setns=308, perf_event_open=298,
        name_to_handle_at=303, open_by_handle_at=304, process_vm_readv=310, process_vm_writev=311, bpf=321,
        userfaultfd=323, fanotify_init=300, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442,
        clone3=435, clone=56, setsid=112)),
    "aarch64": (0xC00000B7, dict(
        socket=198, ptrace=117, mount=40, umount2=39, pivot_root=41, chroot=51, swapon=224, swapoff=225,
        reboot=142, acct=89, init_module=105, delete_module=106, finit_module=273, kexec_load=104,
        kexec_file_load=294, add_key=217, request_key=218, keyctl=219, unshare=97, setns=268, perf_event_open=241,
        name_to_handle_at=264, open_by_handle_at=265, process_vm_readv=270, process_vm_writev=271, bpf=280,
        userfaultfd=282, fanotify_init=262, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442,
        clone3=435, clone=220, setsid=157)),
}

# Programs the candidate's Python code may start: the compiler tool chain (and the interpreter, which
# torch.compile's workers need). Everything else, shells first, is refused and reported.
_TOOL = re.compile(r"^(?:[\w.]+-)*(?:c\+\+|g\+\+|gcc|cc|cpp|clang|clang\+\+|ld|ld\.\w+|as|ar|nvcc|ptxas|fatbinary|"
                   r"nvlink|cuobjdump|nvdisasm|cicc|ninja|which|icpx|hipcc|ldconfig|ldconfig\.real|uname|lscpu|"
                   r"getconf|nvidia-smi|whereis)(?:-[\d.]+)?$")
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox", "rbash", "ash"}


def _err(what: str) -> str:
    e = ctypes.get_errno()
    return f"{what}: {os.strerror(e)}" if e else what


# ====================================================================== entry point


def apply(job: dict, keep_fds=()) -> dict:
    """Confine this (freshly forked, single-threaded) worker process; ``keep_fds``: its protocol channel. Returns
    {layer: description} of what is active and {"missing": {layer: why}} of what is not; the parent gets it on the
    report channel."""
    import time

    t0 = time.perf_counter()
    status: dict = {"active": {}, "missing": {}}
    act, miss = status["active"], status["missing"]
    sb = job.get("sandbox") or {}
    report = sb.get("report")
    isolate = sb.get("isolate", True)
    off = set(sb.get("off", ()))
    gpu_relaxed = job.get("device", "cpu").startswith("cuda") and not sb.get("gpu_isolation")
    if gpu_relaxed:
        # On an H100 (2026-11-23, bench/gpu_sandbox_probe.py, bench/results/gpu_runs.md) torch.cuda.init() fails
        # with CUDA error 304 ("OS call failed") under the mount namespace, under Landlock, and under a seccomp
        # filter that refuses AF_UNIX sockets, each on its own; it works in a network namespace with seccomp
        # refusing every other socket family. GPU workers get that, the audit hook enforcing, and the environment,
        # limit, capability, cgroup and watchdog layers; no Landlock and no mount namespace (files outside the
        # scratch directory are guarded by the audit hook at the Python level only). Limits(gpu_isolation=True)
        # asks for the full sandbox (tests/test_gpu_faults.py::test_full_sandbox_on_the_gpu).
        off |= {"landlock"}
        sb = {**sb, "netns_only": True, "unix_sockets": True}
        miss["gpu_isolation"] = ("GPU workers: network namespace without mount namespace, seccomp allowing AF_UNIX "
                                 "sockets, no Landlock (CUDA does not start under those: bench/gpu_sandbox_probe.py); "
                                 "native code can write outside the scratch directory")
    scratch = os.path.realpath(job["scratch"])
    build_root = os.path.realpath(job["build_root"])
    limits = job.get("limits", {})
    device = job.get("device", "cpu")
    home = os.environ.get("HOME")

    _close_inherited(keep_fds, report, act)
    os.setsid()  # own process group and session: the parent kills compilers and any children with it
    act["session"] = "own session and process group, killed as a whole"
    if not sb.get("cgroup") and isolate and "cgroup" not in off and os.geteuid() == 0:
        miss["pids_cgroup"] = "no pids cgroup controller found (processes are bounded by nothing as uid 0)"
    os.chdir(scratch)
    log = os.open(os.path.join(scratch, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    _scrub_environment(scratch, build_root, job.get("threads", 1), job.get("env"))
    act["environment"] = "scrubbed (build and run variables only, no credentials)"
    use_landlock = isolate and "landlock" not in off and landlock_abi() > 0
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
        _namespaces(scratch, build_root, sb.get("overlay") if "overlay" not in off else None, hide, act, miss,
                    user_ns=os.geteuid() != 0 or bool(sb.get("userns")), net_only=bool(sb.get("netns_only")))
    _limits(limits, device, act, miss, cgroup=bool(sb.get("cgroup")))
    read_roots, exec_roots = _allowed_paths(scratch, build_root, device, sb.get("extra_read", ()))
    if use_landlock:
        _landlock(scratch, build_root, read_roots, exec_roots, device, act, miss)
    elif isolate:
        miss["landlock"] = ("turned off (Limits.isolation_off)" if "landlock" in off else
                            "not available on this kernel: reads outside the sandbox are stopped only where the mount "
                            "namespace hides them (home, /tmp), signals to same-uid processes are not scoped")
    _drop_privileges(act, miss)
    if isolate and "seccomp" not in off:
        _seccomp(act, miss, unix_sockets=bool(sb.get("unix_sockets")))
    elif isolate:
        miss["seccomp"] = "turned off (Limits.isolation_off)"
    if sb.get("cgroup"):  # the parent moves this process into its pids cgroup while it confines itself
        if _await_cgroup(os.path.basename(sb["cgroup"])):
            act["pids_cgroup"] = f"at most {limits.get('processes')} processes and threads (pids cgroup)"
        else:
            miss["pids_cgroup"] = "the parent did not move the worker into its pids cgroup"
    # Parent-death signal last: credential changes clear it.
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
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


def _await_cgroup(name: str, timeout: float = 10.0) -> bool:
    """Wait until this process is in the cgroup named ``name`` (moving a process costs the parent an RCU grace
    period, ~10 ms here, so it is done while the worker confines itself rather than before)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            with open("/proc/self/cgroup") as f:
                if any(line.rstrip("\n").endswith("/" + name) for line in f):
                    return True
        except OSError:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)


# ====================================================================== 1. environment


def _close_inherited(keep_fds, report, act: dict) -> None:
    """Close every descriptor but stdio, the protocol channel and the report channel. A forked worker holds what
    multiprocessing passed it: the resource tracker's pipe (a candidate registered files for the unconfined
    tracker to delete and made it grow without bound), the fork server's liveness pipe and the parent's sentinel;
    multiprocessing's references to them are dropped so that nothing writes to a reused number."""
    import multiprocessing.forkserver as forkserver
    import multiprocessing.process as process
    import multiprocessing.resource_tracker as resource_tracker

    keep = {0, 1, 2, *(int(fd) for fd in keep_fds)}
    if report is not None:
        keep.add(report.fileno())
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            try:
                os.close(int(name))
            except OSError:
                pass  # the listing's own descriptor
    resource_tracker._resource_tracker._fd = None  # a tracker started later runs inside the sandbox
    forkserver._forkserver._forkserver_alive_fd = None
    process._parent_process = None
    act["descriptors"] = "only stdio and its two channels (inherited ones closed)"


def _scrub_environment(scratch: str, build_root: str, threads: int, env: dict | None = None) -> None:
    """The worker's environment: what the parent allowed for this worker (``env``, filtered again here), else the
    allowed part of the one it inherited; the fork server's, which /proc/self/environ still shows, held nothing
    more (sandbox._spawn_scrubbed)."""
    keep = scrubbed_environment(os.environ if env is None else env, worker=True)
    os.environ.clear()
    os.environ.update(keep)
    os.environ.update({"HOME": scratch, "TMPDIR": scratch, "TORCH_EXTENSIONS_DIR": build_root,
                       "OMP_NUM_THREADS": str(threads), "XDG_CACHE_HOME": os.path.join(scratch, ".cache"),
                       "TRITON_CACHE_DIR": os.path.join(scratch, ".triton"),
                       "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor")})
    import tempfile

    tempfile.tempdir = scratch  # the fork server may have cached /tmp (not writable in the sandbox) before


def scrubbed_environment(env: dict | None = None, worker: bool = False) -> dict:
    """The variables of ``env`` (default: this process's) that a worker may have (``worker``), or that the fork
    server may start with: those and the ones Python and torch read when they start. Never anything named like a
    credential or holding one in a URL, and nothing not named here."""
    def allowed(k: str, v: str) -> bool:
        if SECRET_NAME.search(k) or _URL_CREDENTIAL.search(v):
            return False
        if k in _ENV_KEEP or k.startswith(_ENV_PREFIX_KEEP):
            return True
        return not worker and (k in _SERVER_KEEP or k.startswith(_SERVER_PREFIX_KEEP))

    return {k: v for k, v in dict(os.environ if env is None else env).items() if allowed(k, v)}


# ====================================================================== 2. namespaces


def _mount(src, target, fstype, flags, data=None) -> None:
    enc = lambda s: s.encode() if isinstance(s, str) else s  # noqa: E731
    if _libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise OSError(ctypes.get_errno(), _err(f"mount {target}"))


def _namespaces(scratch: str, build_root: str, overlay: dict | None, hide: list, act: dict, miss: dict,
                user_ns: bool = False, net_only: bool = False) -> None:
    flags = _CLONE_NEWNET if net_only else _CLONE_NEWNS | _CLONE_NEWNET
    uid, gid = os.geteuid(), os.getegid()
    if user_ns:
        flags |= _CLONE_NEWUSER
    if _libc.unshare(flags) != 0:
        why = _err(("unshare(network" if net_only else "unshare(mount, network") + (", user" if user_ns else "") + ")")
        miss["network_namespace"] = why + " (no network isolation beyond seccomp/Landlock)"
        if not net_only:
            miss["mount_namespace"] = why
        return
    if net_only:
        miss["mount_namespace"] = miss["build_cache_overlay"] = "network namespace only (Limits.netns_only)"
    if user_ns:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            miss["mount_namespace"] = f"user namespace maps: {exc}"
            act["network_namespace"] = "own network namespace: no interface up, loopback included"
            return
    act["network_namespace"] = "own network namespace: no interface up, loopback included"
    if net_only:
        return
    try:
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    except OSError as exc:
        miss["mount_namespace"] = str(exc)
        return
    notes = []
    if overlay:  # the build cache as an overlay: new builds and any change land in the scratch directory
        os.makedirs(overlay["upper"], exist_ok=True)
        os.makedirs(overlay["work"], exist_ok=True)
        opts = f"lowerdir={build_root},upperdir={overlay['upper']},workdir={overlay['work']},volatile"
        try:
            _mount("overlay", build_root, "overlay", _MS_NOSUID | _MS_NODEV, opts + (",userxattr" if user_ns else ""))
            act["build_cache_overlay"] = ("builds of others read-only: the cache is an overlay whose writes stay in the "
                                          "worker's scratch; the parent publishes new builds after the worker is gone")
        except OSError as exc:
            miss["build_cache_overlay"] = f"{exc} (the build cache is writable by the candidate)"
    else:
        miss["build_cache_overlay"] = "turned off (Limits.isolation_off): the build cache is writable by the candidate"
    keep = [scratch, build_root] + [p for p in _python_roots() if os.path.isdir(p)]
    for h in hide:
        h = os.path.realpath(h)
        if not os.path.isdir(h) or h == "/" or any(_under(h, k) for k in keep):
            continue
        try:
            _hide(h, keep)
            notes.append(h)
        except OSError as exc:
            miss[f"hide {h}"] = str(exc)
    # Every mount read-only, then the two writable places made writable again.
    try:
        attr = struct.pack("QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
        if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, attr, len(attr)) != 0:
            raise OSError(ctypes.get_errno(), _err("mount_setattr(/, read-only, recursive)"))
        _mount(scratch, scratch, None, _MS_BIND | _MS_REC)
        _mount(None, scratch, None, _MS_BIND | _MS_REMOUNT | _MS_NOSUID | _MS_NODEV)
        if "build_cache_overlay" not in act:
            _mount(build_root, build_root, None, _MS_BIND | _MS_REC)
        _mount(None, build_root, None, _MS_BIND | _MS_REMOUNT | _MS_NOSUID | _MS_NODEV)
        os.chdir(scratch)  # the working directory must be the writable mount, not the one beneath it
        act["mount_namespace"] = ("every mount read-only except scratch and build cache"
                                  + ("; hidden: " + ", ".join(notes) if notes else ""))
    except OSError as exc:
        miss["mount_namespace"] = f"read-only remount failed: {exc}"


def _hide(directory: str, keep: list) -> None:
    """Cover ``directory`` with an empty tmpfs, then mount back the kept paths beneath it (same paths)."""
    inner = sorted(k for k in keep if _under(k, directory) and k != directory)
    inner = [k for k in inner if not any(_under(k, o) and k != o for o in inner)]
    fds = []
    try:
        for k in inner:
            fds.append((k, os.open(k, os.O_PATH | os.O_CLOEXEC)))
        _mount("tmpfs", directory, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64k,mode=755")
        for k, fd in fds:
            os.makedirs(k, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", k, None, _MS_BIND | _MS_REC)
    finally:
        for _, fd in fds:
            os.close(fd)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# ====================================================================== 3. limits


def _limits(limits: dict, device: str, act: dict, miss: dict, cgroup: bool = False) -> None:
    def setl(which, value):
        value = int(value)
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    done = []
    # Address-space limits break CUDA (its runtime reserves terabytes of virtual memory: cudaGetDeviceCount fails
    # with "out of memory"); on a GPU the parent watches the worker's resident memory instead (sandbox.Worker).
    if limits.get("memory_bytes") and not device.startswith("cuda"):
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


# ====================================================================== 4. Landlock


_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf", "passwd", "group",
        "hosts", "host.conf", "gai.conf", "alternatives", "os-release", "debian_version", "lsb-release", "mime.types",
        "gcc", "locale.alias", "environment")


def _python_roots() -> list:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p):
            roots.add(p)
    from kbench_env import __file__ as pkg_init

    roots.add(os.path.dirname(os.path.abspath(pkg_init)))
    return sorted({os.path.realpath(r) for r in roots} | roots)


def _allowed_paths(scratch: str, build_root: str, device: str, extra=()) -> tuple[list, list]:
    system = ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"]
    cuda = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda", "/opt/cuda", "/opt/rocm"]
    # Toolchains outside the system tree (e.g. /opt/gcc on GPU images): the directories on PATH, and where the
    # compilers a build runs really live, stay executable.
    tools = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for exe in (os.environ.get("CXX"), os.environ.get("CC"), "c++", "g++", "gcc", "cc", "nvcc", "ninja"):
        found = exe and shutil.which(exe)
        if found:
            tools += [os.path.dirname(found), os.path.dirname(os.path.dirname(os.path.realpath(found)))]
    execs = system + _python_roots() + [c for c in cuda if c] + tools
    cutlass = [os.path.expanduser(os.environ.get(k, "").strip()) for k in CUTLASS_VARS if os.environ.get(k, "").strip()]
    reads = execs + ["/proc", "/sys", "/dev"] + [f"/etc/{e}" for e in _ETC] + list(extra) + cutlass
    if device.startswith("cuda"):
        reads += ["/etc/nvidia", "/var/lib/nvidia"]
    reads = [os.path.realpath(p) for p in reads if p and os.path.exists(p)]
    return sorted(set(reads) | {scratch, build_root}), sorted({os.path.realpath(p) for p in execs if os.path.exists(p)})


def landlock_abi() -> int:
    r = _libc.syscall(_SYS_LL_CREATE, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return int(r) if r > 0 else 0


def _landlock(scratch: str, build_root: str, reads: list, execs: list, device: str, act: dict, miss: dict) -> None:
    abi = landlock_abi()
    if abi < 1:
        miss["landlock"] = "not available on this kernel (reads, writes and signals rely on the other layers)"
        return
    fs = _LL_ABI1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    net = (_LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    fd = _libc.syscall(_SYS_LL_CREATE, attr, len(attr), 0)
    if fd < 0:
        miss["landlock"] = _err("landlock_create_ruleset")
        return
    fd = int(fd)
    read = _LL_READ_FILE | _LL_READ_DIR
    rules = [(p, read) for p in reads] + [(p, _LL_EXECUTE) for p in execs]
    rules += [(p, fs & ~_LL_EXECUTE) for p in (scratch, build_root)]
    rules += [(p, _LL_READ_FILE | _LL_WRITE_FILE) for p in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")]
    if device.startswith("cuda"):
        rules += [(f"/dev/{n}", _LL_READ_FILE | _LL_WRITE_FILE) for n in os.listdir("/dev")
                  if n.startswith(("nvidia", "dri"))]
    merged: dict = {}
    for p, access in rules:
        merged[p] = merged.get(p, 0) | access
    try:
        for path, access in merged.items():
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= _LL_FILE_RIGHTS
                rule = struct.pack("=Qi", access & fs, pfd)
                if _libc.syscall(_SYS_LL_ADD, fd, 1, rule, 0) != 0:  # LANDLOCK_RULE_PATH_BENEATH
                    raise OSError(ctypes.get_errno(), _err(f"landlock_add_rule({path})"))
            finally:
                os.close(pfd)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), _err("no_new_privs"))
        if _libc.syscall(_SYS_LL_RESTRICT, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), _err("landlock_restrict_self"))
    except OSError as exc:
        miss["landlock"] = str(exc)
        return
    finally:
        os.close(fd)
    extra = []
    if net:
        extra.append("TCP bind/connect denied")
    if scoped:
        extra.append("signals and abstract unix sockets scoped to the sandbox")
    else:
        miss["landlock_scoping"] = f"Landlock ABI {abi} < 6: signals to same-uid processes outside are not scoped"
    act["landlock"] = (f"ABI {abi}: reads from {len(reads)} system/Python/kbench paths + scratch + cache, writes to "
                       f"scratch + cache only, programs from system/Python paths only"
                       + ("; " + "; ".join(extra) if extra else ""))


# ====================================================================== 5. privileges


def _drop_privileges(act: dict, miss: dict) -> None:
    _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() != 0:
        act["privileges"] = "unprivileged user, no_new_privs"
        return
    for cap in range(64):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    _libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    _libc.prctl(_PR_SET_SECUREBITS, 0xEF, 0, 0, 0)  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE (+locks)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)
    if _libc.capset(header, data) != 0:
        miss["privileges"] = _err("capset") + " (the uid-0 worker keeps its capabilities)"
        return
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    act["privileges"] = "uid 0 without capabilities (bounding set empty, SECBIT_NOROOT locked), no_new_privs"


# ====================================================================== 6. seccomp


def _seccomp(act: dict, miss: dict, unix_sockets: bool = False) -> None:
    arch = _SECCOMP_ARCH.get(platform.machine())
    if arch is None:
        miss["seccomp"] = f"no system call table for {platform.machine()}"
        return
    audit_arch, nr = arch

    def ins(code, k, jt=0, jf=0):
        return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)

    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL = 0x7FFF0000, 0x80000000
    errno_ret = lambda e: 0x00050000 | e  # noqa: E731
    prog = [ins(LD, 4), ins(JEQ, audit_arch, 1, 0), ins(RET, KILL), ins(LD, 0)]
    if platform.machine() == "x86_64":
        prog += [ins(JGE, 0x40000000, 0, 1), ins(RET, KILL)]  # x32 system calls
    if unix_sockets:  # socket(AF_UNIX, ...) allowed (a GPU driver talks to its daemons over them), others refused
        prog += [ins(JEQ, nr["socket"], 0, 4), ins(LD, 16), ins(JEQ, socket.AF_UNIX, 0, 1), ins(RET, ALLOW),
                 ins(RET, errno_ret(errno.EACCES))]
        rules = [(nr["clone3"], errno_ret(errno.ENOSYS))]
    else:
        rules = [(nr["socket"], errno_ret(errno.EACCES)), (nr["clone3"], errno_ret(errno.ENOSYS))]
    rules += [(n, errno_ret(errno.EPERM)) for name, n in nr.items() if name not in ("socket", "clone3", "clone")]
    for n, ret in rules:
        prog += [ins(JEQ, n, 0, 1), ins(RET, ret)]
    prog += [ins(JEQ, nr["clone"], 0, 3), ins(LD, 16), ins(JSET, _CLONE_NS_MASK, 0, 1),
             ins(RET, errno_ret(errno.EPERM)), ins(RET, ALLOW)]
    buf = ctypes.create_string_buffer(b"".join(prog))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        miss["seccomp"] = _err("no_new_privs")
        return
    fbuf = ctypes.create_string_buffer(fprog)
    if _libc.prctl(_PR_SET_SECCOMP, 2, ctypes.addressof(fbuf), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        miss["seccomp"] = _err("seccomp filter")
        return
    act["seccomp"] = (("socket() refused for every family but AF_UNIX" if unix_sockets else "socket() refused (every family)")
                      + "; setsid, mount, namespace, module, kexec, bpf, ptrace, "
                      "keyring, io_uring and perf system calls refused")


# ====================================================================== 7. the audit hook


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_TRUSTED_WRITERS = ("torch/utils/cpp_extension.py", "torch/utils/file_baton.py", "kbench_env/", "torch/_inductor/",
                    "triton/", "setuptools/")


class Guard:
    """The audit hook: refuses and reports the candidate's Python-level attempts to leave the sandbox."""

    MAX_REPORTS = 32

    def __init__(self, scratch: str, build_root: str, read_roots: list, report=None, enforce: bool = True):
        self.scratch, self.build_root = scratch, build_root
        self.write_roots = (scratch, build_root)
        self.read_roots = tuple(read_roots)
        self.report = report
        self.enforce = enforce
        self.sent: set = set()
        self.busy = False
        self.pid = os.getpid()
        self.python = os.path.realpath(sys.executable)
        self.handlers = {"open": self._open, "os.remove": self._modify, "os.rename": self._modify2,
                         "os.replace": self._modify2, "os.mkdir": self._modify, "os.rmdir": self._modify,
                         "os.chmod": self._modify, "os.chown": self._modify, "os.symlink": self._modify2,
                         "os.link": self._modify2, "os.truncate": self._modify, "os.utime": self._modify,
                         "shutil.rmtree": self._modify, "socket.__new__": self._socket,
                         "socket.connect": self._socket_use, "socket.bind": self._socket_use,
                         "socket.sendto": self._socket_use, "socket.getaddrinfo": self._resolve,
                         "subprocess.Popen": self._popen, "os.system": self._system, "os.exec": self._exec,
                         "os.posix_spawn": self._exec, "os.spawn": self._spawn, "pty.spawn": self._system,
                         "os.kill": self._kill, "os.killpg": self._killpg}

    # -- plumbing
    def __call__(self, event, args):
        handler = self.handlers.get(event)
        if handler is None or self.busy:
            return
        self.busy = True
        try:
            problem = handler(args)
        except PermissionError:
            raise
        except Exception:  # noqa: BLE001 - a hook bug must not break the harness
            problem = None
        finally:
            self.busy = False
        if problem:
            what, block = problem
            if self._candidate_frame():  # the harness's own slips (a traceback's line lookup) are not attempts
                self.send({"kind": "violation", "what": what, "blocked": bool(block and self.enforce)})
            if block and self.enforce:
                raise PermissionError(errno.EACCES, f"sandbox: not allowed to {what}")

    def send(self, message: dict) -> None:
        if self.report is None:
            return
        key = message.get("what", message.get("kind"))
        if key in self.sent or len(self.sent) >= self.MAX_REPORTS:
            return
        self.sent.add(key)
        try:
            self.report.send_bytes(json.dumps(message).encode())
        except (OSError, ValueError):
            self.report = None

    # -- paths
    def _path(self, p):
        if isinstance(p, int) or p is None:
            return None
        p = os.fsdecode(p) if isinstance(p, (bytes, os.PathLike)) else p
        if not isinstance(p, str):
            return None
        p = os.path.abspath(p)
        if p.startswith(("/proc/", "/dev/")):
            return p
        return os.path.realpath(p)

    @staticmethod
    def _inside(p, roots):
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)

    def _proc_other(self, p):
        m = re.match(r"/proc/(\d+)(/|$)", p)
        return m is not None and int(m.group(1)) != os.getpid() and not os.path.exists(f"/proc/self/task/{m.group(1)}")

    def _candidate_frame(self) -> bool:
        """Whether the innermost frame outside this module and the standard library is the candidate's (not the
        harness's: torch's extension builder, kbench)."""
        f = sys._getframe(1)
        stdlib = os.path.dirname(os.__file__)
        while f is not None:
            name = f.f_code.co_filename
            if name == __file__ or name.startswith("<frozen") or (name.startswith(stdlib) and "-packages" not in name):
                f = f.f_back
                continue
            return not any(t in name for t in _TRUSTED_WRITERS)
        return False

    def _check_write(self, p):
        if p is None or p.startswith("/dev/") and p in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty"):
            return None
        if not self._inside(p, self.write_roots):
            return (f"write {p} (outside the scratch directory)", True)
        if self._inside(p, (self.build_root,)) and not self._inside(p, (self.scratch,)) and self._candidate_frame():
            return (f"write into the build cache from candidate code ({p})", True)
        return None

    def _check_read(self, p):
        if p is None or os.path.isdir(p):  # opening a directory reads nothing (Landlock refuses listing it)
            return None
        if p.startswith("/proc/") and self._proc_other(p):
            return (f"read {p} (another process)", True)
        if not self._inside(p, self.read_roots):
            return (f"read {p} (outside the sandbox)", True)
        return None

    # -- handlers: return (what, block) or None
    def _open(self, args):
        path, mode, flags = (list(args) + [None, None, None])[:3]
        p = self._path(path)
        writing = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
        return self._check_write(p) if writing else self._check_read(p)

    def _modify(self, args):
        return self._check_write(self._path(args[0]))

    def _modify2(self, args):
        return self._check_write(self._path(args[0])) or self._check_write(self._path(args[1]))

    def _socket(self, args):
        family = args[1] if len(args) > 1 else None
        try:
            name = socket.AddressFamily(family).name
        except (ValueError, TypeError):
            name = str(family)
        return (f"use the network (socket {name})", True)

    def _socket_use(self, args):
        return (f"use the network (socket address {args[1]!r})"[:200], True)

    def _resolve(self, args):
        return (f"use the network (resolve {args[0]!r})"[:200], True)

    def _program(self, exe, argv):
        exe = os.fsdecode(exe) if isinstance(exe, (bytes, os.PathLike)) else exe
        if not isinstance(exe, str) or not exe:
            return None
        base = os.path.basename(exe)
        text = " ".join(os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in (argv or [exe]))[:160]
        if base in SHELLS:
            return (f"spawn a shell ({text})", True)
        full = exe if "/" in exe else None
        if full is None:
            import shutil

            full = shutil.which(exe) or exe
        if _TOOL.match(base) or os.path.realpath(full) == self.python or base.startswith("python"):
            return None
        return (f"run the program {text}", True)

    def _popen(self, args):
        exe, argv = args[0], args[1]
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        return self._program(exe or (argv[0] if argv else None), argv)

    def _system(self, args):
        return (f"spawn a shell ({str(args[0])[:160]})", True)

    def _exec(self, args):
        return self._program(args[0], args[1])

    def _spawn(self, args):
        return self._program(args[1], args[2])

    def _kill(self, args):
        pid = args[0]
        if not isinstance(pid, int) or pid in (0, os.getpid()) or pid == -os.getpgid(0):
            return None
        try:
            if os.getsid(abs(pid)) == os.getsid(0):  # its own children (they stay in its session)
                return None
        except OSError:
            return None
        return (f"signal process {pid} outside the sandbox", True)

    def _killpg(self, args):
        pgid = args[0]
        if isinstance(pgid, int) and pgid not in (0, os.getpgid(0)):
            return (f"signal process group {pgid} outside the sandbox", True)
        return None

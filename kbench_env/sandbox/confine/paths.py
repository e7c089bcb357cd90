"""What a worker may read and run: the system, Python, CUDA and kbench directories (Landlock's rules, and what the
mount namespace keeps visible when it hides a directory)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from functools import lru_cache

from kbench_env.config import environ
from kbench_env.machine.device import Device

# kbench_env/ itself (this file is kbench_env/sandbox/confine/paths.py): its modules run in the worker
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf", "passwd", "group",
        "hosts", "host.conf", "gai.conf", "alternatives", "os-release", "debian_version", "lsb-release", "mime.types",
        "gcc", "locale.alias", "environment")


def python_roots() -> list:
    """The interpreter's prefixes, its site-packages directories and kbench_env's own directory."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p):
            roots.add(p)
    roots.add(_PACKAGE_ROOT)
    return sorted({os.path.realpath(r) for r in roots} | roots)


def allowed_paths(scratch: str, build_root: str, device: str, extra=()) -> tuple[list, list]:
    """(directories and files the worker may read, directories it may run programs from)."""
    system = ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"]
    cuda = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda", "/opt/cuda", "/opt/rocm"]
    # Toolchains outside the system tree (e.g. /opt/gcc on GPU images): the directories on PATH, and where the
    # compilers a build runs really live, stay executable.
    tools = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for exe in (os.environ.get("CXX"), os.environ.get("CC"), "c++", "g++", "gcc", "cc", "nvcc", "ninja"):
        found = exe and shutil.which(exe)
        if found:
            tools += [os.path.dirname(found), os.path.dirname(os.path.dirname(os.path.realpath(found)))]
    execs = system + python_roots() + [c for c in cuda if c] + tools
    cutlass = [os.path.expanduser(path) for path in environ.cutlass_checkouts()]  # backends/cutlass.py
    reads = execs + ["/proc", "/sys", "/dev"] + [f"/etc/{e}" for e in _ETC] + list(extra) + cutlass
    if Device.parse(device).is_cuda:
        reads += ["/etc/nvidia", "/var/lib/nvidia"]
    reads = [os.path.realpath(p) for p in reads if p and os.path.exists(p)]
    return sorted(set(reads) | {scratch, build_root}), sorted({os.path.realpath(p) for p in execs if os.path.exists(p)})


@lru_cache(maxsize=1)
def compiler_dirs() -> list:
    """Directories that hold only the compilers' own programs (g++'s cc1plus and collect2, nvcc's bin and nvvm):
    hidden from a candidate's worker, which the trusted builder compiles for (the run-time libraries, libgomp and
    libstdc++, live elsewhere)."""
    found = []
    cxx = os.environ.get("CXX", "c++")
    try:
        prog = subprocess.run([cxx, "-print-prog-name=cc1plus"], capture_output=True, text=True, timeout=10).stdout
        if os.path.isabs(prog.strip()):
            found.append(os.path.dirname(os.path.realpath(prog.strip())))
    except (OSError, subprocess.TimeoutExpired):
        pass
    homes = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda", "/opt/cuda"]
    for home in homes + glob.glob("/usr/local/cuda-*"):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            home = os.path.realpath(home)
            found += [os.path.join(home, "bin"), os.path.join(home, "nvvm")]
    return sorted({d for d in found if os.path.isdir(d) and d not in ("/usr/bin", "/bin", "/usr/local/bin")})

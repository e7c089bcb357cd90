"""The namespace layer: a network namespace with no interface up, and a mount namespace in which every mount is
read-only but the scratch directory (the build cache among them: only the trusted builder writes it), with chosen
directories hidden under an empty tmpfs."""

from __future__ import annotations

import ctypes
import os
import struct

from kbench_env.sandbox.confine.libc import err, libc
from kbench_env.sandbox.confine.paths import python_roots

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 32, 4096, 16384, 1 << 18
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
_SYS_MOUNT_SETATTR = 442


def _mount(src, target, fstype, flags, data=None) -> None:
    enc = lambda s: s.encode() if isinstance(s, str) else s  # noqa: E731
    if libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise OSError(ctypes.get_errno(), err(f"mount {target}"))


def enter(scratch: str, build_root: str, hide: list, act: dict, miss: dict, user_ns: bool = False,
          net_only: bool = False) -> None:
    """Enter the namespaces (a network namespace only with ``net_only``); what is active goes into ``act``, what
    is not and why into ``miss``."""
    flags = _CLONE_NEWNET if net_only else _CLONE_NEWNS | _CLONE_NEWNET
    uid, gid = os.geteuid(), os.getegid()
    if user_ns:
        flags |= _CLONE_NEWUSER
    if libc.unshare(flags) != 0:
        why = err(("unshare(network" if net_only else "unshare(mount, network") + (", user" if user_ns else "") + ")")
        miss["network_namespace"] = why + " (no network isolation beyond seccomp/Landlock)"
        if not net_only:
            miss["mount_namespace"] = why
        return
    if net_only:
        miss["mount_namespace"] = "network namespace only (Limits.netns_only)"
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
    keep = [scratch, build_root] + [p for p in python_roots() if os.path.isdir(p)]
    for h in hide:
        h = os.path.realpath(h)
        if not os.path.isdir(h) or h == "/" or any(_under(h, k) for k in keep):
            continue
        try:
            _hide(h, keep)
            notes.append(h)
        except OSError as exc:
            miss[f"hide {h}"] = str(exc)
    # Every mount read-only (the build cache included), then the scratch directory made writable again.
    try:
        attr = struct.pack("QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
        if libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, attr, len(attr)) != 0:
            raise OSError(ctypes.get_errno(), err("mount_setattr(/, read-only, recursive)"))
        _mount(scratch, scratch, None, _MS_BIND | _MS_REC)
        _mount(None, scratch, None, _MS_BIND | _MS_REMOUNT | _MS_NOSUID | _MS_NODEV)
        os.chdir(scratch)  # the working directory must be the writable mount, not the one beneath it
        act["mount_namespace"] = ("every mount read-only except scratch (the build cache included)"
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


"""The seccomp layer: a filter that refuses socket() (every family, or every family but AF_UNIX), mount, namespace,
module, kexec, bpf, ptrace, keyring, io_uring and perf system calls and setsid(), refuses clone3 as unimplemented
(glibc falls back to clone, whose namespace flags are refused), and kills 32-bit and x32 system calls."""

from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct

from kbench_env.sandbox.confine.libc import PR_SET_NO_NEW_PRIVS, err, libc

_PR_SET_SECCOMP = 22
_CLONE_NS_MASK = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

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


def install(act: dict, miss: dict, unix_sockets: bool = False) -> None:
    """Install the filter (``unix_sockets``: socket(AF_UNIX, ...) allowed, for a GPU driver's daemons)."""
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
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        miss["seccomp"] = err("no_new_privs")
        return
    fbuf = ctypes.create_string_buffer(fprog)
    if libc.prctl(_PR_SET_SECCOMP, 2, ctypes.addressof(fbuf), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        miss["seccomp"] = err("seccomp filter")
        return
    act["seccomp"] = (("socket() refused for every family but AF_UNIX" if unix_sockets else "socket() refused (every family)")
                      + "; setsid, mount, namespace, module, kexec, bpf, ptrace, "
                      "keyring, io_uring and perf system calls refused")

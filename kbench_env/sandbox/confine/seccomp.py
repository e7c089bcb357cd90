"""The seccomp layer: a filter that refuses socket() (every family, or every family but AF_UNIX), mount, namespace,
module, kexec, bpf, ptrace, keyring, io_uring, Linux AIO and perf system calls, refuses clone3 as unimplemented
(glibc falls back to clone, whose flags it can read), and kills 32-bit and x32 system calls.

It also keeps every process of the worker inside the stop the trusted side puts it in to write a timed block's
inputs and read its outputs (sandbox/memory.py; issue #34's freezer race):

- clone with CLONE_VM but without CLONE_THREAD is refused (EPERM): a process that shares the worker's memory
  outside its thread group. vfork's form (CLONE_VM with CLONE_VFORK: posix_spawn, Python's subprocess) stays: its
  caller waits until the child execs or exits, so it cannot be a helper that hops pids;
- setsid and setpgid are refused: every process the worker starts stays in its session and process group, which
  the stop by signal reaches as a whole (the stop where no freezer cgroup is at hand);
- SIGCONT is refused wherever the filter can read the signal (kill, tkill, tgkill, rt_(tg)sigqueueinfo,
  pidfd_send_signal, fcntl F_SETSIG, a child's exit signal): one process must not resume another that the trusted
  side stopped. Where the stop is by signal (``signal_stop``), timer_create and mq_notify, whose signal the filter
  cannot read (it is in a struct), are refused too;
- Linux AIO (io_setup, io_submit) is refused, as io_uring is: its work goes on in the kernel after the submitting
  thread returned, and so after the worker was stopped.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct

from kbench_env.sandbox.confine.libc import PR_SET_NO_NEW_PRIVS, err, libc

_PR_SET_SECCOMP = 22
_CLONE_NS_MASK = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_VM, _CLONE_VFORK, _CLONE_THREAD, _CSIGNAL = 0x100, 0x4000, 0x10000, 0xFF
_SIGCONT = 18  # the same on x86_64 and aarch64
_F_SETSIG = 10

# seccomp: per-architecture audit arch and system call numbers
_SECCOMP_ARCH = {
    "x86_64": (0xC000003E, dict(
        socket=41, ptrace=101, mount=165, umount2=166, pivot_root=155, chroot=161, swapon=167, swapoff=168,
        reboot=169, acct=163, init_module=175, delete_module=176, finit_module=313, kexec_load=246,
        kexec_file_load=320, add_key=248, request_key=249, keyctl=250, unshare=272, setns=308, perf_event_open=298,
        name_to_handle_at=303, open_by_handle_at=304, process_vm_readv=310, process_vm_writev=311, bpf=321,
        userfaultfd=323, fanotify_init=300, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442,
        io_setup=206, io_submit=209, clone3=435, clone=56, setsid=112, setpgid=109)),
    "aarch64": (0xC00000B7, dict(
        socket=198, ptrace=117, mount=40, umount2=39, pivot_root=41, chroot=51, swapon=224, swapoff=225,
        reboot=142, acct=89, init_module=105, delete_module=106, finit_module=273, kexec_load=104,
        kexec_file_load=294, add_key=217, request_key=218, keyctl=219, unshare=97, setns=268, perf_event_open=241,
        name_to_handle_at=264, open_by_handle_at=265, process_vm_readv=270, process_vm_writev=271, bpf=280,
        userfaultfd=282, fanotify_init=262, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442,
        io_setup=0, io_submit=2, clone3=435, clone=220, setsid=157, setpgid=154)),
}
# System calls that send a signal: (x86_64 number, aarch64 number, the index of the signal among the arguments)
_SIGNALLING = {"kill": (62, 129, 1), "tkill": (200, 130, 1), "tgkill": (234, 131, 2), "rt_sigqueueinfo": (129, 138, 1),
               "rt_tgsigqueueinfo": (297, 240, 2), "pidfd_send_signal": (424, 424, 1)}
_FCNTL = {"x86_64": 72, "aarch64": 25}
# Refused where the stop is by signal: they deliver a signal named in a struct the filter cannot read.
_SIGNAL_STRUCT = {"x86_64": (222, 244), "aarch64": (107, 184)}  # timer_create, mq_notify


LD, ALU_AND, JEQ, JGE, JSET, RET = 0x20, 0x54, 0x15, 0x35, 0x45, 0x06
ALLOW, KILL = 0x7FFF0000, 0x80000000


def _ins(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _errno(e: int) -> int:
    return 0x00050000 | e


def _arg(i: int) -> int:
    """Offset of the low 32 bits of argument ``i`` in struct seccomp_data (little-endian)."""
    return 16 + 8 * i


def _sigcont_rules(machine: str) -> list:
    """Refuse SIGCONT wherever a system call names its signal in an argument (each rule loads what it compares)."""
    prog = []
    for x86, arm, i in _SIGNALLING.values():
        prog += [_ins(LD, 0), _ins(JEQ, x86 if machine == "x86_64" else arm, 0, 3), _ins(LD, _arg(i)),
                 _ins(JEQ, _SIGCONT, 0, 1), _ins(RET, _errno(errno.EPERM))]
    prog += [_ins(LD, 0), _ins(JEQ, _FCNTL[machine], 0, 5), _ins(LD, _arg(1)), _ins(JEQ, _F_SETSIG, 0, 3),
             _ins(LD, _arg(2)), _ins(JEQ, _SIGCONT, 0, 1), _ins(RET, _errno(errno.EPERM))]
    return prog


def _clone_rules(nr_clone: int) -> list:
    """clone (the system call number in A): namespace flags refused; CLONE_VM without CLONE_THREAD refused unless
    CLONE_VFORK; SIGCONT as a child's exit signal refused; everything else (and every other call) allowed."""
    eperm = _errno(errno.EPERM)
    return [_ins(JEQ, nr_clone, 0, 10),                  # 0: not clone -> 11
            _ins(LD, _arg(0)),                           # 1: the flags
            _ins(JSET, _CLONE_NS_MASK, 0, 1),            # 2
            _ins(RET, eperm),                            # 3: a namespace
            _ins(JSET, _CLONE_THREAD, 6, 0),             # 4: a thread -> 11
            _ins(JSET, _CLONE_VM, 0, 2),                 # 5: no shared memory -> 8
            _ins(JSET, _CLONE_VFORK, 1, 0),              # 6: vfork -> 8
            _ins(RET, eperm),                            # 7: CLONE_VM outside the thread group
            _ins(ALU_AND, _CSIGNAL),                     # 8: the exit signal
            _ins(JEQ, _SIGCONT, 0, 1),                   # 9
            _ins(RET, eperm),                            # 10
            _ins(RET, ALLOW)]                            # 11


def install(act: dict, miss: dict, unix_sockets: bool = False, signal_stop: bool = False,
            process_groups: bool = False) -> None:
    """Install the filter (``unix_sockets``: socket(AF_UNIX, ...) allowed, for a GPU driver's daemons;
    ``signal_stop``: the trusted side stops the worker by signal, not with a freezer cgroup; ``process_groups``:
    setpgid allowed, for the builder, which runs each compiler in a process group of its own and is never
    stopped)."""
    machine = platform.machine()
    arch = _SECCOMP_ARCH.get(machine)
    if arch is None:
        miss["seccomp"] = f"no system call table for {machine}"
        return
    audit_arch, nr = arch
    prog = [_ins(LD, 4), _ins(JEQ, audit_arch, 1, 0), _ins(RET, KILL), _ins(LD, 0)]
    if machine == "x86_64":
        prog += [_ins(JGE, 0x40000000, 0, 1), _ins(RET, KILL)]  # x32 system calls
    if unix_sockets:  # socket(AF_UNIX, ...) allowed (a GPU driver talks to its daemons over them), others refused
        prog += [_ins(JEQ, nr["socket"], 0, 4), _ins(LD, 16), _ins(JEQ, socket.AF_UNIX, 0, 1), _ins(RET, ALLOW),
                 _ins(RET, _errno(errno.EACCES)), _ins(LD, 0)]
        rules = [(nr["clone3"], _errno(errno.ENOSYS))]
    else:
        rules = [(nr["socket"], _errno(errno.EACCES)), (nr["clone3"], _errno(errno.ENOSYS))]
    rules += [(n, _errno(errno.EPERM)) for name, n in nr.items()
              if name not in ("socket", "clone3", "clone") and not (process_groups and name == "setpgid")]
    if signal_stop:
        rules += [(n, _errno(errno.EPERM)) for n in _SIGNAL_STRUCT[machine]]
    for n, ret in rules:
        prog += [_ins(JEQ, n, 0, 1), _ins(RET, ret)]
    prog += _sigcont_rules(machine) + [_ins(LD, 0)] + _clone_rules(nr["clone"])
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
                      + "; setsid, " + ("" if process_groups else "setpgid, ") + "mount, namespace, module, kexec, bpf, ptrace, keyring, io_uring, AIO and "
                      "perf system calls refused; CLONE_VM processes outside the thread group (vfork's aside) and "
                      "SIGCONT refused" + ("; timer_create and mq_notify refused (the stop is by signal)"
                                           if signal_stop else ""))

"""The audit-hook layer: a Python audit hook (``Guard``) that refuses, and reports to the parent on a channel of its
own, what the candidate's Python code tries outside the sandbox. A report layer, not the wall: native code bypasses
it, the layers beneath do not."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import sys

from kbench_env.sandbox.confine.record_controls import is_record_control

# Programs the candidate's Python code may start: the compiler tool chain (and the interpreter, which
# torch.compile's workers need). Everything else, shells first, is refused and reported.
_TOOL = re.compile(r"^(?:[\w.]+-)*(?:c\+\+|g\+\+|gcc|cc|cpp|clang|clang\+\+|ld|ld\.\w+|as|ar|nvcc|ptxas|fatbinary|"
                   r"nvlink|cuobjdump|nvdisasm|cicc|ninja|which|icpx|hipcc|ldconfig|ldconfig\.real|uname|lscpu|"
                   r"getconf|nvidia-smi|whereis)(?:-[\d.]+)?$")
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox", "rbash", "ash"}

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_TRUSTED_WRITERS = ("torch/utils/cpp_extension.py", "torch/utils/file_baton.py", "kbench_env/", "torch/_inductor/",
                    "triton/", "setuptools/")


class Guard:
    """The audit hook: refuses and reports the candidate's Python-level attempts to leave the sandbox."""

    MAX_REPORTS = 32

    def __init__(self, scratch: str, build_root: str, read_roots: list, report=None, enforce: bool = True):
        self.scratch, self.build_root = scratch, build_root
        self.write_roots = (scratch,)
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
                         "os.kill": self._kill, "os.killpg": self._killpg,
                         # PyTorch's operator-record switches (worker/record_switches.py), by name or through ctypes
                         "kbench.record_switch": self._record_switch, "ctypes.dlsym": self._dlsym,
                         "ctypes.dlsym/handle": self._dlsym}

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
            # the harness's own slips (a traceback's line lookup) are not attempts; kbench's own events are raised
            # only on the candidate's behalf (a refused record switch)
            if event.startswith("kbench.") or self._candidate_frame():
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
        if self._inside(p, (self.build_root,)) and not self._inside(p, (self.scratch,)):
            return (f"write into the build cache ({p}): only the trusted builder writes it", True)
        if not self._inside(p, self.write_roots):
            return (f"write {p} (outside the scratch directory)", True)
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

    def _record_switch(self, args):
        return (f"switch PyTorch's operator records ({args[0]}), which hides operators from the forward audit", True)

    def _dlsym(self, args):
        name = args[-1]
        name = os.fsdecode(name) if isinstance(name, bytes) else name
        if isinstance(name, str) and is_record_control(name):
            return (f"look up {name[:80]} through ctypes (a switch of PyTorch's operator records)", True)
        return None

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

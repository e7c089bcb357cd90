"""The precompiled header of the binding translation unit (the ``main.cpp`` that load_inline writes): the torch
headers the builder itself puts on top of it (light: <torch/types.h> + <torch/python.h>; as written:
<torch/extension.h>), compiled once per (compiler, exact host flags, header text) into a GCC ``.gch`` in the
builder's scratch directory and handed to every later build with the same flags by ``-include``: that file's
compile takes about half the CPU time (build cost in bench/RESULTS.md); the candidate's own text comes after.

Only the heads the builder writes are precompiled, never a candidate's own includes, and at most ``MAX_HEADERS``
flag sets get one (each is hundreds of MB), so candidates cannot fill the disk with them. GCC checks a ``.gch``
against the flags of the compile that reads it and falls back to the header's text when they differ, so a
precompiled header can make a build faster, never different. The scratch directory is the builder's own (no worker
can write it) and is removed with it (client.Builder.close).

The same directory keeps the binding objects of earlier builds (reused when a build's binding file and flags are
the same, the module's name apart where the file uses it only to name the module: name_free) and the precompiled
shared starts of nvcc's host compiles (``host_prefix``, builder/nvcc_steps.py: a candidate's own includes among
them, so at most ``MAX_HOST_PREFIXES`` are kept, the least recently used dropped).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shlex
import shutil
import threading
import time

from kbench_env.builder.compiler import CompileError, run

HEADER = "kb_binding.h"
#: BindingHeaders' counters: binding heads made, reused and waited for (of those reused), binding objects reused, host
#: compiles' shared starts made, reused and waited for.
COUNTS = ("made", "reused", "waited", "objects_reused", "host_made", "host_reused", "host_waited")
MAX_HEADERS = 4
OBJECTS = "objects"
MAX_OBJECTS = 256  # binding objects kept (a few MB each)
HOST = "host"
MAX_HOST_PREFIXES = 6  # shared starts of nvcc's host compiles (builder/nvcc_steps.py), a few hundred MB each
#: The heads builder/torch_ext.py and backends/extension.py put on top of main.cpp, longest first.
HEADS = ("#include <torch/types.h>\n#include <torch/python.h>\n", "#include <torch/extension.h>\n",
         "#include <torch/types.h>\n")
EXTENSION_NAME = re.compile(r"(?:^|\s)-DTORCH_EXTENSION_NAME=\S+")
_MODULE_MACRO = re.compile(r"\bPYBIND11_MODULE\(\s*TORCH_EXTENSION_NAME\s*,")


def head_of(text: str) -> str | None:
    """The builder-written head ``text`` starts with, or None (nothing to precompile)."""
    return next((h for h in HEADS if text.startswith(h)), None)


def binding_key(ninja_file: str, text: str, head: str | None = None) -> str:
    """What the binding object of a torch build.ninja's C++ compile depends on: the compiler, its whole flag lines
    (the include paths among them; the module's name unless ``text`` is name_free) and the file's text; the torch
    and compiler versions are the builder's (its build store's units name them too). ``head``: the precompiled
    head the builder put in the flags (``-include``), left out of the key: it is the text the file starts with
    (header_for), so an object compiled with it is the object compiled without it, and a build that finds the
    head made reuses the binding an earlier build compiled before it was."""
    free = name_free(text)
    with open(ninja_file) as f:
        values = ninja_values(f.read())
    if head is not None and "cflags" in values:
        values["cflags"] = without_head(values["cflags"], head)
    values = {k: (EXTENSION_NAME.sub("", v) if free else v).strip() for k, v in values.items()}
    spec = "\n".join([values.get("cxx", ""), values.get("cflags", ""), values.get("post_cflags", ""),
                      f"name-free: {free}", text])
    return hashlib.sha256(spec.encode()).hexdigest()[:32]


def name_free(text: str) -> bool:
    """Whether the object of the binding file ``text`` is the same for every module name but for the name of its
    init function: the file names the module (``TORCH_EXTENSION_NAME``) only as ``PYBIND11_MODULE``'s first
    argument, and pybind11 initialises modules in multi-phase, where the module is named by its import spec
    (the name written in the module's definition is not read). Such an object, compiled for one module, serves
    another once its ``PyInit_`` function is renamed (rename_module): a candidate that names its extension anew
    need not compile its binding again."""
    return (text.count("EXTENSION_NAME") == 1 and _MODULE_MACRO.search(text) is not None
            and _pybind11_major() >= 3)


@functools.lru_cache(maxsize=1)
def _pybind11_major() -> int:
    """The major version of the pybind11 that torch ships (its headers are the ones main.cpp includes), or 0."""
    import torch.utils.cpp_extension as cpp  # late: the fork server imports this module

    for root in cpp.include_paths():
        with contextlib.suppress(OSError):
            with open(os.path.join(root, "pybind11", "detail", "common.h")) as f:
                m = re.search(r"^#define PYBIND11_VERSION_MAJOR (\d+)", f.read(), re.M)
            return int(m.group(1)) if m else 0
    return 0


def rename_module(path: str, name: str, timeout: float) -> bool:
    """Make the binding object ``path`` (a name_free file's) define module ``name``'s init function in place of the
    module's it was compiled for; False where it does not define exactly one ``PyInit_`` function or binutils'
    nm and objcopy are not there (then the binding is compiled for ``name``)."""
    nm, objcopy = shutil.which("nm"), shutil.which("objcopy")
    if nm is None or objcopy is None or not re.fullmatch(r"[A-Za-z_]\w*", name):
        return False

    def inits() -> list:
        out = run([nm, "-g", "-P", "--defined-only", path], os.path.dirname(path), timeout, "nm")
        return [line.split()[0] for line in out.splitlines() if line.startswith("PyInit_")]

    try:
        found = inits()
        if len(found) != 1:
            return False
        if found[0] != "PyInit_" + name:
            run([objcopy, "--redefine-sym", f"{found[0]}=PyInit_{name}", path], os.path.dirname(path), timeout,
                "objcopy")
            return inits() == ["PyInit_" + name]
        return True
    except CompileError:
        return False


def ninja_flags(ninja_file: str) -> tuple[str, str, str]:
    """(compiler, flags before the source, flags after it) of a torch build.ninja's C++ compile, the module's name
    left out (the headers do not use it, so GCC accepts the header for any module)."""
    with open(ninja_file) as f:
        values = {k: EXTENSION_NAME.sub("", v).strip() for k, v in ninja_values(f.read()).items()}
    return values.get("cxx") or "c++", values.get("cflags", ""), values.get("post_cflags", "")


def ninja_values(text: str) -> dict:
    """The lines of a torch build.ninja's C++ compile (``cxx``, ``cflags``, ``post_cflags``) as written."""
    values = {}
    for line in text.splitlines():
        key, eq, value = line.partition(" = ")
        if eq and key in ("cxx", "cflags", "post_cflags"):
            values[key] = value
    return values


def without_head(cflags: str, head: str) -> str:
    """``cflags`` less the ``-include`` of the precompiled head ``head`` the builder put there."""
    return re.sub(rf"(?<!\S)-include {re.escape(head)}(?!\S)", "", cflags)


class BindingHeaders:
    """The precompiled heads under ``root``. With ``background``, a build that finds none starts making it in a
    thread and goes on without it (the first builds of a cold builder are not held up by it); otherwise that build
    makes it and uses it. ``made`` and ``reused`` count the heads made and the builds that found one made."""

    MAKE_TIMEOUT_S = 900.0

    def __init__(self, root: str, background: bool = False):
        self.root, self.background = os.path.realpath(root), background
        self.made = self.reused = self.waited = self.objects_reused = self.host_made = self.host_reused = 0
        self.host_waited = 0
        self._lock = threading.Lock()
        self._making: dict = {}  # key -> the thread making it
        self._host_making: dict = {}  # key -> the thread making it, while it does
        self._host_failed: set = set()  # keys whose text did not compile as a header: not tried again

    def header_for(self, head: str, flags: tuple[str, str, str], timeout: float) -> str | None:
        """The path of ``head`` as a header with its ``.gch`` beside it (made now if need be and not in the
        background, with ``flags``: ninja_flags' answer), or None (not made yet, or no more may be made)."""
        key = self._key(head, flags)
        header = os.path.join(self.root, key, HEADER)
        if os.path.isfile(header + ".gch"):  # renamed into place whole, after the header
            self._count("reused")
            return header
        if not self.background:
            return header if self._make(key, head, flags, timeout) else None
        with self._lock:
            if key not in self._making and len(self._making) < MAX_HEADERS:
                self._making[key] = threading.Thread(target=self._make, args=(key, head, flags, self.MAKE_TIMEOUT_S),
                                                     daemon=True, name="kbench-pch")
                self._making[key].start()
        return None

    def wait_for(self, head: str, flags: tuple[str, str, str], timeout: float, stop=None) -> str | None:
        """The path of ``head``'s precompiled header once the background thread making it (``header_for`` started
        it) has made it, waiting until ``timeout`` runs out or ``stop`` (a threading.Event) is set; None where it
        is not being made, failed, or is not made by then."""
        key = self._key(head, flags)
        header = os.path.join(self.root, key, HEADER)
        if self._joined(self._making, key, timeout, stop) and os.path.isfile(header + ".gch"):
            self._count("reused")
            self._count("waited")
            return header
        return None

    @staticmethod
    def _key(head: str, flags: tuple[str, str, str]) -> str:
        cxx, cflags, post = flags
        return hashlib.sha256(f"{cxx}\n{cflags}\n{post}\n{head}".encode()).hexdigest()[:24]

    def _joined(self, making: dict, key: str, timeout: float, stop=None) -> bool:
        """Whether the thread making ``key`` (in ``making``), if any, ended within ``timeout`` seconds (before
        ``stop`` was set)."""
        with self._lock:
            thread = making.get(key)
        deadline = time.monotonic() + max(0.0, timeout)
        while thread is not None and thread.is_alive():
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return False
            thread.join(min(0.25, left))  # in slices: ``stop`` is looked at between them
        return True

    def binding_object(self, key: str) -> str | None:
        """The path of the binding object compiled before under ``key`` (binding_key), or None."""
        path = os.path.join(self.root, OBJECTS, key + ".o")
        if os.path.isfile(path):
            self._count("objects_reused")
            return path
        return None

    def keep_binding_object(self, key: str, path: str) -> None:
        """Keep a copy of the binding object ``path`` under ``key``, the oldest dropped past MAX_OBJECTS."""
        directory = os.path.join(self.root, OBJECTS)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, os.path.join(directory, key + ".o"))  # whole, or not at all
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        kept = sorted((e.stat().st_mtime, e.path) for e in os.scandir(directory) if e.name.endswith(".o"))
        for _, old in kept[:max(0, len(kept) - MAX_OBJECTS)]:
            with contextlib.suppress(OSError):
                os.unlink(old)

    def host_prefix(self, key: str, text: str, command, timeout: float, wait: float = 0.0) -> str | None:
        """The ``.gch`` of ``text`` (the shared start of an nvcc host compile's input, builder/nvcc_steps.py) kept
        under ``key``, made with ``command(header, output)`` (an argv) now if need be and not in the background, or
        None (not made within ``wait`` seconds, or it failed). The least recently used are dropped past
        MAX_HOST_PREFIXES."""
        directory = os.path.join(self.root, HOST, key)
        gch = os.path.join(directory, HEADER + ".gch")
        if os.path.isfile(gch):
            with contextlib.suppress(OSError):
                os.utime(directory)  # used: kept longest
            self._count("host_reused")
            return gch
        if key in self._host_failed:
            return None
        if not self.background:
            return gch if self._make_host(key, text, command, timeout) else None
        with self._lock:
            if key not in self._host_making:
                self._host_making[key] = threading.Thread(target=self._make_host, daemon=True, name="kbench-pch",
                                                          args=(key, text, command, self.MAKE_TIMEOUT_S))
                self._host_making[key].start()
        if wait > 0 and self._joined(self._host_making, key, wait) and os.path.isfile(gch):
            self._count("host_reused")
            self._count("host_waited")
            return gch
        return None

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the heads being made in the background."""
        for thread in list(self._making.values()) + list(self._host_making.values()):
            thread.join(timeout)

    def _make_host(self, key: str, text: str, command, timeout: float) -> bool:
        root = os.path.join(self.root, HOST)
        directory = os.path.join(root, key)
        header = os.path.join(directory, HEADER)
        os.makedirs(root, exist_ok=True)
        try:
            with self._locked(HOST):  # one maker at a time across the builder's threads and processes
                if os.path.isfile(header + ".gch"):
                    return True
                kept = sorted((e.stat().st_mtime, e.path) for e in os.scandir(root) if e.is_dir())
                for _, old in kept[:max(0, len(kept) - MAX_HOST_PREFIXES + 1)]:
                    shutil.rmtree(old, ignore_errors=True)  # a compile that opened its .gch keeps reading it
                os.makedirs(directory, exist_ok=True)
                with open(header, "w") as f:
                    f.write(text)
                try:
                    run(command(header, header + ".gch.tmp"), directory, timeout,
                        "Error precompiling the host compile's shared start")
                except CompileError:
                    shutil.rmtree(directory, ignore_errors=True)
                    with self._lock:
                        if len(self._host_failed) < MAX_OBJECTS:
                            self._host_failed.add(key)
                    return False  # this and later builds compile the whole input
                os.rename(header + ".gch.tmp", header + ".gch")
                self._count("host_made")
                return True
        finally:
            with self._lock:
                self._host_making.pop(key, None)

    def _make(self, key: str, head: str, flags: tuple[str, str, str], timeout: float) -> bool:
        cxx, cflags, post = flags
        directory = os.path.join(self.root, key)
        header = os.path.join(directory, HEADER)
        os.makedirs(self.root, exist_ok=True)
        with self._locked(key):  # one maker across the builder's threads and processes
            if os.path.isfile(header + ".gch"):
                return True
            made = [d for d in os.listdir(self.root) if os.path.isfile(os.path.join(self.root, d, HEADER + ".gch"))]
            if len(made) >= MAX_HEADERS:
                return False
            os.makedirs(directory, exist_ok=True)
            with open(header, "w") as f:
                f.write(head)
            tmp = header + ".gch.tmp"
            command = [*shlex.split(cxx), "-x", "c++-header", *shlex.split(cflags), header, "-o", tmp,
                       *shlex.split(post)]
            try:
                run(command, directory, timeout, "Error precompiling the binding's torch headers")
            except CompileError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                return False  # builds go on without it (and say what is wrong if the headers are)
            os.rename(tmp, header + ".gch")
            self._count("made")
            return True

    def counts(self) -> dict:
        """What the heads and objects served so far (COUNTS): a build's reply carries them (builder/server.py)."""
        with self._lock:
            return {k: getattr(self, k) for k in COUNTS}

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    @contextlib.contextmanager
    def _locked(self, key: str):
        fd = os.open(os.path.join(self.root, key + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

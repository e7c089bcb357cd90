"""The precompiled header of the binding translation unit (the ``main.cpp`` that load_inline writes): the torch
headers the builder itself puts on top of it (light: <torch/types.h> + <torch/python.h>; as written:
<torch/extension.h>), compiled once per (compiler, exact host flags, header text) into a GCC ``.gch`` in the
builder's scratch directory and handed to every later build with the same flags by ``-include``. Parsing those
headers is most of that file's compile (bench/results/build_cost_cpu.md); the candidate's own text still comes after.

Only the heads the builder writes are precompiled, never a candidate's own includes, and at most ``MAX_HEADERS``
flag sets get one (each is hundreds of MB), so candidates cannot fill the disk with them. GCC checks a ``.gch``
against the flags of the compile that reads it and falls back to the header's text when they differ, so a
precompiled header can make a build faster, never different. The scratch directory is the builder's own (no worker
can write it); it goes with the builder process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import threading

from kbench_env.builder.compiler import CompileError, run

HEADER = "kb_binding.h"
MAX_HEADERS = 4
#: The heads builder/torch_ext.py and backends/extension.py put on top of main.cpp, longest first.
HEADS = ("#include <torch/types.h>\n#include <torch/python.h>\n", "#include <torch/extension.h>\n",
         "#include <torch/types.h>\n")
_EXTENSION_NAME = re.compile(r"(?:^|\s)-DTORCH_EXTENSION_NAME=\S+")


def head_of(text: str) -> str | None:
    """The builder-written head ``text`` starts with, or None (nothing to precompile)."""
    return next((h for h in HEADS if text.startswith(h)), None)


def ninja_flags(ninja_file: str) -> tuple[str, str, str]:
    """(compiler, flags before the source, flags after it) of a torch build.ninja's C++ compile, the module's name
    left out (the headers do not use it, so GCC accepts the header for any module)."""
    values = {}
    with open(ninja_file) as f:
        for line in f:
            key, eq, value = line.partition(" = ")
            if eq and key in ("cxx", "cflags", "post_cflags"):
                values[key] = _EXTENSION_NAME.sub("", value).strip()
    return values.get("cxx") or "c++", values.get("cflags", ""), values.get("post_cflags", "")


class BindingHeaders:
    """The precompiled heads under ``root``; ``made`` and ``reused`` count the builds that made one and that found
    one already made."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self.made = self.reused = 0
        self._count_lock = threading.Lock()

    def header_for(self, head: str, flags: tuple[str, str, str], timeout: float) -> str | None:
        """The path of ``head`` as a header with its ``.gch`` beside it (made now if need be, with ``flags``:
        ninja_flags' answer), or None where no more precompiled headers may be made."""
        cxx, cflags, post = flags
        key = hashlib.sha256(f"{cxx}\n{cflags}\n{post}\n{head}".encode()).hexdigest()[:24]
        directory = os.path.join(self.root, key)
        header = os.path.join(directory, HEADER)
        os.makedirs(self.root, exist_ok=True)
        with self._locked(key):
            if os.path.isfile(header + ".gch"):
                self._count("reused")
                return header
            made = [d for d in os.listdir(self.root) if os.path.isfile(os.path.join(self.root, d, HEADER + ".gch"))]
            if len(made) >= MAX_HEADERS:
                return None
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
                return None  # the build goes on without it (and says what is wrong if the headers are)
            os.rename(tmp, header + ".gch")
            self._count("made")
            return header

    def _count(self, what: str) -> None:
        with self._count_lock:
            setattr(self, what, getattr(self, what) + 1)

    @contextlib.contextmanager
    def _locked(self, key: str):
        fd = os.open(os.path.join(self.root, key + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

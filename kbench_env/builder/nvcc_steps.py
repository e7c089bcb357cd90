"""nvcc's compile of one ``.cu`` file run step by step: the commands ``nvcc --dryrun`` prints, in its order, with
its environment, so that the host compiler's step can take what every source shares from a GCC precompiled header.

Why: the torch head of KernelBench-format device code is parsed by cudafe++ and cicc (EDG front ends, which take
no precompiled header) and a third time by the host compiler, whose input is cudafe++'s output. The first lines
of the ``.cu`` that the builder writes the same for every source (the start of the narrow head, or load_inline's
implicit includes) are most of that input: cudafe++'s output is split where they end, its start goes into a header
whose ``.gch`` is made once per builder and compile command (builder/pch.py) and included as the first line of
the rest.

How the build stays what nvcc makes of the source:

- the commands are nvcc's own; a dryrun of another shape than one host preprocessing, cudafe++, device passes
  (preprocessing, cicc, ptxas, fatbinary) and one host compile of cudafe++'s output (relocatable device code,
  preprocessing only, a flag this module does not know) is not run here, and nvcc runs it;
- cudafe++ names the translation unit's module (the names of its anonymous namespace and internal device variables,
  which cudafe++, cicc and the registration code share) from the whole file; here it is given a name made from the
  shared start, so that start reads the same for every source (a module's name need not be unique without
  relocatable device code, which is not run here);
- the split is between lines, a rest that starts inside the source's text starts with a line marker restating
  where it is, and the header is included before any token: the host compiler reads the same text. GCC uses a ``.gch`` only when the compile's flags match
  the ones it was made with, and reads the header's text (written beside it) otherwise. A ``.gch`` is made only from
  text whose pragmas are diagnostic settings or balanced visibility pushes, and looked up by that text (the build
  directory's name in line markers left out) and the whole command.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import dataclass

from kbench_env.backends import narrow_head
from kbench_env.builder.compiler import CompileError, run

HOST_HEADER = "kb_host_prefix.h"
#: The head load_inline puts on device code (builder/torch_ext.inline_files).
IMPLICIT = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
MARKER = re.compile(r'^# (\d+)(?: "((?:[^"\\\n]|\\.)*)"((?: \d+)*))?[ \t]*$', re.M)
# Markers after a line's end ("\n" first: a literal start is found fast), naming a file or only renumbering lines.
NAMED = re.compile(r'\n# (\d+) "((?:[^"\\\n]|\\.)*)"((?: \d+)*)[ \t]*(?=\n|\Z)')
BARE = re.compile(r"\n# (\d+)[ \t]*(?=\n|\Z)")
NAMED_FILE = re.compile(r'\n# \d+ "((?:[^"\\\n]|\\.)*)"')
PRAGMA = re.compile(r"\n[ \t]*#[ \t]*((?:pragma|if|ifdef|ifndef|endif)\b[^\n]*)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: nvcc options whose compile is not one object from one translation unit: nvcc runs them.
NOT_STEPPED = ("-rdc", "--relocatable-device-code", "-dc", "--device-c", "-dw", "--device-w", "-dlto", "--dlto",
               "-E", "--preprocess", "-M", "-MM", "--split-compile", "-split-compile", "-lto", "--keep", "-keep",
               "-save-temps", "--save-temps", "-cuda", "--cuda", "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin")


@dataclass
class Steps:
    """An nvcc compile's steps: its environment's assignments, its commands, and where in them the parts are that
    this module changes."""

    env: list
    commands: list
    cudafe: int  # the index of cudafe++
    cpp4: str  # the host preprocessing's output (cudafe++'s input)
    module_id: str  # the module-name file cudafe++ writes and cicc reads
    host_input: str  # cudafe++'s output, the host compile's input

    def script(self, command: str) -> list:
        """``command`` as nvcc runs it: in a shell, with nvcc's variables exported."""
        return ["/bin/sh", "-c", "set -a\n" + "\n".join(self.env) + "\nset +a\n" + command]


def plan(argv: list, cwd: str, keep: str, timeout: float) -> Steps | None:
    """The steps of nvcc's compile ``argv`` (intermediate files in ``keep``), or None where they are not the shape
    this module knows (nvcc then runs them itself)."""
    if any(a.split("=")[0] in NOT_STEPPED for a in argv) or "-c" not in argv:
        return None
    try:
        out = run(list(argv) + ["--dryrun", "--keep", "--keep-dir", keep], cwd, timeout, "nvcc --dryrun")
    except CompileError:
        return None  # a bad flag: nvcc says so when it runs
    env, commands = [], []
    for line in out.splitlines():
        if line.startswith("#$ "):
            body = line[3:].rstrip()
            (env if ASSIGNMENT.match(body) else commands).append(body)
    try:
        tokens = [shlex.split(c) for c in commands]
    except ValueError:
        return None
    if not tokens or any(not t for t in tokens):
        return None
    programs = [os.path.basename(t[0]) for t in tokens]
    host = programs[-1]
    if programs.count("cudafe++") != 1 or any(p not in {"cudafe++", "cicc", "ptxas", "fatbinary", host}
                                              for p in programs):
        return None
    i = programs.index("cudafe++")
    if "cicc" in programs[:i]:
        return None  # cicc reads the module name cudafe++ writes
    cudafe, last = tokens[i], tokens[-1]
    inputs = [t for t in last if t.endswith(".cudafe1.cpp")]
    if ("--module_id_file_name" not in cudafe
            or not cudafe[-1].endswith(".cpp4.ii") or "-c" not in last or len(inputs) != 1
            or any("$" in t for t in last) or len(re.findall(r"(?<=\s)--gen_module_id_file(?=\s|$)", commands[i])) != 1
            or not any("-E" in t and t[t.index("-o") + 1:t.index("-o") + 2] == [cudafe[-1]]
                       for t in tokens[:i] if "-o" in t)):
        return None
    return Steps(env, commands, i, cudafe[-1], cudafe[cudafe.index("--module_id_file_name") + 1], inputs[0])


def shared_lines(text: str) -> int:
    """How many first lines of a ``.cu`` the builder wrote the same for every source: the start of the narrow head
    (backends/narrow_head.py) or load_inline's implicit includes; 0 where it wrote none."""
    if text.startswith(narrow_head.MARK):
        return narrow_head.shared_lines(text)
    return IMPLICIT.count("\n") if text.startswith(IMPLICIT) else 0


def split_at(text: str, first: int, seen: set | None = None) -> tuple | None:
    """(start, rest) of preprocessed ``text`` where line ``first`` of the file its first line marker names (the
    source) begins: at that line's text, or where a header it includes begins (``seen`` None: gcc's output, whose
    markers say where an include starts), or (``seen``: the files of the start of gcc's output; for cudafe++'s,
    which has no includes) where a file not among them begins. Only after some text of another file (what cudafe++
    writes first is attributed to the source's first lines). The two read as ``text``: a rest that starts inside
    the source's text starts with a marker restating where it is. None where there is no such place."""
    head = MARKER.match(text)
    if head is None or head.group(2) is None:
        return None
    main = head.group(2)
    file, flags, line, pos, other = main, head.group(3) or "", int(head.group(1)), head.end() + 1, False
    for m in [*NAMED.finditer(text), None]:
        end = len(text) if m is None else m.start() + 1  # where the marker's line begins
        if file == main and other:
            at, line = _in_source(text, pos, end, line, first)
            if at is not None:
                kept = "".join(f" {f}" for f in flags.split() if f in ("3", "4"))  # a system header's stays one
                return text[:at], f'# {max(first, line)} "{main}"{kept}\n' + text[at:]
            if m is not None and line >= first and seen is None and " 1" in f"{m.group(3)} ":
                return text[:end], text[end:]  # an include on the line: its header begins here
        if m is None:
            return None
        name = m.group(2)
        if seen is not None and other and name != main and name not in seen:
            return text[:end], text[end:]
        other = other or (name != main and not name.startswith("<"))
        file, flags, line, pos = name, m.group(3) or "", int(m.group(1)), m.end() + 1


def _in_source(text: str, pos: int, end: int, line: int, first: int) -> tuple:
    """(where line ``first`` begins, its number) if it begins in the source's text from ``pos`` (line ``line``) to
    ``end``, else (None, the number of the line at ``end``); markers without a file name renumber lines."""
    for m in [*BARE.finditer(text, pos - 1, end), None]:
        stop = end if m is None else m.start() + 1
        count = text.count("\n", pos, stop) + (stop == len(text) and not text.endswith("\n"))
        if line + count > first:
            for _ in range(max(0, first - line)):
                pos = text.index("\n", pos) + 1
            return pos, max(first, line)
        if m is None:
            return None, line + count
        line, pos = int(m.group(1)), m.end() + 1


def files_of(text: str) -> set:
    """The files the line markers of ``text`` name."""
    return set(NAMED_FILE.findall("\n" + text))


def plain_pragmas(text: str) -> bool:
    """Whether ``text``'s pragmas outside ``#if 0`` blocks (cudafe++ keeps device bodies there) are diagnostic
    settings and visibility pushes matched by pops: state a precompiled header surely carries over."""
    depth, visibility = 0, 0  # depth: nesting inside an "#if 0" block
    for m in PRAGMA.finditer("\n" + text):
        words = m.group(1).replace("(", " ").split()
        if words[0] in ("if", "ifdef", "ifndef"):
            depth += 1 if depth or m.group(1).split()[:2] == ["if", "0"] else 0
        elif words[0] == "endif":
            depth = max(0, depth - 1)
        elif depth:
            continue
        elif words[1:3] == ["GCC", "diagnostic"]:
            continue
        elif words[1:3] == ["GCC", "visibility"] and len(words) > 3 and words[3] in ("push", "pop"):
            visibility += 1 if words[3] == "push" else -1
            if visibility < 0:
                return False
        else:
            return False
    return visibility == 0


def normalised(text: str, directory: str) -> str | None:
    """``text`` with ``directory`` (the build's own) named ``<build>`` in its line markers; None where it occurs
    anywhere else (the text would differ between build directories in more than where it comes from)."""
    out = re.sub(rf'(\n# \d+ "){re.escape(directory)}/', r"\1<build>/", "\n" + text)[1:]
    return None if directory in out else out


def module_name(start: str, directory: str, source: str) -> str | None:
    """The module name given to cudafe++ (nvcc's shape: ``_<hex>_<length>_<file>_<hex>``), made from the shared
    start of the host preprocessing's output; None where that start names the build directory."""
    text = normalised(start, directory)
    if text is None:
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()
    stem = re.sub(r"\W", "_", os.path.basename(source))
    return f"_{digest[:8]}_{len(stem)}_{stem}_{digest[8:16]}"


def compile_cu(argv: list, source: str, cwd: str, headers, timeout: float, what: str) -> bool:
    """Compile ``source`` with nvcc's ``argv`` (a compile to one object) step by step in ``cwd``, the host step
    against the shared start's precompiled header where ``headers`` (pch.BindingHeaders) has one or makes it;
    False, with nothing run, where the steps are not the shape this module knows. Raises CompileError as the
    compile would fail (``what``: the message's start)."""
    deadline = time.monotonic() + timeout
    keep = tempfile.mkdtemp(prefix="kb-nvcc-")
    # cudafe++ beside the device passes (device preprocessing, cicc, ptxas, fatbinary) once this module has written
    # the module name they share: nothing else of either is read by the other (cicc writes the host stub and the
    # device file under its own names, cudafe++ only the host compile's input), both take about as long (the torch
    # head parsed in each), and only the host compile needs both. Its thread inherits this one's priority.
    pool, beside = ThreadPoolExecutor(1, thread_name_prefix="kbench-cudafe"), None
    try:
        steps = plan(argv, cwd, keep, timeout)
        if steps is None:
            return False
        with open(source) as f:
            lines = shared_lines(f.read())
        directory = os.path.dirname(os.path.abspath(source))
        seen = None  # the files of the shared start, once it is known
        for i, command in enumerate(steps.commands):
            if i == steps.cudafe and lines:
                with open(steps.cpp4) as f:
                    parts = split_at(f.read(), lines + 1)
                name = module_name(parts[0], directory, source) if parts is not None else None
                if name is not None:  # cudafe++ reads the name instead of making one from the whole file
                    with open(steps.module_id, "w") as f:
                        f.write(name)
                    command = re.sub(r"(?<=\s)--gen_module_id_file(?=\s|$)", "", command)
                    seen = files_of(parts[0])
                    beside = pool.submit(run, steps.script(command), cwd, deadline - time.monotonic(), what)
                    continue
            if i == len(steps.commands) - 1:
                if beside is not None:
                    _finish(beside, deadline)
                if seen is not None:
                    _use_prefix(steps, lines + 1, seen, directory, headers, deadline)
            try:
                run(steps.script(command), cwd, deadline - time.monotonic(), what)
            except CompileError:
                if beside is not None:
                    _finish(beside, deadline)  # cudafe++'s error first, as nvcc, which runs it first, would report it
                raise
        return True
    finally:
        if beside is not None:
            with contextlib.suppress(Exception):
                _finish(beside, deadline)  # (its files are in ``keep``)
        pool.shutdown(wait=False)
        shutil.rmtree(keep, ignore_errors=True)


#: Seconds past the compile's deadline that a wait for cudafe++ beside the device passes lasts at most (``run`` kills
#: it at the deadline; this is the thread's own way out).
BESIDE_GRACE_S = 10.0


def _finish(beside, deadline: float) -> None:
    """Wait for cudafe++ run beside the device passes (a Future of ``run``), until the compile's deadline and
    BESIDE_GRACE_S at most; its CompileError raised."""
    try:
        beside.result(timeout=max(0.0, deadline - time.monotonic()) + BESIDE_GRACE_S)
    except FutureTimeout:
        raise CompileError("cudafe++ outlived the build's deadline") from None


#: Seconds a host compile waits at most for its shared start's ``.gch`` being made in the background (by this build
#: or another) before it compiles its input whole: the make takes about what a whole compile does, and the builds
#: of a cold builder reach their host compiles together, so waiting for the one make costs each of them the rest of
#: it, where compiling whole costs each a whole compile's CPU.
HOST_WAIT_S = 60.0


def _use_prefix(steps: Steps, first: int, seen: set, directory: str, headers, deadline: float) -> None:
    """Make the host compile's input include its shared start (the text before line ``first`` of the source or the
    first file not in ``seen``) from a header with a precompiled ``.gch`` beside it (made now, or in the background
    and waited for, HOST_WAIT_S at most: else the input is left whole)."""
    with open(steps.host_input) as f:
        parts = split_at(f.read(), first, seen)
    if parts is None or not plain_pragmas(parts[0]):
        return
    text = normalised(parts[0], directory)
    tokens = shlex.split(steps.commands[-1])
    at = tokens.index(steps.host_input)
    out = tokens.index("-o")
    rest = [t for k, t in enumerate(tokens) if k not in (at, out, out + 1) and t != "-c"]
    if text is None or rest.count("-x") != 1 or rest[rest.index("-x") + 1:rest.index("-x") + 2] != ["c++"]:
        return
    rest[rest.index("-x") + 1] = "c++-header"
    key = hashlib.sha256(f"{shlex.join(rest)}\n{text}".encode()).hexdigest()[:32]

    def command(header: str, output: str) -> list:
        return steps.script(shlex.join(rest + [header, "-o", output]))

    gch = headers.host_prefix(key, parts[0], command, deadline - time.monotonic(),
                              wait=min(HOST_WAIT_S, deadline - time.monotonic()))
    if gch is None:
        return
    header = os.path.join(os.path.dirname(steps.host_input), HOST_HEADER)
    with open(header, "w") as f:
        f.write(parts[0])  # what GCC reads where it finds the .gch not valid for this compile
    os.symlink(gch, header + ".gch")
    with open(steps.host_input, "w") as f:
        f.write(f'#include "{HOST_HEADER}"\n' + parts[1])

"""Which compiler and linker flags a build request may carry: none that makes the compiler read, write or run
anything but the candidate's sources, the headers and libraries under the allowed roots, and its own build
directory. The tables below say, per flag, why it is refused; ``check_request`` turns every problem of a request
into one message for the person who wrote it.

The builder is confined as well (server.py: Landlock, no network), so a flag missing here still cannot reach a
user's files; the tables are what lets a refusal say why, instead of a compiler error about a file it could not open.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import sysconfig
from functools import lru_cache

from kbench_env.backends import cutlass
from kbench_env.builder.errors import BuildRefused

_PLUGIN = "loads a plugin into the compiler (code other than your sources would run in the builder)"
_PROGRAMS = "makes the compiler run programs from another place than its own installation"
_OPTIONS_FILE = "reads more options from a file"
_OUTPUT = "writes a file outside the build directory the builder gives the build"
_SYSROOT = "takes system headers and libraries from another root"
_PROFILE = "reads or writes profile data at a path of its choosing"

#: Host-compiler (g++/clang driver) options refused, by prefix, with the reason.
DRIVER_REFUSED = {
    "-fplugin": _PLUGIN, "-fpass-plugin": _PLUGIN, "-Xclang": "passes options to clang's front end unchecked "
    "(it can load plugins)", "-wrapper": "runs the compiler's own programs through another program",
    "-B": _PROGRAMS + " (-B<dir>)", "--ld-path": "runs another program as the linker", "-specs": "lets a spec "
    "file rewrite the commands the compiler driver runs", "--specs": "lets a spec file rewrite the commands the "
    "compiler driver runs", "--sysroot": _SYSROOT, "-isysroot": _SYSROOT, "-iprefix": _SYSROOT, "-iwithprefix": _SYSROOT,
    "-imultilib": _SYSROOT, "-o": _OUTPUT, "-MF": _OUTPUT, "-save-temps": _OUTPUT, "-dumpdir": _OUTPUT,
    "-dumpbase": _OUTPUT, "-aux-info": _OUTPUT, "-fprofile-": _PROFILE, "-fauto-profile": _PROFILE,
    "-fsanitize-blacklist": "reads a file", "-fsanitize-ignorelist": "reads a file", "-T": "names a linker "
    "script (which can pull in any file)",
}
#: Linker options (inside -Wl, and after -Xlinker) refused, by prefix, with the reason.
LINKER_REFUSED = {
    "-T": "names a linker script (which can pull in any file)", "--script": "names a linker script (which can "
    "pull in any file)", "-dT": "names a linker script", "--default-script": "names a linker script",
    "--plugin": _PLUGIN, "-plugin": _PLUGIN, "-o": _OUTPUT, "--output": _OUTPUT, "-Map": _OUTPUT, "--Map": _OUTPUT,
    "--out-implib": _OUTPUT, "--dependency-file": _OUTPUT, "--version-script": "reads a file",
    "--dynamic-list": "reads a file", "--just-symbols": "reads a file", "--retain-symbols-file": "reads a file",
    "-R": "reads a file (or sets a run path: use -rpath)", "--sysroot": _SYSROOT,
    "--dynamic-linker": "sets another program loader", "-I": "sets another program loader (ld's -I is "
    "--dynamic-linker)",
}
#: nvcc options refused (the option's name, before any "="), with the reason.
NVCC_REFUSED = {
    "-ccbin": "runs another program as the host compiler", "--compiler-bindir": "runs another program as the host "
    "compiler", "-optf": _OPTIONS_FILE, "--options-file": _OPTIONS_FILE, "-run": "runs the program it builds",
    "--run": "runs the program it builds", "--run-args": "runs the program it builds", "-o": _OUTPUT,
    "--output-file": _OUTPUT, "-odir": _OUTPUT, "--output-directory": _OUTPUT, "--keep-dir": _OUTPUT,
    "-keep-dir": _OUTPUT, "-MF": _OUTPUT, "--dependency-output": _OUTPUT, "-ldir": _PROGRAMS,
    "--libdevice-directory": _PROGRAMS,
}
_LINKERS = {"bfd", "gold", "lld", "mold"}
# Options whose value is a directory or file to read: allowed under the roots only.
_DRIVER_PATHS = ("-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-L")
_NVCC_PATHS = {"-I": "-I", "--include-path": "-I", "-isystem": "-isystem", "--system-include": "-isystem",
               "-include": "-include", "--pre-include": "-include", "-L": "-L", "--library-path": "-L"}
# Options taking the next token as their value (a value, not an input file).
_DRIVER_VALUE = {"-D", "-U", "-x", "-l", "-u", "-e", "-z", "--param", "-Xpreprocessor", "-Xassembler", "-Xlinker"}
_NVCC_VALUE = {"-D", "--define-macro", "-U", "--undefine-macro", "-l", "--library", "-x", "--x", "-gencode",
               "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code", "-std", "--std",
               "-maxrregcount", "--maxrregcount", "-t", "--threads", "-Xcompiler", "--compiler-options", "-Xlinker",
               "--linker-options", "-Xptxas", "--ptxas-options", "-Xnvlink", "-Xarchive", "--archive-options",
               "--diag-suppress", "-diag-suppress", "-rdc", "--relocatable-device-code", "-ftz", "-prec-div",
               "-prec-sqrt", "-fmad", "--split-compile", "-split-compile"}
# torch's build writes flags unquoted into a ninja file whose commands a shell runs: a flag may hold these only.
_SAFE = re.compile(r"^[A-Za-z0-9_+\-=,./:%^]+$")
# "-opt=value" forms whose value may contain "/" (not a file the compiler opens).
_VALUE_WITH_SLASH = ("-D", "-U", "-fdebug-prefix-map=", "-fmacro-prefix-map=", "-ffile-prefix-map=")


@lru_cache(maxsize=8)
def _roots(extra: tuple) -> tuple:
    cuda = ["/usr/local/cuda", "/opt/cuda"] + glob.glob("/usr/local/cuda-*")
    paths = sysconfig.get_paths()
    found = ["/usr/include", "/usr/local/include", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib",
             "/lib", "/lib64", paths.get("include"), paths.get("platinclude"), *cuda, *extra]
    found += [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)]
    return tuple(sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)}))


def allowed_roots(extra=()) -> tuple:
    """The directories include and library paths may name: system headers and libraries, Python's headers and
    packages (torch's headers), the CUDA toolkit, the CUTLASS checkout (backends/cutlass.py) and ``extra``."""
    given = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")] + [cutlass.root()]
    return _roots(tuple(extra) + tuple(p for p in given if p))


def _path_problem(path: str, roots: tuple) -> str | None:
    if not path:
        return "names no path"
    if not os.path.isabs(path):
        return (f"is a relative path ({path}): builds run in a directory of their own, so name a directory under "
                "the allowed roots by its absolute path")
    real = os.path.realpath(path)
    if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
        return f"names {path}, which is outside the directories a build may read"
    return None


class _Scan:
    """One flag list's problems, as ``"<where>: '<flag>' <reason>"``."""

    def __init__(self, where: str, roots: tuple):
        self.where, self.roots, self.problems = where, roots, []

    def refuse(self, flag: str, reason: str) -> None:
        self.problems.append(f"{self.where}: {flag!r} {reason}")

    def path(self, flag: str, path: str) -> None:
        why = _path_problem(path, self.roots)
        if why:
            self.refuse(flag, why)

    def bare(self, token: str, owner: str | None = None) -> None:
        """A token that is not an option (a value, or an input file to the tool)."""
        flag = f"{owner} {token}" if owner else token
        if token.startswith("@"):
            self.refuse(flag, "is not allowed: it " + _OPTIONS_FILE)
        elif "/" in token or token.startswith("~"):
            self.refuse(flag, "is not allowed: a file path that is not an include or library directory (the tool "
                        "would read it as an input)")

    def driver(self, tokens: list) -> None:
        """g++/clang driver flags (extra_cflags, extra_ldflags, nvcc's -Xcompiler)."""
        i = 0
        while i < len(tokens):
            t, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
            i += 1
            if not t.startswith("-"):
                self.bare(t)
                continue
            hit = next((p for p in DRIVER_REFUSED if t.startswith(p) and not (p == "-B" and t == "-Bsymbolic")), None)
            if hit is not None:
                self.refuse(t, "is not allowed: it " + DRIVER_REFUSED[hit])
            elif t.startswith("-fuse-ld="):
                if t.split("=", 1)[1] not in _LINKERS:
                    self.refuse(t, f"is not allowed: the linker may be one of {sorted(_LINKERS)}, not a program path")
            elif t.startswith("-Wl,"):
                self.linker(t[4:].split(","), t)
            elif t.startswith(("-Wa,", "-Wp,")):
                (self.driver if t.startswith("-Wp,") else self.assembler)(t[4:].split(","))
            elif t in _DRIVER_PATHS:
                self.path(f"{t} {nxt}", nxt or "")
                i += 1
            elif t.startswith(_DRIVER_PATHS):
                flag = next(p for p in sorted(_DRIVER_PATHS, key=len, reverse=True) if t.startswith(p))
                self.path(t, t[len(flag):].lstrip("="))
            elif t in _DRIVER_VALUE:
                i += 1
                if nxt is None:
                    continue
                if t == "-Xlinker":
                    self.linker([nxt], f"-Xlinker {nxt}")
                elif t in ("-Xpreprocessor", "-Xassembler"):
                    (self.driver if t == "-Xpreprocessor" else self.assembler)([nxt])
                elif t not in ("-D", "-U"):
                    self.bare(nxt, t)
            elif t.startswith("-l") and "/" in t:
                self.refuse(t, "is not allowed: link libraries by name (-lfoo), or give -L a directory under the "
                            "allowed roots")
            elif "=" in t and "/" in t.split("=", 1)[1] and not t.startswith(_VALUE_WITH_SLASH):
                self.refuse(t, "is not allowed: it names a file path, and options that read or write files other "
                            "than include and library directories are refused")

    def assembler(self, tokens: list) -> None:
        for t in tokens:
            if t.startswith("@") or t in ("-o", "-I") or t.startswith(("-I", "--defsym")) and "/" in t:
                self.refuse(t, "is not allowed: an assembler option that reads or writes a file")
            elif not t.startswith("-"):
                self.bare(t)

    def linker(self, tokens: list, shown: str) -> None:
        i = 0
        while i < len(tokens):
            t, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
            i += 1
            hit = next((p for p in LINKER_REFUSED if t == p or t.startswith(p + "=")
                        or (t.startswith(p) and p.startswith("--"))
                        or (p in ("-T", "-R", "-I") and t.startswith(p) and not t.startswith("-I-"))), None)
            if t.startswith("@"):
                self.refuse(shown, "is not allowed: it " + _OPTIONS_FILE)
            elif hit is not None:
                self.refuse(shown, f"is not allowed: the linker option {t} " + LINKER_REFUSED[hit])
            elif t in ("-L", "--library-path", "-rpath-link"):
                self.path(shown, nxt or "")
                i += 1
            elif t.startswith(("-L", "--library-path=", "-rpath-link=")):
                self.path(shown, t.split("=", 1)[1] if "=" in t else t[2:])
            elif t in ("-rpath", "--rpath", "-soname", "-h", "-z", "--wrap", "--defsym", "-e", "--entry"):
                i += 1  # values: a run path (searched in the worker's own sandbox), a name, a keyword
            elif not t.startswith("-"):
                self.bare(t, "-Wl")

    def nvcc(self, tokens: list) -> None:
        """nvcc flags (extra_cuda_cflags)."""
        i = 0
        while i < len(tokens):
            t, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
            i += 1
            if not t.startswith("-"):
                self.bare(t)
                continue
            if t.startswith(("-D", "-U")) and len(t) > 2:
                continue  # a macro: its value is text
            if t.startswith(("-I", "-L")) and len(t) > 2:
                self.path(t, t[2:].lstrip("="))
                continue
            name, eq, value = t.partition("=")
            if name in NVCC_REFUSED:
                self.refuse(t, "is not allowed: it " + NVCC_REFUSED[name])
                continue
            if name in _NVCC_PATHS:
                if not eq:
                    value, i, t = (nxt or ""), i + 1, f"{t} {nxt}"
                self.path(t, value)
                continue
            if name in _NVCC_VALUE and not eq:
                value, i, t = (nxt or ""), i + 1, f"{t} {nxt}"
            if name in ("-Xcompiler", "--compiler-options"):
                self.driver(value.split(","))
            elif name in ("-Xlinker", "--linker-options"):
                self.linker(value.split(","), t)
            elif name in ("-D", "--define-macro", "-U", "--undefine-macro"):
                pass
            elif value:
                self.bare(value, name)
            elif t.startswith("-l") and "/" in t:
                self.refuse(t, "is not allowed: link libraries by name")


def _unsafe(where: str, tokens: list) -> list:
    return [f"{where}: {t!r} has characters a build command cannot carry safely (spaces, quotes, shell "
            "characters); a flag may hold letters, digits and _ + - = , . / : % ^ only" for t in tokens
            if not _SAFE.match(t)]


def check_request(kwargs: dict, extra_roots=()) -> None:
    """Raise BuildRefused naming every flag or path of a load_inline/load request's ``kwargs`` that is refused."""
    roots = allowed_roots(extra_roots)
    problems: list = []
    for key, kind in (("extra_cflags", "driver"), ("extra_ldflags", "driver"), ("extra_cuda_cflags", "nvcc"),
                      ("extra_include_paths", "path")):
        tokens = list(kwargs.get(key) or [])
        scan = _Scan(key, roots)
        problems += _unsafe(key, tokens)
        if kind == "path":
            for p in tokens:
                scan.path(p, p)
        else:
            getattr(scan, kind)([t for t in tokens if _SAFE.match(t)])
        problems += scan.problems
    raise_if(problems, roots)


def check_fast(flags: list, language: str, extra_roots=()) -> None:
    """Raise BuildRefused for the refused flags of a fast-path build (``language``: "cpp" or "cuda")."""
    roots = allowed_roots(extra_roots)
    scan = _Scan("flags", roots)
    (scan.driver if language == "cpp" else scan.nvcc)([t for t in flags if _SAFE.match(t)])
    raise_if(_unsafe("flags", list(flags)) + scan.problems, roots)


def raise_if(problems: list, roots: tuple) -> None:
    if problems:
        raise BuildRefused(
            "the builder refused these build flags:\n" + "\n".join(f"  - {p}" for p in problems)
            + "\nFlags that make the compiler read, write or run files other than your sources and its own build "
            "directory are refused (plugins, wrappers, option files, spec files, linker scripts, other output "
            "paths); include and library directories must lie under: " + ", ".join(roots[:12])
            + (" ..." if len(roots) > 12 else ""))

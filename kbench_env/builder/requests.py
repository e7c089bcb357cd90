"""What a build request may hold, checked on the trusted side before anything reads it further (by the parent that
relays a worker's request, and again by the builder), and the content-addressed names of the builds.

Three kinds, as the worker sends them (worker/builds.py):

- ``inline``: a ``torch.utils.cpp_extension.load_inline`` call: ``name``, ``cpp_sources`` and ``cuda_sources``
  (lists of strings), ``functions`` (a list of names or a {name: docstring} dict) and ``options`` (OPTIONS);
- ``load``: a ``load`` call: ``name``, ``files`` ([{"name": file name, "text": its contents}]) and ``options``;
- ``fast``: a fast-path kernel (fastpath.py): ``language`` ("cpp" or "cuda"), ``source``, ``flags`` and, for CUDA,
  ``arch`` (``sm_90``).

A build's directory in the cache is named by everything its output depends on (``extension_unit``, ``fast_unit``):
two requests that name the same directory build the same thing, whoever sends them.
"""

from __future__ import annotations

import hashlib
import json
import re

from kbench_env.builder.errors import BuildRefused

#: load_inline/load keyword arguments a request may carry; the worker leaves out those that change nothing built
#: (build_directory, verbose, keep_intermediates, use_pch) and SYCL's, which it refuses.
OPTIONS = {"extra_cflags": list, "extra_cuda_cflags": list, "extra_ldflags": list, "extra_include_paths": list,
           "with_cuda": (bool, type(None)), "is_python_module": bool, "with_pytorch_error_handling": bool,
           "no_implicit_headers": bool}
MAX_SOURCE_BYTES = 8 << 20
MAX_FILES = 64
MAX_FLAGS = 256
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_FUNCTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_:]{0,199}$")
_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}\.(?:c|cc|cpp|cxx|c\+\+|cu)$")
_ARCH = re.compile(r"^sm_\d{2,3}[a-z]?$")


def _strings(value, what: str, allow_none: bool = False) -> list | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BuildRefused(f"{what} must be a string or a list of strings, not {type(value).__name__}")
    return list(value)


def _options(options) -> dict:
    if not isinstance(options, dict):
        raise BuildRefused("the build's options must be keyword arguments")
    out = {}
    for key, value in options.items():
        if key not in OPTIONS:
            raise BuildRefused(f"{key}= is not supported by kbench's builder (supported: {', '.join(OPTIONS)})")
        if OPTIONS[key] is list:
            value = [v.strip() for v in _strings(value, key) if v.strip()]  # as torch's build does (KernelBench's [""])
            if len(value) > MAX_FLAGS:
                raise BuildRefused(f"{key} has {len(value)} entries; at most {MAX_FLAGS}")
        elif not isinstance(value, OPTIONS[key]):
            raise BuildRefused(f"{key} must be {OPTIONS[key]}, not {type(value).__name__}")
        out[key] = value
    return out


def _name(value) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise BuildRefused(f"the extension's name must be a Python identifier of at most 100 characters, not "
                           f"{str(value)[:60]!r}")
    return value


def _functions(value):
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, dict)) else None
    if names is None or not all(isinstance(n, str) and _FUNCTION.match(n) for n in names):
        raise BuildRefused("functions must be a list of C++ function names (or a {name: docstring} dict)")
    if isinstance(value, dict) and not all(isinstance(d, str) and '"' not in d and "\n" not in d
                                           for d in value.values()):
        raise BuildRefused("functions' docstrings must be one-line strings without double quotes")
    return value if isinstance(value, dict) else names


def normalise(request) -> dict:
    """The request in canonical form (lists, not single strings), or BuildRefused saying what is wrong with it."""
    if not isinstance(request, dict):
        raise BuildRefused("a build request must be a JSON object")
    kind = request.get("kind")
    if kind == "inline":
        out = {"kind": kind, "name": _name(request.get("name")),
               "cpp_sources": _strings(request.get("cpp_sources"), "cpp_sources"),
               "cuda_sources": _strings(request.get("cuda_sources"), "cuda_sources", allow_none=True),
               "functions": _functions(request.get("functions")), "options": _options(request.get("options", {}))}
        texts = out["cpp_sources"] + (out["cuda_sources"] or [])
    elif kind == "load":
        files = request.get("files")
        if not isinstance(files, list) or not files or len(files) > MAX_FILES:
            raise BuildRefused(f"load() needs 1 to {MAX_FILES} source files")
        seen = set()
        for f in files:
            if not (isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("text"), str)
                    and _FILE.match(f["name"]) and f["name"] not in seen):
                raise BuildRefused(f"load()'s sources must be distinct C++ or CUDA files (.cpp, .cc, .cu, ...) that "
                                   f"the candidate can read; not {str(f.get('name') if isinstance(f, dict) else f)[:80]!r}")
            seen.add(f["name"])
        out = {"kind": kind, "name": _name(request.get("name")), "files": [dict(f) for f in files],
               "options": _options(request.get("options", {}))}
        texts = [f["text"] for f in files]
    elif kind == "fast":
        language = request.get("language")
        if language not in ("cpp", "cuda"):
            raise BuildRefused("a fast-path build's language is 'cpp' or 'cuda'")
        arch = request.get("arch")
        if language == "cuda" and not (isinstance(arch, str) and _ARCH.match(arch)):
            raise BuildRefused(f"a CUDA fast-path build needs the GPU's architecture as sm_XY, not {arch!r}")
        out = {"kind": kind, "language": language, "source": _strings(request.get("source"), "source")[0],
               "flags": _strings(request.get("flags") or [], "flags")[:MAX_FLAGS],
               "arch": arch if language == "cuda" else None}
        texts = [out["source"]]
    else:
        raise BuildRefused(f"unknown build kind {kind!r}")
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if size > MAX_SOURCE_BYTES:
        raise BuildRefused(f"the sources are {size >> 20} MiB; a build's sources may be at most "
                           f"{MAX_SOURCE_BYTES >> 20} MiB")
    return out


def extension_unit(kind: str, name: str, sources, options: dict, context: dict) -> str:
    """The cache directory of a cpp_extension build: ``<name>-<hash>``, the hash over the sources as built, the
    options as passed to the compiler, and ``context`` (torch version, compiler, backend, build environment)."""
    key = json.dumps({"kind": kind, "name": name, "payload": {"sources": sources, "kw": options}, **context},
                     sort_keys=True, default=str)
    return f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def fast_unit(command_head: list, source: str, tool_id: str) -> str:
    """The cache directory of a fast-path build: the hash of its compiler command and source."""
    return "fast-" + hashlib.sha256("\0".join([tool_id, *command_head, source]).encode()).hexdigest()[:24]

"""Kernel launches across a cut build (backends/host_device_split.py): the host file's stand-in for each kernel
(a handle class whose ``get()`` the device file defines, and a launcher with the kernel's template header and
parameters that calls ``cudaLaunchKernel`` through it), its launches rewritten to call the launcher, and the device
file's definitions of the handles the host object leaves undefined (``instantiations``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from kbench_env.backends.cu_scan import IDENT, mask, match

#: The helper the host file's head ends with: a launch's configuration, and the call of cudaLaunchKernel.
LAUNCHER = """\
#ifndef KBENCH_SPLIT_LAUNCHER
#define KBENCH_SPLIT_LAUNCHER
namespace kbench_split {
struct config {  // a launch's <<<grid, block, shared, stream>>>, converted as nvcc converts them
  dim3 grid, block; size_t shared; cudaStream_t stream;
  config(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0) : grid(g), block(b), shared(s), stream(st) {}
};
inline void go(const void* kernel, const config& c, void** args) {
  (void)cudaLaunchKernel(kernel, c.grid, c.block, args, c.shared, c.stream);  // its error is the thread's last
}
}  // namespace kbench_split
#endif
"""
HANDLE = "kbench_handle_"
LAUNCH = "kbench_launch_"
_HANDLE_DECL = re.compile(r"^(template\s*<[^\n]*>)?\s*struct " + HANDLE + r"(\w+) \{ static const void\* get\(\); \};$",
                          re.M)
#: c10 types that a launched instantiation may name (AT_DISPATCH's): the header that defines each.
C10_TYPES = {"Half": "c10/util/Half.h", "BFloat16": "c10/util/BFloat16.h", "complex": "c10/util/complex.h",
             "Float8_e4m3fn": "c10/util/Float8_e4m3fn.h", "Float8_e5m2": "c10/util/Float8_e5m2.h",
             "Float8_e4m3fnuz": "c10/util/Float8_e4m3fnuz.h", "Float8_e5m2fnuz": "c10/util/Float8_e5m2fnuz.h"}


@dataclass
class Kernel:
    name: str
    template: str | None  # its template header (``template <typename T, int N>``), or None


_TYPE_WORDS = frozenset("""void bool char short int long float double signed unsigned const volatile __restrict__
    __restrict restrict size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half __half
    __nv_bfloat16 half2 __half2 float2 float4 int2 int4 auto""".split())


_QUALIFIERS = frozenset("const volatile __restrict__ __restrict restrict struct class enum typename".split())


def _parameters(masked: str, text: str, open_: int, types: tuple = ()) -> list | None:
    """The kernel's parameters (the text of each, a name given to one that has none), its list opening at
    ``open_`` (a "("), ``types`` the template's parameter names; None where one is not a plain declaration (a
    pack, an array or function declarator)."""
    close = match(masked, open_, "(", ")")
    if close < 0:
        return None
    inner, minner = text[open_ + 1:close - 1], masked[open_ + 1:close - 1]
    if not minner.strip() or minner.strip() == "void":
        return []
    parts, depth, last = [], 0, 0
    for i, c in enumerate(minner):
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append((inner[last:i], minner[last:i]))
            last = i + 1
    parts.append((inner[last:], minner[last:]))
    out = []
    for n, (ptext, pmask) in enumerate(parts):
        decl = pmask.split("=", 1)[0]
        if "..." in pmask or "(" in decl or "[" in decl or depth != 0:
            return None
        ptext = " ".join(ptext.split("=", 1)[0].split())  # (a default argument is the kernel's, not the launch's)
        words = IDENT.findall(decl)
        named = (words and decl.rstrip()[-1:] not in "*&" and words[-1] not in _TYPE_WORDS
                 and words[-1] not in types and any(w not in _QUALIFIERS for w in words[:-1]))
        out.append((ptext, words[-1]) if named else (f"{ptext} kbench_p{n}", f"kbench_p{n}"))
    return out


def launcher(masked: str, text: str, start: int, head_end: int, name: str, template: str | None) -> str | None:
    """The host file's stand-in for kernel ``name`` (its head at ``start:head_end``): its handle class and a
    function with the kernel's template header and parameters that launches it through the handle, or None."""
    head = masked[start:head_end]
    m = re.search(rf"\b{re.escape(name)}\s*\(", head)
    if m is None:
        return None
    found = []
    if template is not None:
        inner = template[template.index("<") + 1:template.rindex(">")]
        for part in inner.split(","):
            words = IDENT.findall(part.split("=", 1)[0])
            if not words or "..." in part or "<" in part:
                return None  # a pack or a template template parameter
            found.append(words[-1])
    params = _parameters(masked, text, start + m.end() - 1, tuple(found))
    if params is None:
        return None
    names = "<" + ", ".join(found) + ">" if template is not None else ""
    t = template + " " if template else ""
    args = "".join(f"(void*)&{p}, " for _, p in params)
    declared = ", ".join(["::kbench_split::config kbench_c"] + [d for d, _ in params])
    return (f"{t}struct {HANDLE}{name} {{ static const void* get(); }};\n"
            f"{t}inline void {LAUNCH}{name}({declared}) {{\n"
            f"  void* kbench_a[] = {{{args}nullptr}};\n"
            f"  ::kbench_split::go({HANDLE}{name}{names}::get(), kbench_c, kbench_a);\n}}")


def rewrite_launches(text: str, kernels: dict) -> str | None:
    """``text`` (host code) with each ``k<A><<<cfg>>>(args)`` launch written as a call of the kernel's launcher,
    ``kbench_launch_k<A>(::kbench_split::config(cfg), args)`` (template arguments deduced as for the kernel);
    None where a launch is not of a known kernel by its own name."""
    masked = mask(text)
    out, last = [], 0
    pos = masked.find("<<<")
    while pos >= 0:
        j = pos
        while j > 0 and masked[j - 1].isspace():
            j -= 1
        args = ""
        if j > 0 and masked[j - 1] == ">":  # template arguments: back to their "<"
            depth, k = 0, j - 1
            while k >= 0:
                if masked[k] == ">":
                    depth += 1
                elif masked[k] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                elif masked[k] in ";{}":
                    return None
                k -= 1
            if k < 0:
                return None
            args = text[k:j]
            j = k
            while j > 0 and masked[j - 1].isspace():
                j -= 1
        m = re.search(r"(?:(::|\.|->)\s*)?([A-Za-z_]\w*)$", masked[:j])
        if m is None or m.group(1) or m.group(2) not in kernels:
            return None
        name, start = m.group(2), m.start()
        close = masked.find(">>>", pos + 3)
        if close < 0 or "<<<" in masked[pos + 3:close]:
            return None
        config = text[pos + 3:close]
        after = close + 3
        while after < len(masked) and masked[after].isspace():
            after += 1
        if after >= len(masked) or masked[after] != "(":
            return None
        end = match(masked, after, "(", ")")
        if end < 0:
            return None
        comma = ", " if masked[after + 1:end - 1].strip() else ""
        out.append(text[last:start])
        out.append(f"{LAUNCH}{name}{args}(::kbench_split::config({config}){comma}")
        last = after + 1
        pos = masked.find("<<<", after)
    out.append(text[last:])
    return "".join(out)


def kernels_of(host: str) -> dict:
    """The kernels (name -> Kernel) whose handles ``host`` (a Split's host text) declares."""
    return {m.group(2): Kernel(m.group(2), m.group(1)) for m in _HANDLE_DECL.finditer(host)}


def _handle_of(symbol: str, kernels: dict) -> tuple[str, str | None] | None:
    """(kernel name, its template arguments or None) of a demangled ``kbench_handle_<k>[<A>]::get()`` symbol."""
    if not symbol.startswith(HANDLE) or not symbol.endswith("::get()"):
        return None
    rest = symbol[len(HANDLE):-len("::get()")]
    if "<" not in rest:
        return (rest, None) if rest in kernels and kernels[rest].template is None else None
    name, args = rest.split("<", 1)
    if not args.endswith(">") or name not in kernels or kernels[name].template is None:
        return None
    return name, args[:-1]


def _function_name(symbol: str) -> str:
    """The name a demangled symbol defines or refers to, qualified, less its template arguments, parameters and
    return type (``void k<float, 4>(float const*, long)`` -> ``k``)."""
    depth, cut = 0, len(symbol)
    for i, c in enumerate(symbol):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            cut = i
            break
    name = symbol[:cut]
    depth, last = 0, 0
    for i, c in enumerate(name):  # the return type of a template instance ends at a space outside its arguments
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            last = i + 1
    return re.sub(r"<.*", "", name[last:]).strip()


def instantiations(kernels: dict, undefined: list, include_dirs: list, device_names=()) -> tuple[str, str] | None:
    """(head, tail) of the device file: the c10 headers the launched instantiations' template arguments name
    (found under ``include_dirs``), and the handles' definitions for the host object's ``undefined`` symbols
    (demangled); None where the host object names a kernel (or one of ``device_names``, device functions and
    variables) otherwise than by a handle, or a template argument is not one this writes."""
    names = set(kernels) | set(device_names)
    wanted, headers = [], []
    for symbol in undefined:
        if symbol.startswith(HANDLE):
            handle = _handle_of(symbol, kernels)
            if handle is None:
                return None
            name, args = handle
            if args is not None:
                if re.search(r"[{}'\"]|\(anonymous|lambda", args):
                    return None
                for ns_type in re.findall(r"\bc10::(\w+)", args):
                    rel = C10_TYPES.get(ns_type)
                    if rel is None or not any(os.path.isfile(os.path.join(d, rel)) for d in include_dirs):
                        return None
                    if rel not in headers:
                        headers.append(rel)
            wanted.append((name, args))
        elif _function_name(symbol) in names:
            return None  # the host code uses a kernel or a device symbol other than by a launch
    tail = []
    for name, kernel in kernels.items():
        if kernel.template is None:
            tail.append(f"struct {HANDLE}{name} {{ static const void* get(); }};")
            tail.append(f"const void* {HANDLE}{name}::get() {{ return reinterpret_cast<const void*>(&{name}); }}")
        else:
            tail.append(f"{kernel.template} struct {HANDLE}{name} {{ static const void* get(); }};")
    for name, args in wanted:
        if args is not None:
            tail.append(f"template <> const void* {HANDLE}{name}<{args}>::get() "
                        f"{{ return reinterpret_cast<const void*>(&{name}<{args}>); }}")
    head = "".join(f"#include <{h}>\n" for h in headers)
    return head, "\n".join(tail) + "\n"

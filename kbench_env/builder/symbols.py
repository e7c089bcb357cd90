"""What a built library calls outside itself, read from its ELF symbol tables by the builder (it never loads the
library): the symbols that reach PyTorch's or a math library's compute without the dispatcher, which the forward
audit's operator records never see, and RecordFunction's switches.

A library the candidate built calls ``at::cpu::addmm`` (or ``at::cuda::addmm``, ``at::native::...``,
``at::_ops::addmm::redispatch``, ``cblas_sgemm``, ``cublasSgemm_v2``, ``cudnnConvolutionForward``, ``dnnl_sgemm``...)
through an undefined dynamic symbol that the loader resolves in torch's libraries: the symbol is in the library's
``.dynsym`` whatever the source looked like. ``suspects`` lists those names; the trusted side decides what they
mean under the evaluation's rules (pipeline/linked.py: which of them are compute, which are glue such as
``at::cpu::empty``). Calls through the dispatcher (``at::addmm``, ``at::_ops::addmm::call``, ``torch::mm``) are not
listed: the operator records show them to the forward audit.

Also listed: a math library's entry points the library defines itself (a BLAS linked in statically), and what the
candidate's code could use to reach the same functions without naming them (``dlsym``, ``dlopen``). What a symbol
table cannot show (an address computed from an allowed symbol's, code written at run time) is the kernel coverage's
to see: it counts only time sampled in the candidate's own libraries (sandbox/samples.py).
"""

from __future__ import annotations

import re
import struct

from kbench_env.sandbox.confine.record_controls import is_record_control

#: ``at::<namespace>::`` of the per-dispatch-key entry points that run a kernel without the dispatcher
#: (ATen/ops/*_<namespace>_dispatch.h; ``meta`` computes shapes only) and of ATen's kernels themselves.
DIRECT_NAMESPACES = frozenset({"cpu", "cuda", "mps", "xpu", "mtia", "native", "compositeexplicitautograd",
                               "compositeexplicitautogradnonfunctional", "compositeimplicitautograd",
                               "compositeimplicitautogradnestedtensor", "sparsecpu", "sparsecuda", "sparsecsrcpu",
                               "sparsecsrcuda", "quantizedcpu", "quantizedcuda", "mkldnn", "nestedtensorcpu",
                               "nestedtensorcuda", "mkldnn_cpu"})
#: Names of math libraries' entry points: BLAS (C and Fortran), LAPACK, MKL, oneDNN, cuBLAS(Lt), cuDNN, cuSPARSE,
#: cuSOLVER, cuFFT, CUTLASS's device-wide library, NNPACK, XNNPACK, FBGEMM.
MATH_LIBRARY = re.compile(
    r"^(?:cblas_|LAPACKE_|mkl_|MKL_|dnnl_|mkldnn_|cublas|cudnn|cusparse|cusolver|cufft|nnp_|xnn_|fbgemm)"
    r"|^[sdcz](?:gemm|gemv|ger|axpy|dot|gemm3m|symm|syrk|trmm|trsm|getrf|getrs|potrf|gesv|gesvd|syev)_$")
#: Fortran BLAS names without the trailing underscore (MKL exports both): suspect only as undefined symbols, where
#: they resolve to the math library; a function of the candidate's own may be called ``sgemm``.
FORTRAN_PLAIN = re.compile(r"^[sdcz](?:gemm|gemv|ger|axpy|dot|gemm3m|symm|syrk|trmm|trsm|getrf|getrs|potrf|gesv|"
                           r"gesvd|syev)$")
#: C++ namespaces of math libraries (the first component of a mangled name).
MATH_NAMESPACES = frozenset({"dnnl", "mkldnn", "ideep", "fbgemm", "cutlass_library", "cublasLt"})
#: Run-time symbol lookup: a way to call any of the above without naming it.
LOOKUP = frozenset({"dlsym", "dlvsym", "dlopen", "dlmopen"})
#: At most this many suspects are reported per library (the first, in symbol order).
MAX_SUSPECTS = 200

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_STT_FUNC = 2
#: At most this many names of defined functions are kept per library (``scan``'s "defines").
MAX_DEFINES = 4096


class UnreadableLibrary(ValueError):
    """The artefact is not an ELF file this reader understands (the message says what it is)."""


def symbols(data: bytes, functions: list | None = None) -> list[tuple[str, bool]]:
    """(name, defined) of every named symbol in an ELF64 little-endian file's ``.dynsym`` and ``.symtab``; the
    names of the functions it defines are also appended to ``functions`` when given."""
    if data[:4] != b"\x7fELF":
        raise UnreadableLibrary("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise UnreadableLibrary("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if not shoff or shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise UnreadableLibrary("its section headers lie outside the file")
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind not in (_SHT_SYMTAB, _SHT_DYNSYM) or link >= shnum or entsize < 24:
            continue
        str_off, str_size = sections[link][4], sections[link][5]
        if offset + size > len(data) or str_off + str_size > len(data):
            raise UnreadableLibrary("a symbol table lies outside the file")
        strings = data[str_off:str_off + str_size]
        for pos in range(offset, offset + size - entsize + 1, entsize):
            name_at, info, _, shndx = struct.unpack_from("<IBBH", data, pos)
            if not name_at or name_at >= len(strings):
                continue
            end = strings.find(b"\0", name_at)
            name = strings[name_at:end if end >= 0 else len(strings)].decode("ascii", "replace")
            out.append((name, shndx != 0))
            if functions is not None and shndx != 0 and info & 0xF == _STT_FUNC:
                functions.append(name)
    return out


def nested_name(mangled: str) -> list[str]:
    """The leading identifiers of an Itanium-mangled name's nested name (``_ZN2at3cpu5addmmE...`` -> at, cpu,
    addmm), as far as plain source names go (a template argument or substitution ends it); [] for a C name."""
    if not mangled.startswith("_Z"):
        return []
    i = 3 if mangled.startswith("L", 2) else 2  # internal linkage (a static function)
    if mangled.startswith("N", i):
        i += 1
        while i < len(mangled) and mangled[i] in "KVrRO":  # cv- and ref-qualifiers of a member function
            i += 1
    parts = []
    while i < len(mangled) and mangled[i].isdigit():
        j = i
        while j < len(mangled) and mangled[j].isdigit():
            j += 1
        n = int(mangled[i:j])
        parts.append(mangled[j:j + n])
        i = j + n
    return parts


def readable(name: str) -> str:
    """A symbol as people read it: ``at::cpu::addmm`` for a C++ name (its leading nested name), the name for C."""
    parts = nested_name(name)
    return "::".join(parts) if parts else name


def _suspect(name: str, defined: bool) -> bool:
    parts = nested_name(name)
    if defined:  # the library's own code: suspect only where it is a math library's entry point
        return bool(MATH_LIBRARY.match(name)) or bool(parts and parts[0] in MATH_NAMESPACES)
    if is_record_control(name) or name in LOOKUP or MATH_LIBRARY.match(name) or FORTRAN_PLAIN.match(name):
        return True
    if not parts:
        return False
    if parts[0] in MATH_NAMESPACES:
        return True
    if parts[0] != "at" or len(parts) < 3:
        return False
    if parts[1] in DIRECT_NAMESPACES:
        return True
    return parts[1] == "_ops" and len(parts) >= 4 and parts[3].startswith("redispatch")


def suspects(data: bytes, functions: list | None = None) -> list[dict]:
    """The library's suspect symbols, each {"symbol": mangled, "name": readable, "defined": bool}: those of
    ``_suspect``, at most MAX_SUSPECTS, each once (``functions``: as ``symbols``)."""
    seen, out = set(), []
    for name, defined in symbols(data, functions):
        base = name.split("@", 1)[0]  # a versioned name (cblas_sgemm@VERSION)
        if (base, defined) in seen or not _suspect(base, defined):
            continue
        seen.add((base, defined))
        out.append({"symbol": base, "name": readable(base), "defined": defined})
        if len(out) >= MAX_SUSPECTS:
            break
    return out


_STUB = "__device_stub__"


def kernel_name(name: str) -> str:
    """A function's qualified name without its arguments, template arguments, return type and anonymous namespaces,
    from a mangled symbol (``_ZN7cutlass7Kernel2I...`` -> ``cutlass::Kernel2``) or a profiler's demangled kernel name
    (``void cutlass::Kernel2<...>(...)`` -> ``cutlass::Kernel2``): how a GPU kernel the profiler names is matched
    with the functions a library defines (a kernel's host stub has the kernel's own symbol)."""
    parts = nested_name(name) if name.startswith("_Z") else []
    stub = parts[-1] if len(parts) == 1 else name
    if stub.startswith(_STUB):  # nvcc's host stub of a kernel: __device_stub__ + the kernel's symbol without "_"
        return kernel_name("_" + stub[len(_STUB):])
    if name.startswith("_Z"):
        return "::".join(p for p in parts if not p.startswith("_GLOBAL__N")) if parts else name
    name = name.replace("(anonymous namespace)::", "")
    cut = min([i for i in (name.find("("), name.find("<")) if i >= 0], default=len(name))
    head = name[:cut].strip()
    return head.rsplit(" ", 1)[-1]  # the return type of a template's instantiation goes


def scan(path: str) -> dict:
    """{"suspects": [...], "defines": [kernel_name of each function it defines]} of the library at ``path``, or
    {"unreadable": why} when it is not ELF64 little-endian."""
    with open(path, "rb") as f:
        data = f.read()
    functions: list = []
    try:
        found = suspects(data, functions)
    except (UnreadableLibrary, struct.error) as exc:
        return {"unreadable": str(exc)}
    return {"suspects": found, "defines": sorted({kernel_name(f) for f in functions})[:MAX_DEFINES]}

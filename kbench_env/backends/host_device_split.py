"""A KernelBench-format ``.cu`` cut into its device code (compiled by nvcc without torch's headers) and its host
code (compiled by the host compiler, torch's head precompiled), where the source's shape allows it.

Why: nvcc parses the torch head of a ``.cu`` in cudafe++ and again in cicc, EDG front ends that take no precompiled
header; that head is most of a distinct candidate's build (the build cost records of bench/RESULTS.md). The kernels
themselves need none of it: torch is used by the host functions that check, allocate and launch. Cut apart, the
device file is the kernels with the CUDA headers, and the host file is the rest for GCC, which reads torch's head
from a ``.gch``.

How a launch crosses the cut: the host file gets, for each kernel, a handle class ``kbench_handle_<k>`` (with the
kernel's template header, if any) whose ``get()`` it leaves undefined, and a launcher ``kbench_launch_<k>`` with the
kernel's template header and parameters verbatim; a launch ``k<A><<<cfg>>>(args)`` becomes
``kbench_launch_k<A>(::kbench_split::config(cfg), args)``, so the arguments convert to the kernel's parameter types
and its template arguments are deduced exactly as for the kernel, and the launcher calls ``cudaLaunchKernel`` with
the handle's pointer (the kernel's host stub) and its parameters' addresses. The host object's undefined ``get()``
symbols are the instantiations the host code launches (AT_DISPATCH's types among them); the device file defines
each (kernel_launch.instantiations), taking the kernel's address there, which makes nvcc compile that
instantiation and its stub.

What a source must be for the cut (``split`` returns None otherwise, and the builder compiles the file whole):
kernels, ``__device__`` functions and variables at file scope (not in a namespace or ``extern "C"`` block), each
kernel defined once, with plain parameters, and launched by its own name, no ``<<<`` or device keyword in a macro
or in a host function (device lambdas), and no use the host code makes of a kernel other than its launches (the
host object is checked for it: kernel_launch.instantiations). Declarations that are neither (types, their device members
among them, constants, ``__host__ __device__`` functions) go to both files, except those naming torch, which stay
with the host; device code that names torch's half types gets those (HALF_HEAD), and nothing else of torch. A cut
build that fails for any reason is built again whole (builder/torch_ext.py), so the cut can make a build cheaper,
never make a source fail that compiles whole. What differs from a build made whole: a launch the device refuses
raises with ``cudaLaunchKernel``'s error ("invalid argument" where ``<<<...>>>`` says "invalid configuration
argument" for too many threads), and the host code is compiled by GCC, not through cudafe++.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbench_env.backends.cu_scan import TYPE_HEAD, items, mask, strip_template
from kbench_env.backends.kernel_launch import LAUNCHER, Kernel, launcher, rewrite_launches

#: The head of the host file, precompiled by the builder: load_inline's head for device code and the launcher. The
#: host file starts with it too, so it compiles the same with the precompiled header or without. (<cuda_fp16.h> and
#: <cuda_bf16.h>: torch's head includes them where nvcc compiles it, not where GCC does.)
HOST_HEAD = ("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n"
             "#include <cuda_bf16.h>\n" + LAUNCHER)
#: The head of the device file: load_inline's less torch's, with what torch's head brings of CUDA's half types.
DEVICE_HEAD = "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
#: What device code that names torch's half types gets of torch's head: the two types, as torch declares them.
HALF_TYPES = re.compile(r"\b(?:c10|at)\s*::\s*(?:Half|BFloat16)\b")
HALF_HEAD = ("#include <c10/util/Half.h>\n#include <c10/util/BFloat16.h>\n"
             "namespace at { using c10::Half; using c10::BFloat16; }\n")
#: The files of a build cut apart (builder/torch_ext.py).
HOST_FILE, DEVICE_FILE = "cuda_host.cpp", "cuda.cu"
DEVICE_WORDS = re.compile(r"\b(?:__global__|__device__|__shared__|__constant__|__managed__|__grid_constant__|"
                          r"threadIdx|blockIdx|blockDim|gridDim|__syncthreads)\b")
TORCH_NAMES = re.compile(r"\b(?:torch|at|c10|caffe2|pybind11|py)\s*::|\bnamespace\s+(?:torch|at|c10|py)\b|"
                         r"\b(?:TORCH|AT|C10|PYBIND11)_\w+")
TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](?:torch|ATen|c10|caffe2|pybind11|Python)\b')
NVCC_MACROS = re.compile(r"\b__(?:CUDACC|NVCC)\w*__\b")

#: nvcc options of the candidate's that steer only device code (or nvcc's warnings and reports): a cut build
#: compiles its host file without them, as nvcc's host pass would see no difference. Any other (a -D, an include
#: path, a host compiler option) and the source is built whole. (``-U__CUDA_NO_HALF_OPERATORS__`` and the like
#: also open host operators of CUDA's half types, which the host file's compiler lacks: a use fails, never reads
#: otherwise.)
DEVICE_FLAGS = re.compile(r"-O[0-3s]?|-{1,2}use_fast_math|-lineinfo|--generate-line-info|-w|"
                          r"-{1,2}expt-relaxed-constexpr|"
                          r"-{1,2}(?:expt-)?extended-lambda|-{1,2}(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)|"
                          r"-res-usage|--resource-usage|-[UD]__CUDA_NO_\w+__|"
                          r"(?:-Xptxas|--ptxas-options|-{1,2}maxrregcount|-gencode|--generate-code|-arch|"
                          r"--gpu-architecture|-code|--gpu-code)(?:=\S+)?")
#: Of those, the options whose value may be the next argument.
_VALUED = frozenset({"-Xptxas", "--ptxas-options", "-maxrregcount", "--maxrregcount", "-gencode", "--generate-code",
                     "-arch", "--gpu-architecture", "-code", "--gpu-code"})


def device_only_flags(flags) -> bool:
    """Whether the candidate's ``extra_cuda_cflags`` all steer device code only (DEVICE_FLAGS)."""
    flags = list(flags or [])
    i = 0
    while i < len(flags):
        flag = flags[i]
        if not isinstance(flag, str) or not DEVICE_FLAGS.fullmatch(flag):
            return False
        i += 2 if flag in _VALUED else 1  # (its value, whatever it is, goes to the device passes)
    return True


#: The device file's first line: the names of its __device__ functions and variables (``device_names_of``).
DEVICE_NAMES = "// kbench_split device symbols:"


@dataclass
class Split:
    host: str  # the host file's text, HOST_HEAD first
    device: str  # the device file's text (DEVICE_NAMES first), less the handles' definitions (instantiations)
    kernels: dict = field(default_factory=dict)  # name -> Kernel


def _kernel_name(masked_head: str) -> str | None:
    """The name a kernel's head declares: the identifier before its parameter list (``__launch_bounds__``'s
    arguments and attributes skipped); None where it is qualified or not found."""
    bare = strip_template(masked_head)
    if bare is None:
        return None
    bare = re.sub(r"__launch_bounds__\s*\([^()]*(?:\([^()]*\)[^()]*)*\)", "", bare)
    bare = re.sub(r"__cluster_dims__\s*\([^()]*\)", "", bare)
    m = re.search(r"(::\s*)?([A-Za-z_]\w*)\s*\(", bare)
    if m is None or m.group(1):
        return None
    return m.group(2)


class _Cut:
    """The two files' parts as ``split`` reads the source's items in order."""

    def __init__(self, source: str, masked: str):
        self.source, self.masked = source, masked
        self.host, self.device, self.kernels, self.device_names, self.defined = [], [], {}, set(), set()

    def take(self, kind: str, start: int, end: int, head_end: int, lead: int) -> bool:
        """Put one item in the files it belongs to (with the comments before it, from ``lead``: the files are
        the source's text, a comment's change a new build as it is for a source built whole); False where the
        source cannot be cut."""
        text, mtext, head = self.source[lead:end], self.masked[start:end], self.masked[start:head_end]
        words = DEVICE_WORDS.search(mtext)
        if kind in ("pp", "block"):
            if words or "<<<" in mtext:
                return False  # a macro that makes or launches device code, or device code in a namespace
            self.host.append(text)
            if not (TORCH_INCLUDE.match(mtext) if kind == "pp" else TORCH_NAMES.search(mtext)):
                self.device.append(text)
            return True
        if re.search(r"\b__global__\b", head):
            return self._kernel(kind, start, head_end, text)  # (text: from lead)
        if re.search(r"\b__host__\b", head):  # (with or without __device__): both files
            if TORCH_NAMES.search(mtext) or "<<<" in mtext:
                return False
            self.host.append(text)
            self.device.append(text)
            return True
        if re.search(r"\b(?:__device__|__constant__|__shared__)\b", head):
            if re.search(r"\b__managed__\b", head):
                return False  # a variable both sides use
            name = _kernel_name(head) if kind == "function" else None
            m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^;]*\])?\s*(?:=[^;]*)?;?\s*$", mtext) if kind == "decl" else None
            name = name or (m.group(1) if m else None)
            if name is not None:
                self.device_names.add(name)
            self.device.append(text)
            return True
        if words and not (kind == "decl" and TYPE_HEAD.match(strip_template(head) or "")
                          and not re.search(r"\b(?:__global__|__managed__)\b", mtext)):
            return False  # device code in a host function (a device lambda)
        self.host.append(text)
        if TORCH_NAMES.search(mtext):
            return True
        if kind == "decl" or (kind == "function" and re.search(r"\bconstexpr\b", head)):
            # types (their device members compiled by the host compiler too, as by nvcc's host pass), constants,
            # declarations, constexpr functions: both files
            self.device.append(text)
        return True

    def _kernel(self, kind: str, start: int, head_end: int, text: str) -> bool:
        head = self.masked[start:head_end]
        name = _kernel_name(head)
        if name is None or (kind == "function" and name in self.defined) or re.search(r"\b__device__\b", head):
            return False
        if kind == "function":
            self.defined.add(name)
        bare_start = len(head) - len(strip_template(head) or "")
        template = " ".join(head[:bare_start].split()) or None  # (masked: comments blanked; one line)
        if name in self.kernels and self.kernels[name].template != template:
            return False
        if name not in self.kernels:
            self.kernels[name] = Kernel(name, template)
            stand_in = launcher(self.masked, self.source, start, head_end, name, template)
            if stand_in is None:
                return False
            self.host.append(stand_in)
        self.device.append(text)
        return True


def device_names_of(device: str) -> frozenset:
    """The names of the ``__device__`` functions and variables a Split's device file defines (its first line says
    them: the builder reads the files, not the Split, and refuses a host object that names one of them)."""
    first = device.split("\n", 1)[0]
    return frozenset(first[len(DEVICE_NAMES):].split()) if first.startswith(DEVICE_NAMES) else frozenset()


def split(source: str) -> Split | None:
    """The host and device files of ``source`` (a ``.cu``'s text, the builder's head not on it), or None where
    its shape does not allow the cut (module docstring)."""
    masked = mask(source)
    if NVCC_MACROS.search(masked):
        return None  # nvcc's host pass defines them, GCC does not: the host code could read otherwise
    found = items(source, masked)
    if found is None:
        return None
    cut = _Cut(source, masked)
    ends = [0] + [end for _, _, end, _ in found]
    if not all(cut.take(*item, lead) for item, lead in zip(found, ends)) or not cut.kernels:
        return None
    cut.host.append(source[ends[-1]:])  # the comments after the last item (a source changed there is new)
    cut.device.append(source[ends[-1]:])
    host_text = rewrite_launches("\n".join(cut.host), cut.kernels)
    if host_text is None:
        return None
    device_text = "\n".join(cut.device) + "\n"
    if HALF_TYPES.search(mask(device_text)):
        device_text = HALF_HEAD + device_text
    device_text = f"{DEVICE_NAMES} {' '.join(sorted(cut.device_names))}\n" + device_text
    return Split(host=HOST_HEAD + host_text + "\n", device=device_text, kernels=cut.kernels)

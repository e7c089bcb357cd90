"""A narrower head for KernelBench-format device code: what <torch/types.h> declares for the names the source uses,
in place of <torch/types.h> itself, built from the installed torch's own header text.

Why: nvcc parses the torch head of a ``.cu`` in cudafe++, in cicc and again in the host compile, and takes no
precompiled header; the head is most of a candidate's build. Most of it is
``<ATen/Functions.h>`` (a header for each of ~1,300 operators), ``<ATen/NativeFunctions.h>`` (``at::native``),
the ~130 autograd-aware factories of ``variable_factories.h`` and ``<torch/library.h>`` (operator registration).

What the narrow head is, and why a build with it means what the build with <torch/types.h> means:

- ``AT_PER_OPERATOR_HEADERS`` is defined first (as torch's own sources are built), so torch headers that would pull
  in all of ``<ATen/Functions.h>`` include the operators they use instead;
- every other header <ATen/ATen.h> and <ATen/Functions.h> include, verbatim, and the declarations
  <ATen/Functions.h> makes itself (its text after its includes, copied);
- ``<ATen/ops/<op>.h>`` for every identifier of the source (or of the copied text) that such a header declares:
  an operator header declares every overload of its names, so a name is declared with all its overloads or not
  at all, and a use of a name that is not declared is a compile error, never another overload;
- ``variable_factories.h``'s includes, and of its ``torch::`` factories (which shadow the ``at::`` ones) the
  definitions of those whose name is an identifier of the source, copied verbatim (all of them, overloads
  included), so ``torch::empty`` is still the autograd-aware factory, not ``at::empty``;
- <torch/types.h>'s own ``namespace torch`` block, copied.

Left out: ``at::native`` (NativeFunctions.h), ``at::_ops`` beyond what the above includes, and <torch/library.h>
(operator and class registration): a source that names any of them, defines or tests the macros that steer these
headers, or includes a torch header that brings them back (or the full operator set) gets no narrow head. The
source's own ``#include`` of <torch/extension.h>, <torch/types.h> or <ATen/ATen.h> is dropped (a no-op in the
build as load_inline makes it, whose implicit <torch/types.h> comes first). The header texts are parsed with
checks that each part has the shape torch's code generator gives it; on any surprise there is no narrow head.
A narrow build that fails for any reason is built again with <torch/types.h> (builder/torch_ext.py).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache


IDENT = re.compile(r"[A-Za-z_]\w*")
# The candidate's own includes that the narrow head stands in for (no-ops after load_inline's <torch/types.h>).
REPLACED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?:torch/extension\.h|torch/types\.h|ATen/ATen\.h)'
                              r'[>"][^\n]*$', re.M)
REPLACED_LINE = "// kbench: this include is in the narrower torch head above"
# Includes that bring back what the narrow head leaves out (or all operators): no narrow head.
HEAVY_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?:torch/(?!extension\.h|types\.h)|ATen/(?:Functions|'
                           r'NativeFunctions|Operators|RedispatchFunctions|CPUFunctions|CUDAFunctions|'
                           r'CompositeImplicitAutogradFunctions|MetaFunctions)\.h|ATen/native/)', re.M)
# Names from what the narrow head leaves out (at::native, at::_ops, <torch/library.h>, custom classes, the
# dispatcher), and the macros that steer torch's headers.
REFUSED_NAMES = frozenset({
    "native", "_ops", "AT_PER_OPERATOR_HEADERS", "TORCH_ASSERT_ONLY_METHOD_OPERATORS", "TORCH_ASSERT_NO_OPERATORS",
    "TORCH_STABLE_ONLY", "TORCH_TARGET_VERSION", "autograd", "jit", "Library", "CppFunction", "dispatch", "schema",
    "class_", "NoInferSchemaTag", "initialize_torch_libraries", "CustomClassHolder", "getCustomClass",
    "isCustomClass", "Dispatcher", "OperatorHandle", "TypedOperatorHandle", "RegisterOperators", "OperatorName",
    "FunctionSchema", "KernelFunction", "BoxedKernel", "inferFunctionSchemaFromFunctor", "Tag",
    "HAS_PT2_COMPLIANT_TAG", "HAS_IMPL_ABSTRACT_PYSTUB"})
REFUSED_PREFIXES = ("TORCH_LIBRARY", "_TORCH_LIBRARY", "TORCH_SELECTIVE", "MAKE_TORCH_LIBRARY", "TORCH_DECLARE_",
                    "C10_REGISTER_", "TORCH_REGISTER_")
MARK = "// kbench: the declarations of <torch/types.h> this source names"
_FACTORY = re.compile(r"^inline at::Tensor (\w+)\(")


def _include_dir() -> str:
    import torch.utils.cpp_extension as cpp  # late: the fork server imports this module (sandbox/confine/forkserver.py)

    return cpp.include_paths()[0]


def _read(rel: str) -> str:
    with open(os.path.join(_include_dir(), rel)) as f:
        return f.read()


def _guarded(text: str) -> str:
    """A generated header's text inside its stable-ABI guard (``#if !defined(TORCH_STABLE_ONLY) ...`` to
    ``#else #error``)."""
    m = re.search(r"\A#if !defined\(TORCH_STABLE_ONLY\)[^\n]*\n(.*)\n#else\n#error[^\n]*\n#endif[^\n]*\n?\Z", text,
                  re.S)
    if m is None:
        raise ValueError("not guarded as expected")
    return m.group(1)


def _includes(text: str) -> list:
    return re.findall(r"^#include <([^>]+)>", text, re.M)


def _op_names(op: str) -> set:
    """The names ``<ATen/ops/<op>.h>`` declares: the op's own and, per declaration line, the first identifier
    followed by '(' (more names than it declares is safe: it only includes the header more often)."""
    names = {op}
    for line in _read(f"ATen/ops/{op}.h").splitlines():
        s = line.strip()
        if s and not s.startswith(("//", "#", "return", "template", "namespace", "}")):
            m = re.search(r"(\w+)\s*\(", s)
            if m:
                names.add(m.group(1))
    return names


def _factories(body: str) -> tuple:
    """(lines kept whole, {name: [definitions]}) of variable_factories.h's ``namespace torch`` body: every line is
    a comment, a blank, a ``using`` declaration, or part of a definition that starts with ``inline at::Tensor
    <name>(`` and ends with a ``}`` line, all at column 0 (the code generator's layout); else ValueError."""
    kept, defs, current, name = [], {}, None, None
    for line in body.splitlines():
        if current is not None:
            current.append(line)
            if line == "}":
                defs.setdefault(name, []).append("\n".join(current))
                current = None
            elif line and not line[0].isspace() and not line.startswith(("//", ")")):
                raise ValueError(f"unexpected line in a factory: {line[:80]}")
            continue
        m = _FACTORY.match(line)
        if m:
            current, name = [line], m.group(1)
        elif line.startswith("using ") and line.endswith(";"):
            kept.append(line)
        elif line.strip() and not line.startswith("//"):
            raise ValueError(f"unexpected line between factories: {line[:80]}")
    if current is not None or not defs:
        raise ValueError("the factories did not parse")
    return kept, defs


@lru_cache(maxsize=1)
def parts() -> dict | None:
    """The pieces of the narrow head, parsed from the installed torch's headers once, or None where they do not
    have the shape this module knows (a torch version that lays them out otherwise: no narrow head)."""
    try:
        aten = _includes(_guarded(_read("ATen/ATen.h")))
        functions = _guarded(_read("ATen/Functions.h"))
        types = _guarded(_read("torch/csrc/api/include/torch/types.h"))
        factories = _guarded(_read("torch/csrc/autograd/generated/variable_factories.h"))
    except (OSError, ValueError):
        return None
    if "ATen/Functions.h" not in aten or "ATen/NativeFunctions.h" not in aten:
        return None
    if _includes(types) != ["ATen/ATen.h", "optional", "torch/csrc/autograd/generated/variable_factories.h",
                            "torch/csrc/autograd/variable.h", "torch/library.h"]:
        return None
    ops = [h[len("ATen/ops/"):-2] for h in _includes(functions) if h.startswith("ATen/ops/")]
    last = functions.rindex("\n#include <")
    own = functions[functions.index("\n", last + 1) + 1:].strip()  # what Functions.h declares itself
    torch_block = re.search(r"^namespace torch \{\n.*^\} // namespace torch$", types, re.M | re.S)
    f_body = re.search(r"^namespace torch \{\n(.*)^\} // namespace torch$", factories, re.M | re.S)
    if not ops or not re.fullmatch(r"namespace at \{.*\n\}", own, re.S) or torch_block is None or f_body is None:
        return None
    try:
        kept, defs = _factories(f_body.group(1))
    except ValueError:
        return None
    names: dict = {}
    for op in ops:
        for n in _op_names(op):
            names.setdefault(n, set()).add(op)
    f_includes = [h for h in _includes(factories[:f_body.start()])
                  if not h.startswith("ATen/ops/") and h != "ATen/Functions.h"]  # its per-operator branch is taken
    return {"aten": [h for h in aten if h not in ("ATen/Functions.h", "ATen/NativeFunctions.h")],
            "functions": [h for h in _includes(functions) if not h.startswith("ATen/ops/")], "own": own,
            "names": names, "factory_includes": f_includes, "factory_kept": kept, "factories": defs,
            "torch_block": torch_block.group(0)}


def refusal(text: str) -> str | None:
    """Why ``text`` (the device code) gets no narrow head, or None."""
    if HEAVY_INCLUDE.search(text):
        return "it includes a torch header that brings back what the narrow head leaves out"
    tokens = set(IDENT.findall(text))
    hit = sorted(t for t in tokens if t in REFUSED_NAMES or t.startswith(REFUSED_PREFIXES))
    return f"it names {', '.join(hit[:4])}" if hit else None


def head_for(text: str) -> str | None:
    """The narrow head for device code ``text`` (torch's implicit head excluded), or None (use <torch/types.h>)."""
    p = parts()
    if p is None or refusal(text) is not None:
        return None
    tokens = set(IDENT.findall(text))
    factories = [d for name in sorted(tokens & p["factories"].keys()) for d in p["factories"][name]]
    used = tokens | set(IDENT.findall(p["own"])) | {t for d in factories for t in IDENT.findall(d)}
    ops = sorted({op for t in used for op in p["names"].get(t, ())})
    lines = _fixed_lines(p) + [f"#include <ATen/ops/{op}.h>" for op in ops]
    lines += [p["own"]]
    lines += [f"#include <{h}>" for h in p["factory_includes"] + ["optional", "torch/csrc/autograd/variable.h"]]
    lines += ["namespace torch {"] + p["factory_kept"] + factories + ["} // namespace torch", p["torch_block"]]
    return "\n".join(lines)


def shared_lines(text: str) -> int:
    """How many first lines of device code that starts with a narrow head are the same for every source: the
    head's includes before the operator headers it picks for the source (0 where ``text`` has no narrow head)."""
    p = parts()
    if p is None or not text.startswith(MARK):
        return 0
    return len(_fixed_lines(p))


def _fixed_lines(p: dict) -> list:
    """The narrow head's first lines, the same for every source: its mark, the define, ATen's and the functions'
    includes (what comes after depends on the operators a source uses)."""
    return [MARK + " (backends/narrow_head.py)", "#define AT_PER_OPERATOR_HEADERS",
            *[f"#include <{h}>" for h in p["aten"] + p["functions"]]]


def narrow_sources(cuda_sources) -> tuple | None:
    """(head, sources): the narrow head and ``cuda_sources`` (a string or a list of strings, as load_inline takes
    them) with their includes of <torch/extension.h>, <torch/types.h> and <ATen/ATen.h> turned into comments (one
    line for one), or None (no narrow head for them)."""
    texts = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources or [])
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    head = head_for("\n".join(texts))
    if head is None:
        return None
    out = [REPLACED_INCLUDE.sub(REPLACED_LINE, t) for t in texts]
    return head, (out[0] if isinstance(cuda_sources, str) else out)

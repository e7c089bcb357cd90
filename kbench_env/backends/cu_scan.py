"""A C++ source's file-scope structure, read without a compiler: comments and literals blanked (``mask``), and the
file cut into its preprocessor lines, blocks, definitions and declarations (``items``). Enough to cut a
KernelBench-format ``.cu`` apart (backends/host_device_split.py), which refuses whatever these do not read, and
whose every cut build is checked by the compilers."""

from __future__ import annotations

import re

IDENT = re.compile(r"[A-Za-z_]\w*")
_TEMPLATE = re.compile(r"\s*template\s*<")
TYPE_HEAD = re.compile(r"\s*(?:typedef\b|using\b|(?:struct|class|union|enum)\b)")
_BLOCK_HEAD = re.compile(r'\s*(?:inline\s+)?namespace\b|\s*extern\s*"[^"\n]*"\s*$')  # (masked: "C" blanked)


def mask(text: str) -> str:
    """``text`` with comments and the insides of string and character literals blanked (newlines kept): the same
    length, so positions found in it cut the text itself."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if m is None:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            blank(i + 2, j - 1)
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()):  # a digit separator (1'000)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def match(masked: str, i: int, open_: str, close: str) -> int:
    """The index just past the ``close`` that matches the ``open_`` at ``i`` (parentheses, brackets and braces
    counted), or -1."""
    depth = 0
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for j in range(i, len(masked)):
        c = masked[j]
        if c in pairs:
            stack.append(pairs[c])
            depth += 1
        elif c in ")]}":
            if not stack or stack.pop() != c:
                return -1
            depth -= 1
            if depth == 0:
                return j + 1 if c == close else -1
    return -1


def template_end(masked: str, i: int) -> int:
    """The index just past a template header's ``>`` (``masked[i:]`` starts with ``template <``), or -1."""
    j = masked.index("<", i)
    depth = 0
    while j < len(masked):
        c = masked[j]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return j + 1
        elif c in "({[":
            j = match(masked, j, c, {"(": ")", "[": "]", "{": "}"}[c])
            if j < 0:
                return -1
            continue
        elif c in ";}":
            return -1
        j += 1
    return -1


def items(text: str, masked: str) -> list | None:
    """The file-scope items of ``text``: (kind, start, end, head end) with kind "pp" (a preprocessor line and its
    continuations), "block" (a namespace or linkage block), "function" (a definition with a body) or "decl" (ends
    with ``;``); None where the braces do not balance."""
    out = []
    i, n = 0, len(text)
    while i < n:
        while i < n and masked[i].isspace():
            i += 1
        if i >= n:
            break
        if masked[i] == "#":
            j = i
            while True:
                e = masked.find("\n", j)
                if e < 0:
                    e = n
                    break
                if text[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            out.append(("pp", i, e, e))
            i = e
            continue
        if masked[i] == ";":
            out.append(("decl", i, i + 1, i + 1))
            i += 1
            continue
        j, head_end, kind = i, -1, None
        while j < n:
            c = masked[j]
            if c == ";":
                head_end = j if head_end < 0 else head_end
                kind = kind or "decl"
                j += 1
                break
            if c == "#" and masked[:j].rstrip(" \t").endswith("\n"):
                return None  # a preprocessor line inside a declaration's head
            if c in "([":
                k = match(masked, j, c, ")" if c == "(" else "]")
                if k < 0:
                    return None
                j = k
                continue
            if c == "{":
                head = masked[i:j]
                end = match(masked, j, "{", "}")
                if end < 0:
                    return None
                bare = strip_template(head)
                if bare is None:
                    return None
                if _BLOCK_HEAD.match(bare):
                    out.append(("block", i, end, j))
                    i = end
                    kind = "done"
                    break
                if TYPE_HEAD.match(bare) or "=" in bare:
                    head_end = j if head_end < 0 else head_end
                    kind = "decl"
                    j = end
                    continue  # to the declaration's ";"
                out.append(("function", i, end, j))
                i = end
                kind = "done"
                break
            if c in ")]}":
                return None
            j += 1
        if kind == "done":
            continue
        if kind is None:
            return None  # text after the last item that does not end
        out.append((kind, i, j, head_end))
        i = j
    return out


def strip_template(head: str) -> str | None:
    """``head`` less its leading template headers, or None where one does not close."""
    while _TEMPLATE.match(head):
        end = template_end(head, 0)
        if end < 0:
            return None
        head = head[end:]
    return head

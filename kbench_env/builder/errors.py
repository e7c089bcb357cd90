"""A build's failure as a person reads it: ``BuildRefused`` (a request the builder will not compile, and why) and
``trim_compiler_output`` (the compiler's own messages, errors first, without build noise or random paths)."""

from __future__ import annotations

import re

_COMMAND = re.compile(r"\S*(?:c\+\+|g\+\+|gcc|clang\+\+|nvcc|ld)\s+-.*")


class BuildRefused(ValueError):
    """A build request the builder refuses before any compiler runs (a flag, a path, a malformed argument)."""


def trim_compiler_output(text: str, build_root: str = "", max_lines: int = 40) -> str:
    """Keep the compiler's own messages (errors first), drop build noise and random paths."""
    if build_root:
        text = text.replace(build_root, "<build>")
    # Compiler command lines (hundreds of characters of flags) say nothing the candidate can act on.
    lines = [_COMMAND.sub("<compiler command>", line) if (" -isystem " in line or " -shared " in line) else line
             for line in text.splitlines()]
    if len(lines) <= max_lines:
        return "\n".join(lines)
    key = [i for i, line in enumerate(lines) if "error" in line.lower() and "error: command" not in line.lower()]
    keep: list[int] = []
    for i in key:
        keep.extend(range(max(0, i - 2), min(len(lines), i + 4)))
    keep = sorted(set(keep))[:max_lines] or list(range(max_lines))
    out = [lines[0]] if keep[0] != 0 else []
    prev = -1
    for i in keep:
        if prev >= 0 and i != prev + 1:
            out.append("  ...")
        out.append(lines[i])
        prev = i
    out.append(f"  ... ({len(lines) - len(keep)} more lines)")
    return "\n".join(out)

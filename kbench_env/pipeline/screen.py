"""The screen: cheap checks on a candidate's source text, in the parent, in milliseconds, before anything compiles.

Owns turning an action (a string, possibly an LLM reply with a fenced code block) into candidate source, and
rejecting what cannot possibly work: too large, not Python, nested past what the screen reads, no ``ModelNew``, not
using the backend's kernel mechanism. It never executes candidate code, and nothing in it takes more than linear
time or recursion in the action's size: an action is untrusted text, checked for size before it is scanned.
"""

from __future__ import annotations

import ast
import re

from kbench_env.protocol.screen_error import ScreenError  # raised here and by the backends' own screens
from kbench_env.tasks import pysource

MAX_SOURCE_CHARS = 200_000
#: An LLM reply may hold prose and other code around the candidate's block.
MAX_ACTION_CHARS = 5 * MAX_SOURCE_CHARS
#: Syntax-tree depth: ten times that of the deepest module in this repository, past which nothing real goes (Python's
#: own parser stops at 200 nested parentheses); a deeper tree is refused before anything walks it recursively.
MAX_NESTING = 200

_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+\-]*)")  # after a fence: the block's language name


#: Names that switch PyTorch's operator records (RecordFunction) off or hook every operator, from Python
#: (worker/record_switches.SWITCHES) and from C++ (sandbox/confine/record_controls.py): what the forward audit reads.
RECORD_SWITCHES = ("_enable_record_function", "_toggle_collection_dynamic", "_clear_callbacks", "enableRecordFunction",
                   "RecordFunctionGuard", "set_record_function_tls_", "addGlobalCallback", "addThreadLocalCallback",
                   "clearCallbacks", "clearGlobalCallbacks", "clearThreadLocalCallbacks", "removeCallback",
                   "disableCallback")


def extract_source(action) -> str:
    """The candidate's Python source from an action: plain source, or the code block of an LLM reply.

    With several fenced blocks, the last Python block that defines ``ModelNew`` wins (models often show the
    reference first); otherwise the last Python block; otherwise the action as it is.
    """
    if not isinstance(action, (str, bytes)):
        raise ScreenError(f"an action must be a string of Python source, got {type(action).__name__}")
    if len(action) > MAX_ACTION_CHARS:
        raise ScreenError(f"the action is {len(action):,} characters; the limit is {MAX_ACTION_CHARS:,} (and "
                          f"{MAX_SOURCE_CHARS:,} for the source itself)")
    if isinstance(action, bytes):
        action = action.decode("utf-8", errors="replace")
    if "```" not in action:
        return action
    blocks = _code_blocks(action)
    py = [b for lang, b in blocks if lang in ("", "python", "py", "python3")]
    with_model = [b for b in py if "ModelNew" in b] or [b for _, b in blocks if "ModelNew" in b]
    if with_model:
        return with_model[-1]
    if py:
        return py[-1]
    return action


def _code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block in order: a fence of three backticks, the rest of its line (starting
    with the language name), then everything up to the next three backticks.

    One forward pass of ``str.find``: each search starts where the one before ended, so every character is looked at
    a bounded number of times (a regular expression with a lazy body would retry the rest of the text from every
    fence that has no line end or closing fence after it: quadratic). Once a fence lacks either, every later one does
    too, so the pass ends there."""
    blocks, pos = [], 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            break
        eol = text.find("\n", start + 3)
        if eol < 0:
            break
        end = text.find("```", eol + 1)
        if end < 0:
            break
        blocks.append((_LANG.match(text, start + 3, eol).group(1).lower(), text[eol + 1 : end]))
        pos = end + 3
    return blocks


def record_switches(source: str) -> list[str]:
    """The names of RECORD_SWITCHES the source spells out (anywhere: code, strings, C++ sources), in order. The
    obvious spelling only: the worker refuses the Python switches however they are reached
    (worker/record_switches.py), and the builds' symbols show the C++ ones (builder/symbols.py)."""
    return [name for name in RECORD_SWITCHES if name in source]


def _depth(tree: ast.AST, limit: int) -> int:
    """The tree's depth, counted without recursion, up to ``limit + 1``."""
    deepest, stack = 0, [(tree, 1)]
    while stack and deepest <= limit:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a name or an attribute chain (walked, not recursed), None for any other expression."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id] + parts[::-1])


def screen(source: str, backend=None) -> ast.Module:
    """Reject a source that cannot work, with a message for people. Returns the parsed module."""
    if not source.strip():
        raise ScreenError("the action is empty: send Python source that defines class ModelNew")
    if len(source) > MAX_SOURCE_CHARS:
        raise ScreenError(f"source is {len(source):,} characters; the limit is {MAX_SOURCE_CHARS:,}")
    if "\x00" in source:
        raise ScreenError("source contains NUL bytes")
    try:
        tree = pysource.parse(source, filename="<candidate>")
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        if len(line) > 160:
            line = line[:160] + " ..."
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        raise ScreenError(f"not valid Python: {exc.msg} at {where}" + (f":\n    {line}" if line else "")) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ScreenError(f"not valid Python: {exc}") from None
    if _depth(tree, MAX_NESTING) > MAX_NESTING:
        raise ScreenError(f"the source nests expressions and statements more than {MAX_NESTING} levels deep (an "
                          f"attribute chain, an operator chain or brackets inside brackets): write it flatter")
    try:
        _check_model(tree, source, backend)
    except (RecursionError, MemoryError) as exc:  # a hostile tree that still defeats a check: refused, not a crash
        raise ScreenError(f"the screen could not read the source ({type(exc).__name__}): simplify it") from None
    return tree


def _check_model(tree: ast.Module, source: str, backend) -> None:
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        raise ScreenError("no class ModelNew: define `class ModelNew(nn.Module)` with the same constructor and "
                          "forward signature as Model")
    forward = [n for n in classes["ModelNew"].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward"]
    bases = {_dotted(b) for b in classes["ModelNew"].bases}  # None: a base that is no plain name (still a base)
    if not forward and not (bases - {"nn.Module", "torch.nn.Module", "Module"}):
        raise ScreenError("ModelNew has no forward method")
    if backend is not None:
        backend.screen(tree, source)

"""Python source to an AST and an AST to code, one thread of this process at a time.

CPython 3.11 counts the AST converters' recursion in the interpreter's state, shared by its threads: two threads
turning source into AST objects (``ast.parse``) or a tree into code (``compile``) at once can each end on the count
the other left, and one of them fails with ``SystemError: AST constructor recursion depth mismatch`` (python/cpython
gh-106905). An evaluator screens and loads candidates in threads at once, so the error ended an honest candidate as
an internal evaluator error. Every parse and tree compile of kbench goes through here, under one lock; a parse of
another library's thread (torch.compile reads sources too) can still interleave, so that SystemError is tried once
more: the count is set afresh at each conversion's start, so a second try does not see the first one's.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()
#: Tries of one conversion that fails with the mismatch (the first and one more).
TRIES = 2


def _mismatch(exc: SystemError) -> bool:
    return "recursion depth mismatch" in str(exc)


def _serialised(fn, *args, **kwargs):
    for attempt in range(TRIES):
        try:
            with _LOCK:
                return fn(*args, **kwargs)
        except SystemError as exc:
            if not _mismatch(exc) or attempt == TRIES - 1:
                raise


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, one thread at a time."""
    return _serialised(ast.parse, source, filename=filename, mode=mode)


def compile_tree(tree: ast.AST, filename: str, mode: str = "exec"):
    """``compile(tree, filename, mode)`` of an AST, one thread at a time."""
    return _serialised(compile, tree, filename, mode)

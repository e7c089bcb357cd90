"""A task file's module-level size constants: found and evaluated from the syntax tree, and overridden.

This module owns which top-level assignments of a KernelBench-format file are sizes, their values, and rewriting
them for a configuration. Nothing here runs the file: right-hand sides are evaluated by a small interpreter that
knows integer and float literals, tuples and lists, arithmetic (``+ - * / // % **``, unary minus), ``int``,
``min``, ``max``, ``abs``, and the names of constants assigned before. So ``N = 2048 * 2``, ``dim = 4096 // 2``,
``D, H, W = (16, 32, 32)``, ``input_shape = (8192 * 2,)`` and ``hidden = [1024] * 4`` are sizes.

A constant is *free* when its right-hand side names no other constant: a configuration may override it (the whole
right-hand side is replaced by the new value). A constant computed from others (``groups = in_channels``,
``input_shape = (num_classes,)``) is not overridden; it follows, because the file runs with the overrides applied.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from kbench_env.tasks import pysource

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CALLS = {"int": int, "min": min, "max": max, "abs": abs}
#: Bounds that keep the interpreter cheap on hostile input (``10 ** 10 ** 10``, ``[0] * 10 ** 9``).
_MAX_MAGNITUDE = 1 << 62
_MAX_ITEMS = 4096


class _NotASize(Exception):
    """The expression is outside what the interpreter evaluates."""


@dataclass(frozen=True)
class SizeConstant:
    """A module-level constant: its value (an int, float, or a tuple/list of them) and whether it may be
    overridden (``free``: its expression names no other constant)."""

    name: str
    value: object
    free: bool


def _is_int(v) -> bool:
    return type(v) is int


def _eval(node: ast.AST, env: dict, names: set):
    """Value of ``node``; ``names`` collects the constants it reads."""
    if isinstance(node, ast.Constant):
        if type(node.value) in (int, float):
            return node.value
        raise _NotASize
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _NotASize
        names.add(node.id)
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                inner = _eval(elt.value, env, names)
                if not isinstance(inner, (tuple, list)):
                    raise _NotASize
                items.extend(inner)
            else:
                items.append(_eval(elt, env, names))
        if len(items) > _MAX_ITEMS:
            raise _NotASize
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand, env, names)
        if not isinstance(v, (int, float)):
            raise _NotASize
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _eval(node.left, env, names), _eval(node.right, env, names)
        if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
            return _sequence_op(node.op, a, b)
        if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > _MAX_MAGNITUDE):
            raise _NotASize
        try:
            v = _BINOPS[type(node.op)](a, b)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError):
            raise _NotASize from None
        if isinstance(v, complex) or abs(v) > _MAX_MAGNITUDE:
            raise _NotASize
        return v
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS
            and not node.keywords and node.args):
        args = [_eval(a, env, names) for a in node.args]
        try:
            return _CALLS[node.func.id](*args)
        except (TypeError, ValueError, OverflowError):
            raise _NotASize from None
    raise _NotASize


def _sequence_op(op, a, b):
    """``(1,) + (2,)`` and ``[1024] * 16``: concatenation and repetition, bounded."""
    if isinstance(op, ast.Add) and type(a) is type(b):
        out = a + b
    elif isinstance(op, ast.Mult) and _is_int(b) and isinstance(a, (tuple, list)):
        out = a * b if 0 <= b and len(a) * b <= _MAX_ITEMS else None
    elif isinstance(op, ast.Mult) and _is_int(a) and isinstance(b, (tuple, list)):
        out = b * a if 0 <= a and len(b) * a <= _MAX_ITEMS else None
    else:
        out = None
    if out is None or len(out) > _MAX_ITEMS:
        raise _NotASize
    return out


def _targets(stmt) -> list[tuple[str, ast.AST | None]]:
    """``(name, value node)`` pairs a top-level assignment binds: ``A = expr`` gives ``[(A, expr)]``,
    ``A, B = (x, y)`` gives ``[(A, x), (B, y)]``; an unpacking of anything else gives ``(name, None)``."""
    if isinstance(stmt, ast.AnnAssign):
        if isinstance(stmt.target, ast.Name) and stmt.value is not None:
            return [(stmt.target.id, stmt.value)]
        return []
    if not isinstance(stmt, ast.Assign):
        return []
    out = []
    for t in stmt.targets:
        if isinstance(t, ast.Name):
            out.append((t.id, stmt.value))
        elif isinstance(t, (ast.Tuple, ast.List)):
            pair = isinstance(stmt.value, (ast.Tuple, ast.List)) and len(stmt.value.elts) == len(t.elts)
            for i, elt in enumerate(t.elts):
                if isinstance(elt, ast.Name):
                    out.append((elt.id, stmt.value.elts[i] if pair else None))
    return out


def constants(tree: ast.Module) -> dict[str, SizeConstant]:
    """Every top-level constant the interpreter can evaluate, in file order. A name bound more than once, or
    changed in place (``N *= 2``), or bound by anything but an assignment (a function, an import) is left out:
    overriding it would not say what the file computes."""
    env: dict = {}
    out: dict[str, SizeConstant] = {}
    bound: dict[str, int] = {}
    for stmt in tree.body:
        for name in _bound_names(stmt):
            bound[name] = bound.get(name, 0) + 1
    for stmt in tree.body:
        for name, node in _targets(stmt):
            env.pop(name, None)
            if node is None or bound.get(name, 0) != 1:
                continue
            names: set = set()
            try:
                value = _eval(node, env, names)
            except (_NotASize, RecursionError):
                continue
            env[name] = value
            out[name] = SizeConstant(name, value, free=not names)
    return out


def _bound_names(stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    names = []
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
            names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def size_constants(source: str) -> dict:
    """The free integer sizes of a task file: ``{name: int or tuple/list of ints}`` (what a configuration's
    ``sizes`` may override), evaluated (``N = 2048 * 2`` gives 4096)."""
    out = {}
    for c in constants(pysource.parse(source)).values():
        v = c.value
        if not c.free:
            continue
        if _is_int(v) or (isinstance(v, (tuple, list)) and v and all(_is_int(x) for x in v)):
            out[c.name] = v
    return out


def _literal(value, like: ast.AST | None) -> ast.AST:
    """``value`` as an expression; a list value for a constant written as a tuple stays a tuple (configurations
    travel as JSON, which has no tuples)."""
    if isinstance(value, (list, tuple)):
        items = [_literal(v, None) for v in value]
        if isinstance(like, ast.List) or (like is None and isinstance(value, list)):
            return ast.List(elts=items, ctx=ast.Load())
        return ast.Tuple(elts=items, ctx=ast.Load())
    return pysource.parse(repr(value), mode="eval").body


def apply_overrides(tree: ast.Module, sizes: dict) -> set:
    """Replace, in place, the right-hand sides that bind the names in ``sizes`` with their new values (for an
    unpacking ``A, B = (x, y)``, the element); returns the names that were found."""
    seen: set = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name) and stmt.value is not None and stmt.target.id in sizes:
                stmt.value = _literal(sizes[stmt.target.id], stmt.value)
                seen.add(stmt.target.id)
            continue
        if not isinstance(stmt, ast.Assign):
            continue
        for t in stmt.targets:
            if isinstance(t, ast.Name) and t.id in sizes:
                stmt.value = _literal(sizes[t.id], stmt.value)
                seen.add(t.id)
            elif (isinstance(t, (ast.Tuple, ast.List)) and isinstance(stmt.value, (ast.Tuple, ast.List))
                  and len(stmt.value.elts) == len(t.elts)):
                for i, elt in enumerate(t.elts):
                    if isinstance(elt, ast.Name) and elt.id in sizes:
                        stmt.value.elts[i] = _literal(sizes[elt.id], stmt.value.elts[i])
                        seen.add(elt.id)
    return seen

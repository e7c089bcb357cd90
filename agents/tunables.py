"""Tunable constants marked in kernel source, and the offline mutation and crossover over them.

A tunable is a line of the form::

    constexpr int BLOCK = 64;  // kbench-tune: 16 32 64 128     (C++ / CUDA: a declaration ``NAME = VALUE;``)
    BLOCK = 1024  # kbench-tune: 256 512 1024 2048              (Python, as Triton solutions set their constants)

followed by a ``kbench-tune:`` comment listing the allowed values, separated by spaces or commas. A *genome* is ``{NAME: value}`` over the tunables of a source; ``render`` writes
a genome back into the source, changing nothing else.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

_TUNE = re.compile(
    r"^(?P<head>[^\n]*?\b(?P<name>[A-Za-z_]\w*)\s*=\s*)(?P<value>[^;#\n]+?)"
    r"(?P<tail>\s*(?:;[^\n]*?//|\#)\s*kbench-tune:\s*)"
    r"(?P<choices>[^\n]+?)\s*$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Tunable:
    name: str
    value: str
    choices: tuple


def parse_tunables(source: str) -> list[Tunable]:
    """The marked tunables of ``source`` in order of appearance (first occurrence of each name)."""
    out, seen = [], set()
    for m in _TUNE.finditer(source):
        name = m.group("name")
        if name in seen:
            continue
        choices = tuple(c for c in re.split(r"[\s,]+", m.group("choices").strip()) if c)
        if not choices:
            continue
        seen.add(name)
        out.append(Tunable(name, m.group("value").strip(), choices))
    return out


def genome(source: str) -> dict:
    return {t.name: t.value for t in parse_tunables(source)}


def render(source: str, values: dict) -> str:
    """``source`` with the listed tunables set to ``values`` (names not listed keep their value)."""
    def sub(m):
        name = m.group("name")
        if name not in values:
            return m.group(0)
        return f"{m.group('head')}{values[name]}{m.group('tail')}{m.group('choices')}"

    return _TUNE.sub(sub, source)


def space_size(source: str) -> int:
    n = 1
    for t in parse_tunables(source):
        n *= len(set(t.choices) | {t.value})
    return n


def mutate(source: str, rng: random.Random, seen: set | None = None, neighbour_bias: float = 0.7,
           tries: int = 64, max_scan: int = 100_000) -> str | None:
    """``source`` with one tunable (sometimes two) moved to another listed value; ``None`` if nothing new is left.

    When every nearby genome is in ``seen``, the nearest unseen one (fewest changed tunables) is returned.

    With probability ``neighbour_bias`` the value moves to an adjacent entry of its list (local search), else to
    any other entry. ``seen`` holds genomes (as sorted item tuples) not to propose again.
    """
    tunables = [t for t in parse_tunables(source) if len(set(t.choices) | {t.value}) > 1]
    if not tunables:
        return None
    seen = seen if seen is not None else set()
    base = {t.name: t.value for t in tunables}
    for _ in range(tries):
        child = dict(base)
        for t in rng.sample(tunables, 2 if len(tunables) > 1 and rng.random() < 0.25 else 1):
            child[t.name] = _move(t, child[t.name], rng, neighbour_bias)
        key = tuple(sorted(child.items()))
        if child != base and key not in seen:
            return render(source, child)
    # Fall back to the nearest unseen genome (fewest changes), so that the space is only declared exhausted
    # when it is (spaces above ``max_scan`` genomes are scanned over single changes only).
    options = [sorted(set(t.choices) | {t.value}, key=lambda c, t=t: c != base[t.name]) for t in tunables]
    total = 1
    for o in options:
        total *= len(o)
    if total > max_scan:
        candidates = (dict(base, **{t.name: c}) for t in tunables for c in t.choices)
    else:
        candidates = sorted((dict(zip(base, combo)) for combo in itertools.product(*options)),
                            key=lambda g: sum(g[k] != base[k] for k in base))
    for child in candidates:
        if child != base and tuple(sorted(child.items())) not in seen:
            return render(source, child)
    return None


def _move(t: Tunable, value: str, rng: random.Random, neighbour_bias: float) -> str:
    choices = list(t.choices)
    others = [c for c in choices if c != value]
    if not others:
        return value
    if value in choices and rng.random() < neighbour_bias:
        i = choices.index(value)
        near = [choices[j] for j in (i - 1, i + 1) if 0 <= j < len(choices)]
        if near:
            return rng.choice(near)
    return rng.choice(others)


def crossover(a: str, b: str, rng: random.Random, seen: set | None = None, tries: int = 32) -> str | None:
    """A child of ``a``'s code with each tunable taken from ``a`` or ``b`` at random, different from both parents.

    ``None`` when the parents differ in fewer than two tunables (no new combination) or every combination is seen.
    """
    ga, gb = genome(a), genome(b)
    shared = [k for k in ga if k in gb and ga[k] != gb[k]]
    if len(shared) < 2:
        return None
    seen = seen if seen is not None else set()
    for _ in range(tries):
        child = dict(ga)
        for k in shared:
            child[k] = rng.choice((ga[k], gb[k]))
        key = tuple(sorted(child.items()))
        if child != ga and child != {**ga, **{k: gb[k] for k in shared}} and key not in seen:
            return render(a, child)
    return None


def key_of(source: str) -> tuple:
    """The genome of ``source`` as a hashable key."""
    return tuple(sorted(genome(source).items()))

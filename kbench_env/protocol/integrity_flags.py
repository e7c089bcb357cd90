"""Integrity flags: the kinds of exploit the checks can find in a candidate, in one registry.

A flag is one registered kind and a detail written for the candidate's author:
``make("lazy_output", "forward returned tensor subclasses (...)")``. An ``EvalResult`` carries its flags rendered
as ``"kind: detail"`` strings (``EvalResult.integrity_flags``, at most one of each kind; agents, logs and reports
read those strings), and ``parse`` reads one back. A kind that is not registered is refused both ways.

Each kind states what it means, the reward a result carrying it is paid (every preset of pipeline/reward.py pays
it, whatever the speedup), and the rules under which its finding is allowed, so the flag is not raised
(pipeline/rules.py). The README's table of flags is ``markdown_table()`` (tests/test_integrity_flags.py holds
the two equal). The module imports nothing of kbench's: the trusted side and the worker side may both use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

#: The reward of a result with any integrity flag, under every preset: below every other outcome.
EXPLOIT_REWARD = -1.0


@dataclass(frozen=True)
class Kind:
    """One kind of integrity flag: its ``name`` (the text before the colon), its one-line ``meaning``, the
    ``reward`` a result carrying it is paid, and the ``rules`` under which it is not raised."""

    name: str
    meaning: str
    reward: float = EXPLOIT_REWARD
    dropped_under: tuple = ()


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("pytorch_compute_in_forward", "forward ran PyTorch compute operators besides the candidate's own kernels "
         "(from Python or from its C++/CUDA), seen by the forward audit", dropped_under=("kernelbench",)),
    Kind("pytorch_compute_linked", "the candidate's build calls PyTorch's or a math library's compute past the "
         "dispatcher (its symbols, read before it runs)", dropped_under=("kernelbench",)),
    Kind("no_kernel_launched", "none of the candidate's own kernels ran inside forward"),
    Kind("audit_blinded", "the candidate switched PyTorch's operator records off or hooks every operator, which "
         "hides what forward runs (at run time, in its build's symbols or named in its source)"),
    Kind("audit_patched", "the candidate replaced functions the worker's forward audit or checks run on"),
    Kind("lazy_output", "forward returned tensor subclasses, whose values may be computed after the timed region"),
    Kind("sandbox_violation", "the sandbox refused something the candidate tried (a file, a socket, a process, a "
         "record switch)"),
    Kind("inputs_modified", "forward wrote into its inputs"),
    Kind("nondeterministic", "two runs on the same inputs gave different outputs"),
    Kind("precision_flags_changed", "the candidate changed pinned precision settings (TF32, cuDNN benchmark, "
         "matmul precision)"),
    Kind("timed_output_wrong", "a timed call's output, read by the trusted side, does not match the reference "
         "for its inputs (cached, stale or deferred results)"),
    Kind("device_time_outside_trusted_bound", "a GPU worker reported device times far under what the trusted "
         "side's clock allows"),
    Kind("below_roofline", "a time under half the device's measured floor for the configuration's output"),
    Kind("speedup_not_reverified", "a speedup above the re-verification threshold was not confirmed by the "
         "trusted side's wall-clock re-timing"),
)}


class UnknownFlagKind(ValueError):
    """A flag of a kind the registry does not hold."""


@dataclass(frozen=True)
class Flag:
    """One integrity flag: a registered ``kind`` and its ``detail``; ``str(flag)`` is ``"kind: detail"``."""

    kind: str
    detail: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise UnknownFlagKind(f"unknown integrity flag kind {self.kind!r}; the kinds: {', '.join(KINDS)}")

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def make(kind: str, detail: str) -> Flag:
    """The flag of ``kind`` (UnknownFlagKind if it is not registered) with ``detail``."""
    return Flag(kind, detail)


def parse(text: str) -> Flag:
    """The flag an ``EvalResult.integrity_flags`` string renders; ValueError (UnknownFlagKind for an unregistered
    kind) for anything else."""
    kind, sep, detail = text.partition(": ")
    if not sep:
        raise ValueError(f"not an integrity flag (\"kind: detail\"): {text[:80]!r}")
    return Flag(kind, detail)


def kinds(flags: Iterable[str]) -> list[str]:
    """The kinds of rendered flags, in order."""
    return [parse(f).kind for f in flags]


def reward(flags: Iterable[str]) -> float | None:
    """The reward of a result carrying the rendered ``flags``: the lowest of their kinds'; None without a flag."""
    return min((KINDS[k].reward for k in kinds(flags)), default=None)


def dropped_under(rules: str) -> frozenset[str]:
    """The kinds not raised under ``rules``: their findings are allowed there."""
    return frozenset(k.name for k in KINDS.values() if rules in k.dropped_under)


def markdown_table() -> str:
    """The README's table of the kinds: name, meaning, reward, rules under which the flag is not raised."""
    rows = ["| flag | what it means | reward | not raised under the rules |", "| --- | --- | ---: | --- |"]
    rows += [f"| `{k.name}` | {k.meaning} | {k.reward:.1f} | {', '.join(k.dropped_under) or '-'} |"
             for k in KINDS.values()]
    return "\n".join(rows)

"""Integrity flags from what the worker and the sandbox report of a candidate: a replaced forward audit, lazy
(tensor-subclass) outputs, what the sandbox refused it, what its builds call past the dispatcher, record switches
its source spells out; and the rule that a result carries at most one flag of each kind."""

from __future__ import annotations

from kbench_env.pipeline import rules as rules_mod
from kbench_env.measure.ownership import trusted_prefixes
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.screen import record_switches
from kbench_env.protocol.integrity_flags import Flag, kinds, make
from kbench_env.sandbox.worker_process import Worker


def flag(result: EvalResult, new: Flag) -> None:
    """Add integrity flag ``new`` to ``result`` (rendered: "kind: detail") unless it already has one of its kind."""
    if new.kind not in kinds(result.integrity_flags):
        result.integrity_flags.append(str(new))


def note_reports(result: EvalResult, header, config: str | None = None) -> bool:
    """What the worker reported of the candidate with a reply: the forward audit's functions replaced
    (worker/audit.AuditGuard), tensor subclasses forward returned (their values may be computed when read, after the
    timed region). Integrity flags; True if there was any."""
    if not isinstance(header, dict):
        return False
    where = f" on configuration {config!r}" if config else ""
    if header.get("audit_patched"):
        flag(result, make("audit_patched", "the candidate replaced functions the worker's forward audit or checks run "
                          "on (" + ", ".join(map(str, header["audit_patched"][:8])) + f"){where}; what forward ran "
                          "cannot be trusted"))
        result.correct = False
        return True
    if not header.get("lazy_output"):
        return False
    flag(result, make("lazy_output", f"forward returned tensor subclasses "
                                     f"({', '.join(map(str, header['lazy_output'][:4]))}){where}; return plain "
                                     f"torch.Tensor outputs, computed by the time forward returns"))
    result.correct = False
    return True


def flag_sandbox_violations(worker: Worker, result: EvalResult) -> None:
    """What the sandbox refused the candidate (the worker's reports, see sandbox.Worker.violations) becomes one
    ``sandbox_violation`` integrity flag, so the attempt is paid as an exploit whatever else the candidate did."""
    seen = worker.violations()
    if seen:
        more = f" (and {len(seen) - 3} more)" if len(seen) > 3 else ""
        flag(result, make("sandbox_violation", "the candidate tried to " + "; ".join(seen[:3]) + more))


def flag_builds(rules: str, worker: Worker, result: EvalResult) -> bool:
    """Flag what the candidate's builds call past the dispatcher or switch (rules.linked_flags, from the symbols of
    the libraries the worker was given, and of any other library it has mapped from outside the system and the
    Python installation: one it wrote and loaded itself); True if there is any such flag."""
    found = rules_mod.linked_flags(rules, worker.linked(mapped_from=trusted_prefixes()))
    for f in found:
        flag(result, f)
    if found:
        result.correct = False
    return bool(found)


def flag_record_switches(source: str, result: EvalResult) -> None:
    """The screen's finding of RecordFunction's switches spelt out in the source (screen.record_switches), flagged
    ``audit_blinded``."""
    switches = record_switches(source)
    if switches:
        flag(result, make("audit_blinded", f"the source names {', '.join(switches[:4])}, which switch PyTorch's "
                                           f"operator records off or hook every operator, hiding what forward runs "
                                           f"from the forward audit"))

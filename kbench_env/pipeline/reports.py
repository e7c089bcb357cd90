"""Integrity flags from what the worker and the sandbox report of a candidate: a replaced forward audit, lazy
(tensor-subclass) outputs,
what the sandbox refused it; and the rule that a result carries at most one flag
of each kind."""

from __future__ import annotations

from kbench_env.pipeline.result import EvalResult
from kbench_env.sandbox.worker_process import Worker


def flag(result: EvalResult, text: str) -> None:
    """Add integrity flag ``text`` ("kind: why") unless ``result`` already has one of its kind."""
    kind = text.split(":", 1)[0]
    if not any(f.split(":", 1)[0] == kind for f in result.integrity_flags):
        result.integrity_flags.append(text)


def note_reports(result: EvalResult, header, config: str | None = None) -> bool:
    """What the worker reported of the candidate with a reply: the forward audit's functions replaced
    (integrity.AuditGuard), tensor subclasses forward returned (their values may be computed when read, after the
    timed region). Integrity flags; True if there was any."""
    if not isinstance(header, dict):
        return False
    where = f" on configuration {config!r}" if config else ""
    if header.get("audit_patched"):
        flag(result, "audit_patched: the candidate replaced functions the worker's forward audit or checks run on ("
                     + ", ".join(map(str, header["audit_patched"][:8])) + f"){where}; what forward ran cannot be "
                     "trusted")
        result.correct = False
        return True
    if not header.get("lazy_output"):
        return False
    flag(result, f"lazy_output: forward returned tensor subclasses ({', '.join(map(str, header['lazy_output'][:4]))})"
                 f"{where}; return plain torch.Tensor outputs, computed by the time forward returns")
    result.correct = False
    return True


def flag_sandbox_violations(worker: Worker, result: EvalResult) -> None:
    """What the sandbox refused the candidate (the worker's reports, see sandbox.Worker.violations) becomes one
    ``sandbox_violation`` integrity flag, so the attempt is paid as an exploit whatever else the candidate did."""
    seen = worker.violations()
    if seen and not any(f.startswith("sandbox_violation") for f in result.integrity_flags):
        more = f" (and {len(seen) - 3} more)" if len(seen) > 3 else ""
        result.integrity_flags.append("sandbox_violation: the candidate tried to " + "; ".join(seen[:3]) + more)

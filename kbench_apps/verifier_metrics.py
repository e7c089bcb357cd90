"""How well soft verifiers predicted: their recorded predictions against the recorded outcomes of a run.

A soft verifier (``agents/soft_verify.py``) predicts, before a candidate is built, ``{check: bool}`` for each of
``CHECKS``; ``kbench run`` records the prediction beside the candidate's EvalResult dict. Here each check's real
outcome is read from the EvalResult (``actual_outcome``) and the predictions are scored (``verifier_accuracy``:
precision and recall per check), for ``kbench report``. This module reads records only.
"""

from __future__ import annotations

import re

#: The checks a verifier predicts, each with its outcome defined by ``actual_outcome``.
CHECKS = ("compile_error", "memory_error", "numerics_error")

_MEMORY_PATTERNS = re.compile(r"SIGSEGV|SIGBUS|segmentation|illegal memory|out of memory|out-of-memory|SIGKILL|"
                              r"misaligned address|memory access|bad_alloc|MemoryError|GiB of memory|CUDA error: an illegal",
                              re.IGNORECASE)


def actual_outcome(ev: dict) -> dict:
    """The real outcome of an evaluation, in the verifier's terms (``{check: bool}``), from an EvalResult dict."""
    stage = ev.get("error_stage")
    err = ev.get("error") or ""
    compiled = bool(ev.get("compiled"))
    return {
        "compile_error": stage in ("build", "load") or (not compiled and stage not in (None, "screen")),
        "memory_error": compiled and stage in ("run", "timing") and bool(_MEMORY_PATTERNS.search(err)),
        "numerics_error": stage == "correctness" or any(
            c.get("correct") is False and c.get("norm_err") is not None for c in ev.get("configs", [])),
    }


def _pr(tp: int, fp: int, fn: int, tn: int, unparsed: int = 0) -> dict:
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "n": tp + fp + fn + tn, "unparsed": unparsed,
            "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None,
            "accuracy": (tp + tn) / (tp + fp + fn + tn) if tp + fp + fn + tn else None}


def verifier_accuracy(records: list[dict]) -> dict:
    """Precision and recall of recorded predictions against recorded outcomes.

    ``records``: attempt records holding ``"verifier"`` (a prediction) and ``"eval"`` (the EvalResult dict); other
    records are ignored, and so are filtered candidates that were never evaluated (no outcome to compare with).
    Returns ``{check: {tp, fp, fn, tn, n, unparsed, precision, recall, accuracy}}`` for each check plus ``"any"``:
    the filter as a whole (any check predicted vs. the candidate not being correct). A verdict whose reply could
    not be parsed (``parsed`` False) predicted nothing: it is counted as ``unparsed`` and left out of the
    confusion counts, not scored as "no failure predicted". Empty when no record qualifies.
    """
    counts = {c: [0, 0, 0, 0] for c in (*CHECKS, "any")}
    n = unparsed = 0
    for r in records:
        pred, ev = r.get("verifier"), r.get("eval")
        if not pred or not ev or r.get("kind", "attempt") != "attempt":
            continue
        if ev.get("stage") == "none" and ev.get("error_stage") == "screen":
            continue  # rejected by the free screen: not what the verifier is for
        n += 1
        if pred.get("parsed") is False:
            unparsed += 1
            continue
        real = actual_outcome(ev)
        real["any"] = not ev.get("correct")
        guess = {c: bool(pred.get(c)) for c in CHECKS}
        guess["any"] = any(guess.values())
        for c in counts:
            idx = (0 if real[c] else 1) if guess[c] else (2 if real[c] else 3)
            counts[c][idx] += 1
    if not n:
        return {}
    return {c: _pr(*v, unparsed=unparsed) for c, v in counts.items()}


__all__ = ["CHECKS", "actual_outcome", "verifier_accuracy"]

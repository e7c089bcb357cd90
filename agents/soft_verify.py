"""Soft verifiers: an LLM reads a candidate and predicts whether it will fail to compile, fault on memory, or be
numerically wrong, so that doomed candidates are dropped before they cost a build and a run.

A prediction is ``{"compile_error": bool, "memory_error": bool, "numerics_error": bool, "reason": str}``. The
agent rejects a candidate when any check in ``reject_on`` is predicted; a fraction ``audit_rate`` of rejected
candidates is evaluated anyway, so that the verifier's precision can be measured, not assumed: ``kbench report``
scores the predictions a run recorded against the outcomes it recorded (``kbench_apps/verifier_metrics.py``).
"""

from __future__ import annotations

import json
import random
import re

CHECKS = ("compile_error", "memory_error", "numerics_error")

_SYSTEM = ("You are a meticulous reviewer of kernel code. You predict, without running it, whether a candidate "
           "will fail. Answer with one JSON object only.")


def verifier_messages(task_prompt: str, source: str, max_source_chars: int = 24_000) -> list[dict]:
    src = source if len(source) <= max_source_chars else source[:max_source_chars] + "\n# ... (truncated)"
    user = (f"{task_prompt}\n\nA candidate answer:\n```python\n{src.rstrip()}\n```\n\n"
            "Predict how this candidate will fare when it is built and checked against the reference on every "
            "configuration (including held-out shapes):\n"
            "- compile_error: the C++/CUDA source fails to compile or link, or the extension fails to load;\n"
            "- memory_error: it builds but crashes at run time (out-of-bounds access, null pointer, illegal "
            "address, out of memory);\n"
            "- numerics_error: it runs but gives wrong results on some configuration (wrong indexing, missed "
            "tail elements, wrong reduction, precision loss beyond tolerance).\n"
            "VERDICT-JSON: answer exactly one JSON object "
            '{"compile_error": true|false, "memory_error": true|false, "numerics_error": true|false, '
            '"reason": "<one sentence>"}')
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def parse_verdict(text: str) -> dict:
    """A prediction from a reply; unparseable replies predict nothing (``parsed`` False), so nothing is dropped."""
    out = {c: False for c in CHECKS}
    out.update(reason="", parsed=False)
    if not text:
        return out
    for m in re.finditer(r"\{[^{}]*\}", text, re.DOTALL):
        try:
            d = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(d, dict) and any(c in d for c in CHECKS):
            for c in CHECKS:
                out[c] = _truthy(d.get(c, False))
            out["reason"] = str(d.get("reason", ""))[:300]
            out["parsed"] = True
            return out
    for c in CHECKS:  # "compile_error: true" written without JSON
        m = re.search(rf"{c}\W+(true|false|yes|no)", text, re.IGNORECASE)
        if m:
            out[c] = m.group(1).lower() in ("true", "yes")
            out["parsed"] = True
    return out


def _truthy(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "yes", "1", "likely")
    if isinstance(v, (int, float)):
        return v >= 0.5 if isinstance(v, float) else bool(v)
    return bool(v)


class SoftVerifier:
    """Filters candidates with LLM predictions.

    Args:
        client: a ``kbench_agents.llm.LLMClient``.
        reject_on: the checks whose positive prediction rejects a candidate.
        audit_rate: fraction of rejected candidates evaluated anyway (to measure precision); 0 trusts it fully.
        temperature: sampling temperature of the verifier calls (0: greedy).
        seed: for the audit draw.
    """

    def __init__(self, client, reject_on=CHECKS, audit_rate: float = 0.1, temperature: float = 0.0,
                 max_tokens: int = 256, seed: int = 0):
        self.client = client
        self.reject_on = tuple(reject_on)
        self.audit_rate = audit_rate
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._rng = random.Random(seed)

    def predict_many(self, task_prompt: str, sources: list[str]) -> list[dict]:
        replies = self.client.complete_many([verifier_messages(task_prompt, s) for s in sources],
                                            temperature=self.temperature, max_tokens=self.max_tokens)
        return [parse_verdict(r or "") for r in replies]

    def predict(self, task_prompt: str, source: str) -> dict:
        return self.predict_many(task_prompt, [source])[0]

    def rejects(self, prediction: dict) -> bool:
        return any(prediction.get(c) for c in self.reject_on)

    def decide(self, prediction: dict) -> tuple[bool, bool]:
        """``(evaluate, audited)``: whether to evaluate the candidate, and whether that is an audit of a rejection."""
        if not self.rejects(prediction):
            return True, False
        if self._rng.random() < self.audit_rate:
            return True, True
        return False, False


__all__ = ["CHECKS", "SoftVerifier", "verifier_messages", "parse_verdict"]

"""The result of an evaluation an executor had to send again (its Ray actor died mid-evaluation): an
``EvalResult`` with two more fields, ``retries`` (how many times it was sent again) and ``retried_because`` (one
line per lost attempt: which actor, what Ray said). They travel in ``to_dict()``, so a server's /batch line, a
remote env's ``info["eval"]`` and its logs say the result was retried; ``EvalResult.from_dict`` ignores them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from kbench_env.pipeline.result import EvalResult


@dataclass
class RetriedResult(EvalResult):
    retries: int = 0
    retried_because: list = field(default_factory=list)

    @staticmethod
    def of(result: EvalResult, lost: list[str]) -> "RetriedResult":
        """``result``, marked as having been sent ``len(lost)`` more times for the reasons ``lost``."""
        return RetriedResult(**{f.name: getattr(result, f.name) for f in fields(EvalResult)}, retries=len(lost),
                             retried_because=list(lost))

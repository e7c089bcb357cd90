"""Rules: what a candidate's ``forward`` may run besides its own kernels (``Evaluator(rules=...)``).

- ``"strict"`` (the default): besides the candidate's own kernels, only glue (allocation, views, data movement;
  ``measure/ownership.ALLOWED_GLUE``) runs in ``forward``; any other PyTorch operator, called from Python or from the
  candidate's C++, is an integrity flag (``pytorch_compute_in_forward``); so is a build that calls PyTorch's or a
  math library's compute past the dispatcher, where no operator record shows it (``pytorch_compute_linked``,
  linked.py: ``at::cpu::addmm``, ``cblas_sgemm``), flagged from its symbols before it runs.
- ``"kernelbench"``: KernelBench's rule. PyTorch operators may run beside at least one kernel of the candidate's
  own, typically a fused custom kernel after a cuDNN/ATen convolution. What is dropped is those two flags; every
  other check stands, ``no_kernel_launched`` included.

"Runs" means what the forward audit sees on every configuration, inside the audited ``forward`` call itself: an
operator the candidate registered, a counted call into its compiled extension or fast-path kernel, or a GPU
kernel of its own (integrity.audit_flags). A kernel that is compiled but never called, or called at import or in
``__init__`` only, does not count. What the own kernel computes is not checked: one run on a 1-element tensor while
PyTorch does the rest is accepted, as KernelBench accepts it, and shows as a kernel coverage near 0
(``coverage.py``: the share of forward's device time, CPU time on the CPU, spent in the candidate's own kernels).
Coverage is reported under both rules, per configuration and as their mean, and a reward function can use it
(``EvalResult.kernel_coverage``).
"""

from __future__ import annotations

import re

from kbench_env.pipeline import integrity
from kbench_env.pipeline import linked as linked_mod
from kbench_env.pipeline.coverage import coverage
from kbench_env.protocol import integrity_flags
from kbench_env.protocol.integrity_flags import Flag

RULES = ("strict", "kernelbench")
DEFAULT = "strict"

#: The flags each rule set does not raise (the registry's ``dropped_under``).
_FLAG_DROPPED = {r: integrity_flags.dropped_under(r) for r in RULES}

#: The sentence of every backend's prompt rules that states the strict rule (backends/*.py ``rules()``).
_STRICT_SENTENCE = re.compile(r"Inside forward, calls into PyTorch compute operators.*?are fine\.", re.S)
_KERNELBENCH_SENTENCE = (
    "Rules: kernelbench. Inside forward, PyTorch operators (e.g. a cuDNN or ATen convolution or matrix product) "
    "may run beside your own kernels, and at least one of your own kernels must run in every call; the share of "
    "forward's time spent in your own kernels (kernel coverage) is reported with the result.")


def check_rules(rules) -> str:
    """``rules`` if it names a rule set; otherwise a ValueError that says which exist and what they mean."""
    if rules in RULES:
        return rules
    raise ValueError(f"unknown rules {rules!r}: use 'strict' (the default: only the candidate's own kernels and "
                     f"glue such as allocation, views and copies run in forward) or 'kernelbench' (PyTorch "
                     f"operators allowed beside at least one kernel of the candidate's own that runs)")


def audit_flags(rules: str, report: dict, config: str, torch_kernel_prefixes=(), own_names=None) -> list[Flag]:
    """The integrity flags of one configuration's forward audit under ``rules`` (``own_names``: as coverage's)."""
    dropped = _FLAG_DROPPED[rules]
    return [f for f in integrity.audit_flags(report, config, torch_kernel_prefixes, own_names)
            if f.kind not in dropped]


def linked_flags(rules: str, linked: list) -> list[Flag]:
    """The integrity flags of the candidate's builds' symbols under ``rules`` (linked.py; ``Worker.linked()``)."""
    dropped = _FLAG_DROPPED[rules]
    return [f for f in linked_mod.flags(linked) if f.kind not in dropped]


def judge_audit(rules: str, report: dict, config_result, result, torch_kernel_prefixes=(),
                own_names=None) -> list[Flag]:
    """One configuration's audit judged: its kernel coverage recorded on ``config_result`` and the evaluation's
    ``result`` (the mean over the configurations measured so far); returns its integrity flags under ``rules``.
    ``own_names``: the functions the candidate's libraries define (linked.own_kernel_names; coverage.own_kernel)."""
    report = report or {}
    config_result.kernel_coverage = coverage(report, torch_kernel_prefixes, own_names)
    measured = [c.kernel_coverage for c in result.configs if c.kernel_coverage is not None]
    result.kernel_coverage = round(sum(measured) / len(measured), 4) if measured else None
    return audit_flags(rules, report, config_result.name, torch_kernel_prefixes, own_names)


def prompt_rules(backend_rules: str, rules: str) -> str:
    """A backend's prompt rules (``Backend.rules()``) as they read under ``rules``."""
    if rules != "kernelbench":
        return backend_rules
    text, n = _STRICT_SENTENCE.subn(_KERNELBENCH_SENTENCE, backend_rules)
    return text if n else (backend_rules + " " + _KERNELBENCH_SENTENCE).strip()

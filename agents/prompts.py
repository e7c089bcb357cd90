"""The agents' own prompt text: translation retries, mutation, crossover and refinement messages.

The task part of every prompt is ``kbench_env.env.prompt.build_prompt`` (reference program, shown configurations,
hardware, backend rules); this module only wraps it with parents' code and their feedback. Feedback is the
policy's view of the EvalResult (``kbench_env.pipeline.feedback``: held-out configurations named only "held-out
configuration k of n", without shapes or times, as in the env's observation), condensed by ``summarize_feedback``
so that a long compiler log does not crowd out the code. Nothing here reads the held-out details of an EvalResult.
"""

from __future__ import annotations

import re

from kbench_env.env.prompt import SYSTEM_PROMPT, build_prompt
from kbench_env.pipeline.feedback import policy_config_name, policy_error, policy_feedback
from kbench_env.pipeline.result import EvalResult
from kbench_env.protocol.integrity_flags import kinds


def task_prompt(task, evaluator) -> str:
    return build_prompt(task, evaluator.backend, evaluator.device, rules=getattr(evaluator, "rules", "strict"),
                        format=getattr(evaluator, "format", "kernelbench"))


def _eval(ev) -> EvalResult:
    return ev if isinstance(ev, EvalResult) else EvalResult.from_dict(ev)


def summarize_error(ev, max_lines: int = 12, max_chars: int = 1500) -> str:
    """The error of a failed evaluation in a few lines: the stage, compiler ``error:`` lines first."""
    r = _eval(ev)
    if r.integrity_flags:
        return "rejected by integrity checks: " + "; ".join(kinds(r.integrity_flags))
    error = policy_error(r)
    if not error:
        return "no error"
    lines = [ln.rstrip() for ln in error.splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.search(r"\berror\b|Error|undefined reference|mismatch", ln)]
    picked = (errs or lines)[:max_lines]
    text = f"{r.error_stage or 'evaluation'} failed: " + "\n".join(picked)
    return text[:max_chars]


def summarize_feedback(ev, max_chars: int = 3000) -> str:
    """What the model sees about one evaluated candidate: the full table if correct, else the condensed error."""
    r = _eval(ev)
    if r.correct:
        return policy_feedback(r)[:max_chars]
    head = f"stage reached: {r.stage}; " + summarize_error(r)
    mism = [c for c in r.configs if c.correct is False]
    if mism:
        c = mism[0]
        where = policy_config_name(r, c) + ("" if c.held_out else f" (inputs {', '.join(c.inputs)})")
        figures = "" if c.held_out else f", norm err {c.norm_err}, max err {c.max_err}"  # held out: a verdict only
        head += f"\nfirst failing configuration: {where}{figures}"
    return head[:max_chars]


def translate_messages(prompt: str, failures: list[str] | None = None) -> list[dict]:
    """First kernel for the task; ``failures`` are summaries of previous failed attempts to avoid repeating."""
    user = prompt
    if failures:
        user += ("\n\nPrevious attempts failed. Summaries of their errors (fix these; do not repeat them):\n"
                 + "\n".join(f"- attempt {i + 1}: {f}" for i, f in enumerate(failures)))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _code(source: str) -> str:
    return f"```python\n{source.rstrip()}\n```"


def mutate_messages(prompt: str, parent_source: str, parent_feedback: str, correct: bool,
                    best_speedup: float | None = None) -> list[dict]:
    """Improve one parent: fix it if it fails, make it faster if it is correct."""
    if correct:
        goal = ("This candidate is correct. Make it faster: better parallelisation, vectorisation, memory access "
                "order, blocking or fusion. Keep it correct on every configuration, including held-out shapes.")
        if best_speedup:
            goal += f" The best speedup found so far is {best_speedup:.2f}x."
    else:
        goal = "This candidate fails. Fix the error below while keeping (or improving) its speed."
    user = (f"{prompt}\n\nA current candidate:\n{_code(parent_source)}\n\nIts evaluation:\n{parent_feedback}\n\n"
            f"{goal}\nAnswer with the complete new ModelNew source in one ```python code block.")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def crossover_messages(prompt: str, a_source: str, a_feedback: str, b_source: str, b_feedback: str) -> list[dict]:
    """Combine two parents' strengths into one child."""
    user = (f"{prompt}\n\nTwo candidates and their evaluations.\n\nCandidate A:\n{_code(a_source)}\n{a_feedback}\n\n"
            f"Candidate B:\n{_code(b_source)}\n{b_feedback}\n\nCombine the best ideas of A and B into one faster, "
            f"correct ModelNew. Answer with its complete source in one ```python code block.")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def refine_user_turn(observation: str, turn: int, turns: int) -> str:
    """The user turn after an attempt in a multi-turn (refinement) conversation."""
    return (f"Feedback on your attempt {turn} of {turns}:\n{observation}\n\nWrite an improved ModelNew: fix any "
            f"error, otherwise make it faster. Answer with the complete source in one ```python code block.")


__all__ = ["task_prompt", "summarize_error", "summarize_feedback", "translate_messages", "mutate_messages",
           "crossover_messages", "refine_user_turn", "SYSTEM_PROMPT"]

"""Prompt text for a task: built here and nowhere else (the env, agents and training all use it).

A prompt holds the reference program (without the KBENCH block, so held-out configurations stay hidden), the
shown input configurations, the target hardware, the action format with its rules and a one-shot example
(pipeline/formats.py: the backend's own for "kernelbench" and "triton", the fast path's for "fast").
"""

from __future__ import annotations

import ast

from kbench_env.machine.hardware import describe
from kbench_env.pipeline.formats import check_format, format_example, format_line, format_rules
from kbench_env.pipeline.rules import prompt_rules
from kbench_env.tasks.task import Task
from kbench_env.tasks import pysource

SYSTEM_PROMPT = ("You are an expert performance engineer who writes fast, correct kernels. You answer with one "
                 "Python code block that defines ModelNew.")


def reference_program(task: Task) -> str:
    """The task source with the KBENCH declaration removed."""
    tree = pysource.parse(task.source)
    lines = task.source.splitlines()
    drop: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KBENCH" for t in stmt.targets):
            drop.update(range(stmt.lineno - 1, stmt.end_lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + "\n"


def build_prompt(task: Task, backend, device: str, with_example: bool = True, rules: str = "strict",
                 format: str = "kernelbench") -> str:
    """The prompt of ``task`` for ``backend`` on ``device`` in the action ``format``; its rules as they read under
    ``rules``."""
    format = check_format(format)
    shown = task.shown_configs(device)
    cfg_lines = []
    for c in shown:
        try:
            shapes = ", ".join(task.input_shapes(c))
        except Exception:  # noqa: BLE001 - a prompt is still useful without shapes
            shapes = "?"
        sizes = ", ".join(f"{k}={v}" for k, v in c.sizes.items()) or "the file's own sizes"
        cfg_lines.append(f"- {c.name}: {sizes}; inputs {shapes}; dtype {c.dtype}")
    n_hidden = len(task.configs_for(device)) - len(shown)
    kind = ("It returns the gradients of the forward computation (with respect to the inputs and the parameters) "
            "for the given upstream gradient." if task.backward else "")
    parts = [
        f"Task {task.name}: {task.description}".rstrip(": "),
        f"Write a faster implementation of the PyTorch program below as a class ModelNew. {kind}".strip(),
        "",
        "Reference program:",
        "```python",
        reference_program(task).rstrip(),
        "```",
        "",
        "Input configurations it is tested on (shown):",
        *cfg_lines,
        f"plus {n_hidden} held-out configuration(s) with other shapes: do not specialise to the shapes above."
        if n_hidden else "",
        "",
        f"Target hardware: {describe(device)}",
        "",
        format_line(format),
        prompt_rules(format_rules(format, backend), rules),
        "Correctness is checked against the reference on fresh random inputs, elementwise and norm-wise; then both "
        "are timed and your reward grows with the speedup.",
    ]
    example = format_example(format, backend) if with_example else ""
    if example:
        parts += ["", example]
    parts += ["", "Answer with the complete Python source of ModelNew in one ```python code block."]
    return "\n".join(p for p in parts if p is not None)

"""The feedback text of an EvalResult, in two views.

- ``full_feedback``: the researcher's view (``EvalResult.feedback``, ``kbench eval``): every configuration as it
  is, held-out ones included, with its inputs and times.
- ``policy_feedback``: what a policy reads (the env's step observation, the agents' prompts). A held-out
  configuration appears only as "held-out configuration k of n" with a verdict: whether it passed and how it
  failed (wrong values, a crash, a timeout), never its name (a name may spell its sizes), input shapes, dtype,
  error figures (how far off its values are tells about its sizes), per-configuration time or speedup, nor an
  error message or integrity flag text written about it.

Both lay the configuration table out with columns sized to their content: no input shape is ever cut.
"""

from __future__ import annotations

import math

from kbench_env.machine.device import Device
from kbench_env.protocol.integrity_flags import make, parse

HIDDEN = "hidden"


def full_feedback(result) -> str:
    return _render(result, _HeldOut(result, reveal=True))


def policy_feedback(result) -> str:
    """The feedback a policy may read: held-out configurations hidden as the module docstring says."""
    held = _HeldOut(result, reveal=False)
    return held.scrub(_render(result, held))


class _HeldOut:
    """The held-out configurations of a result and how the policy's view names them."""

    def __init__(self, result, reveal: bool):
        self.reveal = reveal
        configs = [c for c in result.configs if c.held_out]
        total = getattr(result, "held_out_count", None)
        n = max(total or 0, len(configs))  # configs after a dead worker's last run are missing from the result
        self.label = {c.name: f"held-out configuration {k} of {n}" for k, c in enumerate(configs, 1)}
        self.configs = configs
        shown_shapes = {s for c in result.configs if not c.held_out for s in c.inputs}
        self.secrets = sorted({s for c in configs for s in c.inputs if s not in shown_shapes}
                              | {", ".join(c.inputs) for c in configs if c.inputs}
                              | {repr(c.name) for c in configs}, key=len, reverse=True)

    def about(self, text: str | None):
        """The held-out ConfigResult that ``text`` (an error or a flag) names, if any."""
        if self.reveal or not text:
            return None
        for c in self.configs:
            if repr(c.name) in text:
                return c
        return None

    def scrub(self, text: str) -> str:
        """A last guard over free text: any held-out shape or quoted name left becomes a placeholder."""
        for s in self.secrets:
            text = text.replace(s, f"<{HIDDEN}>")
        return text


def _render(result, held: _HeldOut) -> str:
    lines = [f"Task {result.task} | backend {result.backend} on {result.device} | stage reached: {result.stage}"]
    if result.integrity_flags:
        lines.append("REJECTED by integrity checks:")
        lines += [f"  - {_flag(f, held)}" for f in result.integrity_flags]
    if result.error:
        lines.append(f"ERROR during {result.error_stage or 'evaluation'}:")
        lines.append(_indent(_error(result, held)))
    if result.configs:
        lines.append("")
        lines += _table(result.configs, held)
    if result.kernel_coverage is not None:
        per = ", ".join(f"{_name(c, held)} {c.kernel_coverage:.0%}" for c in result.configs
                        if c.kernel_coverage is not None)
        where = "CPU" if Device.parse(result.device).is_cpu else "device"
        lines.append(f"Kernel coverage (share of forward's {where} time in your own kernels; rules "
                     f"{result.rules}): {result.kernel_coverage:.0%} ({per}).")
    if result.correct and result.speedup is not None:
        lines.append("")
        extra = f", {result.speedup_compile:.2f}x vs torch.compile" if result.speedup_compile else ""
        lines.append(f"Correct on all configurations. Speedup {_speedup(result.speedup, _ci(result), '.3f')} vs "
                     f"eager PyTorch{extra}.{_not_shown(result)}")
    lines.append(f"Reward: {result.reward:.3f}")
    return "\n".join(lines)


def _name(c, held: _HeldOut) -> str:
    if not c.held_out:
        return c.name
    return f"{c.name} (held out)" if held.reveal else held.label[c.name]


def _flag(flag: str, held: _HeldOut) -> str:
    c = held.about(flag)
    if c is None:
        return flag
    return str(make(parse(flag).kind, f"on {held.label[c.name]} (details are not shown for a held-out configuration)"))


def _error(result, held: _HeldOut) -> str:
    """The error text; about a held-out configuration, only which one and how it failed."""
    c = held.about(result.error)
    if c is None:
        return result.error
    if result.error_stage == "correctness":
        how = "wrong values"  # a verdict only: error figures would tell about the held-out sizes
    elif "timed out" in result.error.lower():
        how = "timed out" + (" while being timed" if result.error_stage == "timing" else "")
    elif result.error_stage == "timing":
        how = "crashed while being timed"
    else:
        how = "crashed"
    return f"{held.label[c.name]}: {how} (its message is not shown for a held-out configuration)"


def _table(configs, held: _HeldOut) -> list[str]:
    """The configuration table, every column as wide as its widest cell."""
    head = ("configuration", "inputs", "correct", "norm err", "yours ms", "ref ms", "speedup")
    left = (True, True, True, False, False, False, False)
    rows = []
    for c in configs:
        ok = "-" if c.correct is None else ("yes" if c.correct else "NO")
        if c.held_out and not held.reveal:
            rows.append((_name(c, held), HIDDEN, ok, HIDDEN, HIDDEN, HIDDEN, HIDDEN))
            continue
        rows.append((_name(c, held), ", ".join(c.inputs), ok, _f(c.norm_err, ".2e"),
                     _ms(c.candidate_ms, c.candidate_spread_ms), _ms(c.reference_ms, None),
                     _speedup(c.speedup, _ci(c), ".2f")))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells) -> str:
        return "  ".join(cell.ljust(w) if lj else cell.rjust(w) for cell, w, lj in zip(cells, widths, left)).rstrip()

    return [line(head), *(line(r) for r in rows)]


def _ci(obj):
    """A result's or configuration's speedup interval [lo, hi] (the CPU's paired timing), or None."""
    ci = getattr(obj, "speedup_ci", None)
    return ci if ci and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci) else None


def _speedup(v, ci, fmt: str) -> str:
    """``1.31x (1.24-1.38)``: the speedup and, where measured, its 95 % interval."""
    text = _f(v, fmt, "x")
    return text if ci is None or v is None else f"{text} ({ci[0]:.2f}-{ci[1]:.2f})"


def _not_shown(result) -> str:
    """Why a speedup above 1 is paid as parity (pipeline/reward.py), if it is."""
    ci = _ci(result)
    if ci is None or not (result.speedup or 0) > 1.0 or ci[0] > 1.0 or getattr(result, "baseline", "") == "compile":
        return ""
    return " Not shown faster: the 95 % interval reaches down to 1, so the reward pays it as parity."


def _indent(text: str, pad: str = "  ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def _f(v, fmt: str, suffix: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, str):  # a non-finite float as a JSON record writes it ("inf", "nan")
        return v
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, fmt) + suffix


def _ms(v, spread) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if spread is None else f"{v:.3f}±{spread / 2:.3f}"


def policy_error(result) -> str | None:
    """The result's error as a policy may read it (``policy_feedback``'s error paragraph), or None."""
    if not result.error:
        return None
    held = _HeldOut(result, reveal=False)
    return held.scrub(_error(result, held))


def policy_config_name(result, config) -> str:
    """How a policy's text names one of the result's configurations."""
    return _name(config, _HeldOut(result, reveal=False))

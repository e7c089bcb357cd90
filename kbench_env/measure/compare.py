"""Correctness: compare a candidate's output with the reference's.

The trusted side compares a candidate's output with the reference's (pipeline/check.py; the timed calls' outputs
it reads, pipeline/timing.py); the worker compares forward's second run with its first (nondeterminism) by the
same rules, and flattens outputs to lay them out for the trusted side to read. Both sides import this module; it
imports neither.

This module owns the tolerance rules and the error figures. The reference output is computed in higher precision
where the configuration's dtype would otherwise let the reference's own rounding decide (float64 for float32
configurations, float32 for half precision: tasks/task.py, ``REFERENCE_DTYPE``). Errors are scale-free, so that
degenerate outputs cannot pass on an absolute tolerance:

- ``norm``: ``||cand - ref||_2 / ||ref||_2`` (norm-wise relative error over the whole output);
- ``max``: ``max (|cand - ref| - elem * |ref|)+ / rms(ref)`` (the worst element, relative to the output's typical
  magnitude), where ``elem`` is a few rounding steps of the dtype: an element's error within its own size's rounding
  does not count. Without it a correctly rounded output fails where its largest elements are far above its rms (a
  bfloat16 softmax over 50k columns: its largest probabilities ~80x the rms, so one bfloat16 rounding there is
  already ~0.16 of the rms against a tolerance of 0.2).
  ``elem`` is far below the ``norm`` tolerance of the same dtype, so no output that errs everywhere by it passes.

An output passes when both are within the tolerance of its dtype. Integer and boolean outputs must match exactly.
Tasks may override the tolerances per dtype (``KBENCH["tolerance"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

#: Default tolerances per output dtype. float32: computing in TF32 or half precision gives norm errors of
#: ~3e-4 to 1e-3 and fails; an honest float32 kernel (any summation order) stays near 1e-6.
#: ``elem``: four half-steps of rounding for the half precisions (their results see few roundings before the last),
#: 64 for float32 and float64 (a longer chain of roundings, each a half-step of the dtype).
DEFAULT_TOLERANCES = {
    "float64": {"norm": 1e-9, "max": 1e-7, "elem": 2.0 ** -47},
    "float32": {"norm": 5e-5, "max": 2e-3, "elem": 2.0 ** -18},
    "float16": {"norm": 4e-3, "max": 5e-2, "elem": 2.0 ** -9},
    "bfloat16": {"norm": 2e-2, "max": 2e-1, "elem": 2.0 ** -6},
}

@dataclass
class Mismatch:
    """Why an output failed: a one-line human message and the error figures."""

    message: str
    norm_err: float | None = None
    max_err: float | None = None
    index: tuple | None = None


def tolerance_for(dtype: torch.dtype, overrides: dict | None = None) -> dict:
    key = str(dtype).replace("torch.", "")
    tol = dict(DEFAULT_TOLERANCES.get(key, DEFAULT_TOLERANCES["float32"]))
    if overrides and key in overrides:
        tol.update(overrides[key])
    return tol


def flatten_outputs(out) -> list:
    """An output as a list of leaves (tensors or Python numbers); tuples and lists are flattened in order."""
    if isinstance(out, (tuple, list)):
        leaves = []
        for o in out:
            leaves.extend(flatten_outputs(o))
        return leaves
    return [out]


def _unravel(flat: int, shape: tuple) -> tuple:
    """The index of element ``flat`` of a C-contiguous tensor of ``shape`` (torch.unravel_index costs ~0.4 s of
    imports on its first call in a process, and every worker is a fresh process)."""
    idx = []
    for dim in reversed(shape):
        flat, i = divmod(flat, max(dim, 1))
        idx.append(i)
    return tuple(reversed(idx))


def _excess(diff: torch.Tensor, r: torch.Tensor, elem: float) -> torch.Tensor:
    """Each element's error past ``elem`` of its reference's magnitude, never below 0 (``diff`` itself where
    ``elem`` is 0): what the ``max`` figure reads."""
    if not elem:
        return diff
    return r.abs().mul_(-elem).add_(diff).clamp_min_(0.0)  # one tensor more than ``diff``, not two


def error_figures(cand: torch.Tensor, ref: torch.Tensor, elem: float = 0.0) -> tuple[float, float, tuple]:
    """(norm-wise relative error, max error past ``elem`` of the element relative to rms, index of the worst
    element: the one with the largest error past ``elem``, or the largest error where none is past it).

    The difference is taken in float64 without a float64 copy of the candidate's output (the subtraction converts
    each element exactly as a copy would), and each figure comes from one pass: a NaN shows in the difference's
    norm, and the largest difference is read at the index ``argmax`` finds."""
    r = ref.detach().to(torch.float64)  # on the reference's device (a GPU's float64 is fast enough)
    if r.numel() == 0:
        return 0.0, 0.0, ()
    diff = torch.sub(cand.detach().to(r.device), r).abs_()
    diff_norm = diff.norm().item()
    if math.isnan(diff_norm):
        idx = tuple(int(i) for i in torch.nonzero(torch.isnan(diff))[0].tolist())
        return math.inf, math.inf, idx
    excess = _excess(diff, r, elem)
    flat = int(torch.argmax(excess).item())
    worst = excess.reshape(-1)[flat].item()
    if worst == 0.0:
        flat = int(torch.argmax(diff).item())
    return _relative(diff_norm, r.norm().item(), worst, r.numel(), _unravel(flat, tuple(diff.shape)))


def _relative(diff_norm: float, ref_norm: float, worst: float, n: int, idx: tuple) -> tuple[float, float, tuple]:
    """The error figures from the difference's norm, the largest excess and the reference's norm."""
    if ref_norm == 0.0:  # an all-zero reference: only exact zeros pass
        err = math.inf if worst > 0 else 0.0
        return err, err, idx
    tiny = 1e-30
    return diff_norm / max(ref_norm, tiny), worst / max(ref_norm / math.sqrt(n), tiny), idx


def _finite_figures(cand: torch.Tensor, ref: torch.Tensor, elem: float = 0.0) -> tuple[float, float, tuple] | None:
    """``error_figures(cand, ref, elem)`` where both are finite everywhere, else None (``compare_outputs`` then
    looks where the non-finite values are), from one pass read back at once: on a GPU each figure read on its own
    is a synchronisation, six of them a comparison, each waiting for whatever this process's other threads queued
    on the device."""
    if ref.numel() == 0:
        return None
    r = ref.detach().to(torch.float64)
    diff = torch.sub(cand, r).abs_()
    excess = _excess(diff, r, elem)
    flat = torch.argmax(excess).reshape(1)
    both_finite = torch.isfinite(cand).all() & torch.isfinite(ref).all()
    finite, diff_norm, ref_norm, at, worst, at_diff = torch.cat([
        both_finite.to(torch.float64).reshape(1), diff.norm().reshape(1), r.norm().reshape(1),
        flat.to(torch.float64), excess.reshape(-1).gather(0, flat),
        torch.argmax(diff).reshape(1).to(torch.float64)]).tolist()
    if not finite:
        return None
    at = at if worst > 0.0 else at_diff
    return _relative(diff_norm, ref_norm, worst, r.numel(), _unravel(int(at), tuple(diff.shape)))


def compare_outputs(cand, ref, config_dtype: torch.dtype, overrides: dict | None = None) -> tuple[Mismatch | None, dict]:
    """Compare a candidate output with a reference output. Returns ``(mismatch or None, figures)``.

    ``figures`` holds the worst ``norm_err`` and ``max_err`` over the floating-point output leaves compared
    (None where none was: a structural mismatch such as a wrong shape).
    """
    cl, rl = flatten_outputs(cand), flatten_outputs(ref)
    figures = {"norm_err": None, "max_err": None}
    if len(cl) != len(rl):
        return Mismatch(f"returned {len(cl)} output(s), expected {len(rl)}"), figures
    for i, (c, r) in enumerate(zip(cl, rl)):
        where = f"output {i}" if len(rl) > 1 else "output"
        if isinstance(r, torch.Tensor):
            if not isinstance(c, torch.Tensor):
                return Mismatch(f"{where} is {type(c).__name__}, expected a tensor of shape {list(r.shape)}"), figures
            if tuple(c.shape) != tuple(r.shape):
                return Mismatch(f"{where} has shape {list(c.shape)}, expected {list(r.shape)}"), figures
            expected_dtype = config_dtype if r.is_floating_point() else r.dtype
            if r.is_floating_point() and not c.is_floating_point():
                return Mismatch(f"{where} has dtype {c.dtype}, expected a floating dtype ({expected_dtype})"), figures
            if not r.is_floating_point():
                if c.dtype != r.dtype and c.is_floating_point():
                    return Mismatch(f"{where} has dtype {c.dtype}, expected {r.dtype}"), figures
                bad = c.cpu().to(r.dtype) != r.cpu()
                if bad.any():
                    idx = tuple(int(v) for v in torch.nonzero(bad)[0].tolist())
                    n_bad = int(bad.sum())
                    return Mismatch(
                        f"{where}: {n_bad} of {r.numel()} integer elements differ; first at index {list(idx)}: "
                        f"got {c.cpu()[idx].item()}, expected {r.cpu()[idx].item()}",
                        index=idx,
                    ), figures
                continue
            if c.dtype != expected_dtype and c.dtype != r.dtype:
                return Mismatch(f"{where} has dtype {c.dtype}, expected {expected_dtype}"), figures
            tol = tolerance_for(config_dtype, overrides)
            cd = c.detach().to(r.device)  # everything on the reference's device: no host copies of GPU outputs
            got = _finite_figures(cd, r, tol["elem"])  # (the common case, finite everywhere: one read of the device)
            all_finite = got is not None
            if got is None:  # a non-finite value somewhere: where, and whether the reference has it too
                ref_finite, cand_finite = torch.isfinite(r), torch.isfinite(cd)
                if not torch.equal(cand_finite, ref_finite):
                    idx = tuple(int(v) for v in torch.nonzero(cand_finite != ref_finite)[0].tolist())
                    return Mismatch(
                        f"{where}: non-finite values where the reference is finite (or the reverse), first at "
                        f"index {list(idx)}: got {cd[idx].item()}, expected {r[idx].item()}",
                        norm_err=math.inf, max_err=math.inf, index=idx,
                    ), figures
                all_finite = bool(ref_finite.all())
                got = (error_figures(cd, r, tol["elem"]) if all_finite
                       else error_figures(cd[ref_finite], r[ref_finite], tol["elem"]))
            norm_err, max_err, idx = got
            figures["norm_err"] = max(figures["norm_err"] or 0.0, norm_err)
            figures["max_err"] = max(figures["max_err"] or 0.0, max_err)
            if norm_err > tol["norm"] or max_err > tol["max"]:
                detail = ""
                if idx and all_finite:
                    detail = f"; worst element at index {list(idx)}: got {cd[idx].item():.6g}, expected {r[idx].item():.6g}"
                return Mismatch(
                    f"{where}: norm-wise relative error {norm_err:.3g} (tolerance {tol['norm']:.1g}), "
                    f"max error / rms {max_err:.3g} (tolerance {tol['max']:.1g}; past {tol['elem']:.2g} of each "
                    f"element's own magnitude){detail}",
                    norm_err=norm_err, max_err=max_err, index=idx or None,
                ), figures
        else:
            if isinstance(c, torch.Tensor) and c.numel() == 1:
                c = c.item()
            if isinstance(r, (int, float)) and isinstance(c, (int, float)):
                if isinstance(r, float) and not math.isclose(c, r, rel_tol=1e-5, abs_tol=1e-8):
                    return Mismatch(f"{where} is {c!r}, expected {r!r}"), figures
                if isinstance(r, int) and c != r:
                    return Mismatch(f"{where} is {c!r}, expected {r!r}"), figures
            elif c != r:
                return Mismatch(f"{where} is {c!r}, expected {r!r}"), figures
    return None, figures

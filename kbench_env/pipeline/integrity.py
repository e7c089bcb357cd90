"""Integrity checks on the trusted side: the flags a worker's forward audit report gives rise to, and what the
roofline floor is made of (the output's bytes, the reference's FLOPs). The timed calls' outputs are read and
checked by the trusted side itself (blocks.py, gpu_blocks.py).

The audit itself runs in the worker (worker/audit.py, ``ForwardAudit``), which holds nothing the candidate could
use: no reference output. This side turns its report into flags by the rules (rules.py): PyTorch compute in
forward (what is glue and what compute: measure/ownership.py, ``ALLOWED_GLUE``), a blinded audit, no kernel of the
candidate's own.
"""

from __future__ import annotations

import torch

from kbench_env.measure.compare import flatten_outputs
from kbench_env.pipeline.coverage import own_device_kernels
from kbench_env.protocol.integrity_flags import Flag, make


def audit_flags(report: dict, config: str, torch_kernel_prefixes=(), own_names=None) -> list[Flag]:
    """Integrity flags from a ForwardAudit report (parent side)."""
    flags = []
    if report.get("forbidden_ops"):
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(report["forbidden_ops"].items())[:6])
        flags.append(make("pytorch_compute_in_forward", f"forward ran PyTorch compute operators ({ops}) on "
                          f"configuration {config!r}; only allocation, views and data movement are allowed besides "
                          f"your kernels"))
    flags += blinded_flags(report, config)
    own_gpu = own_device_kernels(report, torch_kernel_prefixes, own_names)
    if not report.get("own_ops") and not report.get("extension_calls") and not own_gpu:
        flags.append(make("no_kernel_launched", f"none of the candidate's own kernels ran in forward on "
                          f"configuration {config!r} (a compiled kernel must do the work)"))
    return flags


def blinded_flags(report: dict, config: str) -> list[Flag]:
    """The ``audit_blinded`` flag of a ForwardAudit report, if it has reasons (worker/audit_threads.py finds them)."""
    reasons = report.get("blinded") or []
    if not reasons:
        return []
    return [make("audit_blinded", f"the forward audit of configuration {config!r} was blinded: "
                                  f"{'; '.join(reasons[:4])}")]


# ---------------------------------------------------------------------- roofline floor


def output_bytes(out) -> int:
    return sum(t.numel() * t.element_size() for t in flatten_outputs(out) if isinstance(t, torch.Tensor))


def count_flops(model, inputs) -> int:
    """FLOPs of the matrix products and convolutions the reference runs (torch's FlopCounterMode)."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            model(*inputs)
        return int(fc.get_total_flops())
    except Exception:  # noqa: BLE001 - a floor we cannot compute is no floor
        return 0

"""The plausibility stage, after a clean timing: a candidate time under half the device's floor (the roofline:
output bytes at the measured bandwidth, matrix-product FLOPs at the measured rate) is flagged, after a fresh
calibration confirms the floor; a speedup above ``reverify_above`` is re-timed by wall clock from this process
and flagged when the two disagree."""

from __future__ import annotations

from kbench_env.device import Device
from kbench_env.pipeline import integrity
from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.reports import flag
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.timing import wallclock
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.task import DTYPES, Config, Task

#: Outputs smaller than this never get a bandwidth floor (they can live in cache).
ROOFLINE_MIN_BYTES = 256 << 20


def plausibility(ev, task: Task, configs: list[Config], prepared: dict, seed: int, worker: Worker,
                 result: EvalResult) -> None:
    """Roofline floor on every configuration; independent re-timing of implausibly large speedups."""
    base: Baselines = ev.baselines
    if ev.roofline and base.calibration:
        below = below_floor(base, task, configs, prepared, result)
        if below:
            # The calibration is one measurement, possibly taken while the machine was busy (a calibration under
            # load puts the floor of honest matrix products too high): a time under the floor is re-verified
            # against a fresh calibration before it is flagged.
            base.recalibrate(task, configs)
            below = below_floor(base, task, configs, prepared, result)
        for cfg, cr, floor_ms, why in below:
            flag(result, f"below_roofline: {cr.candidate_ms:.4f} ms on configuration {cfg.name!r} is "
                         f"under half the device's floor of {floor_ms:.4f} ms ({why})")
    # (On the CPU the times are this side's clock already, blocks.py: there is nothing to re-verify.)
    if (result.speedup is not None and result.speedup > ev.reverify_above and not result.integrity_flags
            and not Device.parse(ev.device).is_cpu):
        i = max(range(len(configs)), key=lambda k: result.configs[k].speedup or 0)
        cfg, cr = configs[i], result.configs[i]
        _, _, _, inputs = prepared[cfg.name]
        wall_ms = wallclock(worker, cfg.name, inputs, seed, ev.noise, ev.limits.time_timeout)
        ref_wall = base.wallclock(task, cfg, prepared, seed)
        wall_speedup = ref_wall / max(wall_ms, 1e-9)
        if wall_speedup < 0.5 * cr.speedup:
            flag(result, f"speedup_not_reverified: {cr.speedup:.1f}x on configuration {cfg.name!r} was "
                         f"re-timed by wall clock from the trusted side at {wall_speedup:.1f}x")


def below_floor(base: Baselines, task: Task, configs: list[Config], prepared: dict, result: EvalResult) -> list:
    """The configurations whose candidate time is under half the device's floor: (config, its result, floor
    in ms, how the floor was made)."""
    out = []
    for cfg, cr in zip(configs, result.configs):
        floor_ms, why = floor(base, task, cfg, prepared)
        if floor_ms > 0.02 and cr.candidate_ms < 0.5 * floor_ms:
            out.append((cfg, cr, floor_ms, why))
    return out


def floor(base: Baselines, task: Task, cfg: Config, prepared: dict) -> tuple[float, str]:
    """The least time the configuration can take on this device (cached): output bytes at the measured copy
    bandwidth, and the reference's matrix-product FLOPs at the measured matmul rate."""
    key = base.key(task, cfg)
    if key not in base.floors:
        cal = base.calibration
        mod, init_inputs, init_seed, inputs = prepared[cfg.name]
        model = task.make_model(mod, init_inputs, init_seed, DTYPES[cfg.dtype], base.device)
        out = task.reference_output(mod, init_inputs, inputs, cfg, init_seed, base.device, upcast=False)
        out_bytes = integrity.output_bytes(out)
        flops = integrity.count_flops(model, inputs) if not task.backward else 0
        rate = cal["flops"].get(cfg.dtype) or cal["flops"].get("float32")
        # Outputs that fit in cache are written faster than memory bandwidth: the byte floor applies only to
        # outputs well past any last-level cache.
        byte_floor = out_bytes / cal["bandwidth"] if out_bytes >= ROOFLINE_MIN_BYTES else 0.0
        floor_ms = 1e3 * max(byte_floor, flops / rate if rate else 0.0)
        why = f"{out_bytes} output bytes at {cal['bandwidth'] / 1e9:.1f} GB/s, {flops:.3g} FLOP"
        base.floors[key] = (floor_ms, why)
    return base.floors[key]

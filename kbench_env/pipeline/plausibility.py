"""The plausibility stage, after a clean timing: a candidate time under half the device's floor (the roofline:
output bytes at the measured bandwidth, matrix-product FLOPs at the measured rate) is flagged, after a fresh
calibration confirms the floor; a speedup above ``reverify_above`` is re-timed by wall clock from this process
and flagged when the two disagree.

The byte floor holds for an output of any size, wherever the candidate's timed block writes at least the
calibration's working set (``FOOTPRINT_BYTES``). Every call of a timed block keeps its own output until the block
is checked (blocks.py, gpu_blocks.py), so a block of k calls writes k outputs; past the calibration's working set,
those writes cannot go faster than the copy the bandwidth was measured on (a smaller working set only goes
faster, and its bandwidth would be the larger), so a call cannot take less than its output bytes at that
bandwidth. A block that writes less may keep its outputs in a cache and gets no byte floor: a small output
written by a slow call can be an honest cache hit, while a fast call (a cached output returned) makes the blocks
long in calls, and then its floor applies. The calibration counts read and written bytes, so a pure write stream
is held to half its copy time, and a time is flagged only under half the floor."""

from __future__ import annotations

from kbench_env.backends.base import CALIBRATION_COPY_BYTES
from kbench_env.machine.device import Device
from kbench_env.pipeline import integrity
from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.context import StageContext
from kbench_env.pipeline.reports import flag
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.timing import wallclock
from kbench_env.protocol.integrity_flags import make
from kbench_env.tasks.task import DTYPES, Config, Task

#: A timed block whose outputs take at least this many bytes gets the byte floor: the calibration's working set
#: (a copy of CALIBRATION_COPY_BYTES, read and written).
FOOTPRINT_BYTES = 2 * CALIBRATION_COPY_BYTES
#: Fresh calibrations at most before a time under the floor is flagged: on a loaded machine two calibrations back
#: to back can differ several times over, and an honest write timed at a quiet moment came near half the floor of
#: one taken at a busy moment: one recalibration may not suffice.
RECALIBRATIONS = 3


def plausibility(ctx: StageContext) -> None:
    """Roofline floor on every configuration; independent re-timing of implausibly large speedups."""
    base, task, configs, prepared, result = ctx.baselines, ctx.task, ctx.configs, ctx.prepared, ctx.result
    if ctx.config.integrity.roofline and base.calibration:
        below = below_floor(base, task, configs, prepared, result)
        for _ in range(RECALIBRATIONS if below else 0):
            # The calibration is one measurement, possibly taken while the machine was busy (a calibration under
            # load puts the floor of honest kernels too high): a time under the floor is re-verified against
            # fresh calibrations (the best of each figure is kept) before it is flagged.
            base.recalibrate(task, configs)
            below = below_floor(base, task, configs, prepared, result)
            if not below:
                break
        for cfg, cr, floor_ms, why in below:
            flag(result, make("below_roofline", f"{cr.candidate_ms:.4f} ms on configuration {cfg.name!r} is under "
                                                f"half the device's floor of {floor_ms:.4f} ms ({why})"))
    # (On the CPU the times are this side's clock already, blocks.py: there is nothing to re-verify.)
    if (result.speedup is not None and result.speedup > ctx.config.integrity.reverify_above
            and not result.integrity_flags and not Device.parse(ctx.device).is_cpu):
        i = max(range(len(configs)), key=lambda k: result.configs[k].speedup or 0)
        cfg, cr = configs[i], result.configs[i]
        wall_ms = wallclock(ctx.worker, cfg.name, prepared[cfg.name].inputs, ctx.seed, ctx.config.timing.noise,
                            ctx.limits.time_timeout)
        ref_wall = base.wallclock(task, cfg, prepared, ctx.seed)
        wall_speedup = ref_wall / max(wall_ms, 1e-9)
        if wall_speedup < 0.5 * cr.speedup:
            flag(result, make("speedup_not_reverified", f"{cr.speedup:.1f}x on configuration {cfg.name!r} was "
                                                        f"re-timed by wall clock from the trusted side at "
                                                        f"{wall_speedup:.1f}x"))


def below_floor(base: Baselines, task: Task, configs: list[Config], prepared: dict, result: EvalResult) -> list:
    """The configurations whose candidate time is under half the device's floor: (config, its result, floor
    in ms, how the floor was made)."""
    out = []
    for cfg, cr in zip(configs, result.configs):
        floor_ms, why = floor(base, task, cfg, prepared, cr.timed_block_calls or 1)
        # (no lower limit on the floor: a floor is never above an honest time, however small: module docstring)
        if cr.candidate_ms < 0.5 * floor_ms:
            out.append((cfg, cr, floor_ms, why))
    return out


def floor(base: Baselines, task: Task, cfg: Config, prepared: dict, block_calls: int = 1) -> tuple[float, str]:
    """The least time the configuration can take on this device in timed blocks of ``block_calls`` calls: output
    bytes at the measured copy bandwidth (where the block's outputs reach ``FOOTPRINT_BYTES``: module docstring),
    and the reference's matrix-product FLOPs at the measured matmul rate."""
    out_bytes, flops = figures(base, task, cfg, prepared)
    cal = base.calibration
    rate = cal["flops"].get(cfg.dtype) or cal["flops"].get("float32")
    footprint = max(1, block_calls) * out_bytes
    byte_floor = out_bytes / cal["bandwidth"] if footprint >= FOOTPRINT_BYTES else 0.0
    floor_ms = 1e3 * max(byte_floor, flops / rate if rate else 0.0)
    kept = (f"{block_calls} calls a block write {footprint} bytes" if byte_floor else
            f"no byte floor: {block_calls} calls a block write {footprint} bytes, under {FOOTPRINT_BYTES}")
    why = f"{out_bytes} output bytes at {cal['bandwidth'] / 1e9:.1f} GB/s ({kept}), {flops:.3g} FLOP"
    return floor_ms, why


def figures(base: Baselines, task: Task, cfg: Config, prepared: dict) -> tuple[int, int]:
    """The configuration's output bytes and the reference's matrix-product FLOPs (cached)."""
    key = base.key(task, cfg)
    if key not in base.floors:
        p = prepared[cfg.name]
        model = task.make_model(p.module, p.init_inputs, p.init_seed, DTYPES[cfg.dtype], base.device)
        out = task.reference_output(p.module, p.init_inputs, p.inputs, cfg, p.init_seed, base.device, upcast=False)
        flops = integrity.count_flops(model, p.inputs) if not task.backward else 0
        base.floors[key] = (integrity.output_bytes(out), flops)
    return base.floors[key]

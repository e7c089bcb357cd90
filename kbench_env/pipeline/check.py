"""The correctness stage: run every configuration in the worker on fresh random inputs and compare its output
with the reference's on this side; the worker's runtime audit of what forward executed (rules.judge_audit), its
reports of modified inputs, nondeterminism and changed precision flags become integrity flags."""

from __future__ import annotations

import torch

from kbench_env.machine.device import Device
from kbench_env.pipeline import integrity
from kbench_env.pipeline import rules as rules_mod
from kbench_env.measure.compare import compare_outputs
from kbench_env.pipeline.context import Prepared, StageContext
from kbench_env.pipeline.coverage import TORCH_KERNEL_PREFIXES
from kbench_env.pipeline.gpu_run import input_views, read_output
from kbench_env.pipeline.linked import own_kernel_names
from kbench_env.pipeline.nearby import close_miss, matches_nearby
from kbench_env.pipeline.reports import flag, note_reports
from kbench_env.pipeline.result import ConfigResult, EvalResult, add_phase, config_label, phase
from kbench_env.protocol import messages as msg
from kbench_env.protocol.cuda_ipc import IpcError, Mappings
from kbench_env.protocol.integrity_flags import make
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.task import DTYPES, Config, Task, describe_value


#: Outputs of a correctness run on a GPU from this many bytes are read from the worker's memory (CUDA's
#: inter-process handles) rather than copied to the host and sent through the pipe: a GPU-sized output's copy,
#: framing and pipe are a large part of a check, which holds the device (shared) meanwhile, so a waiting timing
#: waits for them. Below it, opening the worker's allocation costs more than the copy.
SHARED_OUTPUT_BYTES = 4 << 20
#: Inputs of a correctness run on a GPU, together this many bytes and more, are written into the worker's memory
#: the same way rather than sent through the pipe.
SHARED_INPUT_BYTES = 4 << 20


def check(ctx: StageContext) -> None:
    """Run every configuration in the worker and compare on this side; each configuration's reference side goes
    into ``ctx.prepared``.

    Pipelined: configuration k+1's run goes to the worker as soon as configuration k's output is back, and k's
    output is judged while the worker runs k+1; the reference output of k and the inputs of k+1 are made while
    the worker runs k. Judgements, and so the first failing configuration's message, follow the configurations'
    order, as when each waited for the one before."""
    task, configs, worker, result, prepared = ctx.task, ctx.configs, ctx.worker, ctx.result, ctx.prepared
    verdict = {"all_ok": True, "ran_any": False}
    early: dict = {}  # configuration -> its run's reply, where it came before the inputs were written (an ERROR)
    with phase(result, "check_inputs"):
        nxt = instantiate(task, configs[0], ctx.seed, 0, prepared, ctx.device)
    send_run(task, nxt, prepared, worker, result, early, ctx.limits.run_timeout)
    for i in range(len(configs)):
        cur, nxt = nxt, None
        cfg = cur[0]
        p = prepared[cfg.name]
        with phase(result, "reference_outputs"):  # while the worker runs the candidate (nothing is timed)
            ref = task.reference_output(p.module, p.init_inputs, p.inputs, cfg, p.init_seed, ctx.device)
        if i + 1 < len(configs):
            with phase(result, "check_inputs"):
                nxt = instantiate(task, configs[i + 1], ctx.seed, i + 1, prepared, ctx.device)
        with phase(result, "check_recv"):
            reply = early.pop(cfg.name, None) or worker.recv(
                ctx.limits.run_timeout, f"forward on configuration {cfg.name!r}", expect_bytes=integrity.output_bytes(ref))
            reply = _shared_output(reply, ctx.device)  # read before the next run: the worker then lets it go
        stepping_aside = nxt is not None and ctx.hold.timing_waits()
        try:
            if nxt is not None and not stepping_aside:
                send_run(task, nxt, prepared, worker, result, early, ctx.limits.run_timeout)
        finally:  # judged even when the next send finds the worker gone
            with phase(result, "check_judge"):
                judge(task, cur, reply, ref, result, verdict, ctx.config.integrity.rules,
                      own_kernel_names(worker.linked()), nearby=_nearby(ctx, cfg))
        if stepping_aside:
            _step_aside(ctx)
            send_run(task, nxt, prepared, worker, result, early, ctx.limits.run_timeout)
    result.stage = "ran" if verdict["ran_any"] else "built"
    if verdict["all_ok"] and not result.integrity_flags:
        result.correct, result.stage = True, "correct"


def _shared_output(reply: tuple, device: str) -> tuple:
    """A reply whose output the worker left in its GPU memory (``ipc``: worker/loop._exported) with the output
    read from there into this side's memory, as if it had come through the pipe; one whose output cannot be read
    (a range outside its allocations, a malformed layout) fails the configuration like a wrong output."""
    header, payload = reply
    if header.get("type") != msg.OUTPUT or header.get("ipc") is None:
        return reply
    try:
        return header, {"out": read_output(header["ipc"], device)}
    except (IpcError, RuntimeError, TypeError, ValueError) as exc:
        return {**header, "type": msg.ERROR, "stage": "run",
                "message": f"its output could not be read from its memory ({type(exc).__name__}: {exc})"}, None


def _step_aside(ctx: StageContext) -> None:
    """Let the waiting timing have the device (nothing of this candidate's is on it: its last run is back and
    judged), then hold it shared again: the check goes on with its next configuration."""
    if Device.parse(ctx.device).is_cuda:
        torch.cuda.synchronize(ctx.device)  # this side's own work for the check (the next inputs) is done
    ctx.hold.step_aside(ctx.result)


def instantiate(task: Task, cfg: Config, seed: int, i: int, prepared: dict[str, Prepared], device: str) -> tuple:
    """Configuration ``i``'s reference module, init inputs and inputs (into ``prepared``); returns
    ``(cfg, ConfigResult)``."""
    p = prepared[cfg.name] = Prepared.made(task, cfg, seed, i, device)
    return cfg, ConfigResult(name=cfg.name, held_out=cfg.held_out, dtype=cfg.dtype,
                             inputs=[describe_value(x) for x in p.inputs])


def send_run(task: Task, run: tuple, prepared: dict, worker: Worker, result: EvalResult, early: dict,
             timeout: float) -> None:
    """Send a configuration's correctness run to the worker; its ConfigResult joins ``result``. Large inputs on a
    GPU are written into the worker's memory (``_write_inputs``); a reply that comes instead of the worker's
    slots for them (its model failed to build, say) is the run's reply, kept in ``early``."""
    cfg, cr = run
    result.configs.append(cr)
    p = prepared[cfg.name]
    header = {"type": msg.RUN, "config": cfg.name, "dtype": cfg.dtype, "init_seed": p.init_seed,
              "backward": task.backward, "tolerance": task.tolerance}
    inputs = p.inputs
    on_gpu = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda]
    if on_gpu:
        header["ipc_min"] = SHARED_OUTPUT_BYTES
    shared = sum(x.numel() * x.element_size() for x in on_gpu) >= SHARED_INPUT_BYTES
    if shared:
        header["input_slots"] = [[str(x.dtype).removeprefix("torch."), list(x.shape)]
                                 if isinstance(x, torch.Tensor) and x.is_cuda else None for x in inputs]
        inputs = [None if slot is not None else x for slot, x in zip(header["input_slots"], inputs)]
    with phase(result, "check_send"):
        worker.send(header, {"init_inputs": p.init_inputs, "inputs": inputs})
        if shared:
            reply = _write_inputs(worker, p.inputs, timeout, cfg.name)
            if reply is not None:
                early[cfg.name] = reply


def _write_inputs(worker: Worker, inputs: list, timeout: float, config: str) -> tuple | None:
    """Write a run's inputs where the worker's READY says its slots for them are, then send GO; or the worker's
    reply when it answers otherwise (an ERROR: it is the run's). A slot out of the worker's memory, or the wrong
    size, is the run's failure too."""
    header, payload = worker.recv(timeout, f"input slots of configuration {config!r}")
    if header.get("type") != msg.READY:
        return header, payload
    slots, handles = header.get("slots"), header.get("handles")
    written = [x if isinstance(x, torch.Tensor) and x.is_cuda else None for x in inputs]  # (the pipe took the rest)
    try:
        if not isinstance(slots, list) or len(slots) != len(inputs) or not isinstance(handles, list):
            raise IpcError("the worker's input slots do not match the inputs")
        maps = Mappings(_inputs_device(inputs))
        try:
            for dst, x in zip(input_views(maps, handles, written, slots), written):
                if dst is not None:
                    dst.copy_(x.contiguous().view(-1).view(torch.uint8))
            torch.cuda.synchronize(maps.device)  # written before the worker reads
        finally:
            maps.close()
    except (WorkerError, IpcError, RuntimeError, TypeError, ValueError) as exc:
        worker.kill()
        raise WorkerError(f"the worker's slots for the inputs of configuration {config!r} could not be written "
                          f"({type(exc).__name__}: {exc}); the worker was stopped") from None
    worker.send({"type": msg.GO})
    return None


def _inputs_device(inputs: list) -> torch.device:
    return next(x.device for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda)


def _nearby(ctx: StageContext, cfg: Config):
    """``ok(out)``: whether a close miss of ``cfg``'s correctness run matches the reference at nearby inputs
    (nearby.py); the reference's model is built only when one is tried."""
    task, p = ctx.task, ctx.prepared[cfg.name]

    def ok(out) -> bool:
        runner = task.reference_runner(p.module, p.init_inputs, cfg, p.init_seed, ctx.device)
        return matches_nearby(out, p.inputs, runner, DTYPES[cfg.dtype], task.tolerance)

    return ok


def judge(task: Task, run: tuple, reply: tuple, ref, result: EvalResult, verdict: dict, rules: str,
          own_names=None, nearby=None) -> None:
    """Judge one configuration's correctness run: the worker's reply against the reference output ``ref`` (and,
    for a close miss, ``nearby(out)``: the reference at nearby inputs, nearby.py). Updates ``verdict`` (all_ok,
    ran_any), the configuration's ConfigResult and ``result``."""
    cfg, cr = run
    header, payload = reply
    note_reports(result, header, cfg.name)
    if header["type"] == msg.ERROR:
        cr.correct, cr.error = False, header["message"]
        verdict["all_ok"] = False
        if result.error is None:
            result.error = f"configuration {config_label(cfg, cr)}: {header['message']}"
            result.error_stage = "run"
        return
    if not (isinstance(payload, dict) and "out" in payload):
        raise WorkerError(f"the worker's reply on configuration {cfg.name!r} carried no output")
    verdict["ran_any"] = True
    mismatch, figures = compare_outputs(payload["out"], ref, DTYPES[cfg.dtype], task.tolerance)
    if mismatch is not None and nearby is not None and close_miss(figures) and nearby(payload["out"]):
        mismatch = None  # the reference's answer to a problem within rounding of this one (nearby.py)
    cr.norm_err, cr.max_err = figures["norm_err"], figures["max_err"]
    cr.correct = mismatch is None
    if mismatch is not None:
        cr.error = mismatch.message
        verdict["all_ok"] = False
        if result.error is None:
            result.error = f"configuration {config_label(cfg, cr)}: {mismatch.message}"
            result.error_stage = "correctness"
    elif header.get("nondeterministic"):
        flag(result, make("nondeterministic", f"a second run on the same inputs of configuration {cfg.name!r} gave "
                                              f"a different output ({str(header['nondeterministic'])[:300]})"))
    _audit_flags(header, cr, result, rules, own_names)


def _audit_flags(header: dict, cr: ConfigResult, result: EvalResult, rules: str, own_names=None) -> None:
    """The flags of a correct-or-not run's audit: inputs written, what forward executed, precision settings."""
    if header.get("inputs_modified"):
        flag(result, make("inputs_modified", f"forward wrote into its inputs on configuration {cr.name!r}"))
    add_phase(result, "worker_audit", float((header.get("audit") or {}).get("overhead_s") or 0.0))
    for f in rules_mod.judge_audit(rules, header["audit"], cr, result, TORCH_KERNEL_PREFIXES, own_names):
        flag(result, f)
    if header.get("flags_changed"):
        flag(result, make("precision_flags_changed", "the candidate changed pinned precision settings ("
                          + "; ".join(header["flags_changed"]) + ")"))

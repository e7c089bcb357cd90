"""The GPU worker as an executor of timed blocks: it captures a block of calls on input buffers the trusted side
fills, replays it when told, and leaves the outputs where the trusted side reads them. What it reports about time
is checked against the trusted side's clock; what it reports about where its memory is, is only a pointer.

The exchange (pipeline/gpu_blocks.py drives it; protocol/cuda_ipc.py is both sides' access to the memory):

    GPU_SLOTS {config, block, warmup[, shrink]}
                   warm the model up, make ``block`` sets of input buffers (one allocation per input: a
                   [block, *shape] tensor whose row b is call b's input), capture the block as one CUDA graph
                   (eagerly run blocks where the candidate cannot be captured)
                   -> GPU_BUFFERS {block, method, handles, inputs, layout, outputs[, call_ms]}: the inputs' and
                   (graph) the outputs' allocations as inter-process handles and offsets; ``block`` 0 lets this
                   side choose (the reference's worker: about BLOCK_TARGET_MS of device work); ``shrink`` (a far
                   slower candidate's block made smaller before it is captured, ``shrunk_block``) lets it make
                   fewer calls a block where one call's device time is over the hint's
    GPU_BLOCK      replay the block between two device events (the replay's whole time: nothing is subtracted, see
                   pipeline/gpu_blocks.py), or run it eagerly timed by this process's clock
                   -> DONE {ms, method} (+ where an eager block's outputs are)
    RELEASE        drop the graph and the buffers -> RELEASED

The trusted side writes a block's inputs and flushes the L2 cache after its clock has started, reads the checked
outputs itself after DONE, and believes the reported device time only inside its own wall-clock bound.
"""

from __future__ import annotations

import resource
import threading
import time

import torch

from kbench_env.measure import stats
from kbench_env.measure.compare import flatten_outputs
from kbench_env.measure.inputs import fill_perturbed, input_stds, perturb
from kbench_env.protocol import messages as msg
from kbench_env.protocol.cuda_ipc import Exporter
from kbench_env.worker.executor import output_layout

#: Calls per block at most, the device time a block aims at, and the bytes of a block's static inputs and outputs
#: at most: long enough that the trusted side's fixed cost around a block (writing its inputs, flushing L2, the
#: exchange: about a millisecond) and its jitter are small beside it, since they set how tight the bound on the
#: reported time is (pipeline/gpu_blocks.py). A call of a few microseconds needs thousands of calls a block, a call
#: that moves 128 MB needs gigabytes (the trusted side stages a block's inputs once more on its own memory).
MAX_BLOCK = 4096
BLOCK_TARGET_MS = 5.0
BLOCK_BYTES = 8 << 30


#: A call's device time for ``shrink``: the least of up to CALL_ROUNDS, each behind a spin of PRIME_CYCLES (about a
#: millisecond) so that the call's launches queue while the device is busy and its events see no host gap between
#: them; a round above the hint by more than SLICE_MS (other processes' turns on the device, which time-slicing puts
#: inside a round's events, are shorter) ends the rounds: one call of a far slower candidate can take seconds.
CALL_ROUNDS = 3
PRIME_CYCLES = 2_000_000
SLICE_MS = 20.0


def call_device_ms(model, ins: list, above_ms: float) -> float:
    """One call of ``model`` on ``ins``: its device time in ms, the least of up to CALL_ROUNDS rounds, stopped at the
    first round not above ``above_ms`` (the block is kept then) or above it by more than SLICE_MS."""
    best = float("inf")
    for _ in range(CALL_ROUNDS):
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(PRIME_CYCLES)
        ev0.record()
        model(*ins)
        ev1.record()
        ev1.synchronize()
        best = min(best, ev0.elapsed_time(ev1))
        if best <= above_ms or best > above_ms + SLICE_MS:
            break
    return best


def read_shrink(header: dict) -> tuple | None:
    """The trusted side's ``shrink`` (pipeline/gpu_blocks.shrink_hint) as (above_ms, aim_ms, most), or None."""
    hint = header.get("shrink")
    try:
        return float(hint["above_ms"]), float(hint["aim_ms"]), int(hint["most"])
    except (KeyError, TypeError, ValueError):
        return None


def shrunk_block(block: int, call_ms: float, hint: tuple) -> int:
    """The block for a candidate one of whose calls takes ``call_ms`` on the device: ``block`` unless that is over
    the hint's ``above_ms``, else about ``aim_ms`` of calls, no more than ``most`` and at least one."""
    above_ms, aim_ms, most = hint
    if not call_ms > above_ms or most < 1:  # (not a number: kept)
        return block
    return max(1, min(most, block, int(aim_ms / call_ms)))


class _Block:
    """One configuration's timed block in this worker: the model, its input sets, the graph (or None: eager)."""

    def __init__(self, model, big: list, sets: list, graph, outs, exporter: Exporter):
        self.model, self.big, self.sets, self.graph, self.outs = model, big, sets, graph, outs
        self.exporter = exporter
        self.handed: list = []  # inputs given before the capture, alive so no buffer takes their addresses


#: The seed of this process's own inputs (``_own_inputs``); the block's buffers are filled from another stream.
OWN_SEED = 7_000_003


def _own_inputs(originals: list, stds: list):
    """Inputs for the warm-up, the block-size probe and the capture: this process's own perturbed copies (what
    they hold does not matter: the trusted side writes every timed call's inputs)."""
    return lambda j: perturb(originals, OWN_SEED + j, 1e-2, stds)


def _buffers(originals: list, block: int) -> tuple[list, list]:
    """Per input tensor one [block, *shape] allocation; per call its row of each (leaf views sharing storage)."""
    big = [torch.empty((block, *x.shape), dtype=x.dtype, device=x.device) if isinstance(x, torch.Tensor) else None
           for x in originals]
    sets = []
    for b in range(block):
        one = []
        for x, t in zip(originals, big):
            if t is None:
                one.append(x)
            else:
                row = t[b].detach()
                one.append(row.requires_grad_(x.requires_grad) if row.is_floating_point() else row)
        sets.append(one)
    return big, sets


def buffer_entries(buffers: list, exporter: Exporter) -> list:
    """Per buffer, where the trusted side writes it: ``[handle index, byte offset, bytes]``, or None (no buffer,
    or an empty one)."""
    return [[*exporter.locate(t), t.numel() * t.element_size()] if isinstance(t, torch.Tensor) and t.numel() else None
            for t in buffers]


def describe(outs: list, exporter: Exporter) -> tuple[list, list]:
    """The outputs' layout (per leaf of the first call: dtype and dimensions, or a Python number's value) and per
    call, per tensor leaf, [handle index, byte offset, *shape, *strides] ([-1, ...] where a call's leaf does not
    have the first call's layout: unreadable, so wrong if checked)."""
    layout = output_layout(outs)
    table = []
    for out in outs:
        leaves = flatten_outputs(out)
        row = []
        for leaf, d in zip(leaves, layout):
            if "ndim" not in d:
                continue
            ok = (isinstance(leaf, torch.Tensor) and leaf.is_cuda and leaf.dim() == d["ndim"]
                  and str(leaf.dtype) == "torch." + d["dtype"] and leaf.numel() > 0)
            if ok:
                handle, offset = exporter.locate(leaf)
                row.append([handle, offset, *leaf.shape, *leaf.stride()])
            else:
                row.append([-1, 0] + [0] * (2 * d["ndim"]))
        table.append(row if len(leaves) == len(layout) else None)
    return layout, table


def _usage() -> tuple:
    """This thread's CPU seconds, this process's, this thread's voluntary and involuntary context switches (it
    waited; it was preempted), and the process's threads: where a slow set-up step's wall time went."""
    try:
        r = resource.getrusage(resource.RUSAGE_THREAD)
        switches = (r.ru_nvcsw, r.ru_nivcsw)
    except (AttributeError, OSError):  # (no per-thread usage on this system)
        switches = (0, 0)
    return (time.thread_time(), time.process_time(), *switches, threading.active_count())


def _timed_calls(model, seconds: list):
    """``model`` with each call's seconds (this process's clock) appended to ``seconds``."""
    clock = stats._perf_counter

    def call(*args):
        t0 = clock()
        try:
            return model(*args)
        finally:
            seconds.append(clock() - t0)
    return call


def _slowest(seconds: list) -> dict:
    """The capture's calls (its two warm-up calls first): how many, the slowest and where it came, how many took a
    millisecond or more, and their sum."""
    if not seconds:
        return {"n": 0}
    at = max(range(len(seconds)), key=seconds.__getitem__)
    return {"n": len(seconds), "max_ms": round(seconds[at] * 1e3, 2), "at": at,
            "over_1ms": sum(x >= 1e-3 for x in seconds), "sum_ms": round(sum(seconds) * 1e3, 2)}


def _gpu_slots(s, header: dict, payload, grad, send) -> None:
    """GPU_SLOTS: the configuration's block made and captured; its memory exported."""
    cfg = header["config"]
    s.gpu.pop(cfg, None)  # (set up again: a smaller block, or a timing done again)
    model, originals = s.models[cfg], s.originals[cfg]
    cuda = getattr(s.backend, "_cuda", None) or s.backend  # (the Triton backend's GPU side is CUDA's)
    stds = input_stds(originals)
    make = _own_inputs(originals, stds)
    # where a set-up's time goes (a diagnosis only, for the trace): each step's wall ms, and its CPU (this thread's,
    # the process's), context switches (voluntary, involuntary) and threads at its end
    steps, usage, clock = {}, {}, stats._perf_counter
    t, u = clock(), _usage()

    def step(name: str) -> None:
        nonlocal t, u
        torch.cuda.synchronize()
        now = _usage()
        usage[name] = [round((now[0] - u[0]) * 1e3, 1), round((now[1] - u[1]) * 1e3, 1), now[2] - u[2],
                       now[3] - u[3], now[4]]
        steps[name], t, u = round((clock() - t) * 1e3, 2), clock(), _usage()

    handed = [make(-1 - i) for i in range(max(1, int(header.get("warmup", 3))))]
    with grad:
        for ins in handed:
            model(*ins)
        step("warmup")
        block, hint, call_ms = int(header.get("block") or 0), read_shrink(header), None
        if block > 0 and hint is not None:
            call_ms = call_device_ms(model, handed[-1], hint[0])
            block = shrunk_block(block, call_ms, hint)
            step("call")
        if block <= 0:
            probe = make(-100)
            handed.append(probe)
            block = cuda._block_size(model, make, probe, handed, BLOCK_TARGET_MS, MAX_BLOCK, BLOCK_BYTES)
            step("block_size")
        block = max(1, min(block, MAX_BLOCK))
        big, sets = _buffers(originals, block)
        step("buffers")
        # every row a content of its own for the capture, unlike any warm-up input (the trusted side overwrites it)
        fill_perturbed(big, originals, OWN_SEED - 200, 1e-2, stds)
        step("fill")
        calls: list = []
        captured = cuda._capture(_timed_calls(model, calls), make, block, handed=handed, static_in=sets)
        step("capture")
        usage["capture_calls"] = _slowest(calls)
    exporter = Exporter()
    graph, outs = (captured[0], captured[2]) if captured is not None else (None, None)
    st = _Block(model, big, sets, graph, outs, exporter)
    st.handed = handed
    s.gpu[cfg] = st
    inputs = buffer_entries(big, exporter)
    reply = {"type": msg.GPU_BUFFERS, "config": cfg, "block": block,
             "method": "cuda-graph" if graph is not None else "eager-sync", "inputs": inputs}
    if graph is not None:
        reply["layout"], reply["outputs"] = describe(outs, exporter)
    reply["handles"] = exporter.handles
    step("export")
    reply["steps_ms"], reply["steps_usage"] = steps, usage
    if call_ms is not None:
        reply["call_ms"] = call_ms
    send(reply)


def _gpu_block(s, header: dict, payload, grad, send) -> None:
    """GPU_BLOCK: one replay (or eager run) of the block; DONE with its time."""
    st = s.gpu.get(header.get("config"))
    if st is None:
        raise RuntimeError(f"no timed block of configuration {header.get('config')!r} was set up (GPU_SLOTS first)")
    if st.graph is not None:
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        st.graph.replay()
        ev1.record()
        torch.cuda.synchronize()
        send({"type": msg.DONE, "config": header.get("config"), "method": "cuda-graph",
              "ms": ev0.elapsed_time(ev1)})
        return
    clock = stats._perf_counter
    torch.cuda.synchronize()
    t0 = clock()
    with grad:
        outs = [st.model(*ins) for ins in st.sets]
    torch.cuda.synchronize()
    ms = (clock() - t0) * 1e3
    st.outs = outs
    layout, table = describe(outs, st.exporter)
    send({"type": msg.DONE, "config": header.get("config"), "method": "eager-sync", "ms": ms, "layout": layout,
          "outputs": table, "handles": st.exporter.handles})


#: The GPU executor's requests, by kind (worker.loop adds them to its dispatch table; RELEASE is executor.py's).
HANDLERS = {msg.GPU_SLOTS: _gpu_slots, msg.GPU_BLOCK: _gpu_block}

"""The worker as an executor of timed blocks: it runs ``forward`` on input buffers the trusted side fills, and keeps
the outputs where the trusted side reads them. It measures nothing and checks nothing.

The exchange (pipeline/blocks.py drives it; sandbox/memory.py is the trusted side's access):

    SLOTS {config, count}   allocate ``count`` sets of input buffers shaped as the configuration's inputs
                            -> BUFFERS {addresses}: per set, per input, the address of its first element
    BLOCK {config, calls}   run forward on sets 0..calls-1 in order, keep the outputs
                            -> DONE {layout} + table: per call, per output tensor, its address, shape and strides
    RELEASE {config}        drop the kept outputs -> RELEASED

The trusted side writes a block's inputs while this process is stopped, starts its clock as it lets it run, stops
the clock at DONE and stops the process again before it reads the outputs. So the inputs of a block exist only
once it starts, an output is whatever its memory holds when the block says done, and what this process says about
either is an address, not a fact: a wrong address reads the wrong bytes, which the comparison with the reference
catches.
"""

from __future__ import annotations

import fcntl
import mmap
import os

import torch

from kbench_env.measure.compare import flatten_outputs
from kbench_env.protocol import messages as msg

_ALIGN = 64  # each input of a shared set starts on a cache line


def _slots(s, header: dict, payload, grad, send) -> None:
    """SLOTS: input buffers for a configuration's timed blocks, shaped as the inputs it was run on; the CPU's on
    one memfd (``_shared_buffers``) where it can be made, which the trusted side then writes at memory speed."""
    cfg, count = header["config"], int(header["count"])
    originals = s.originals[cfg]
    s.slots[cfg] = None  # the old buffers go before the new are made (memory)
    shared = _shared_buffers(originals, count)
    sets = shared[0] if shared is not None else [[_empty_like(x) for x in originals] for _ in range(count)]
    s.slots[cfg] = sets
    addresses = [[x.data_ptr() if isinstance(x, torch.Tensor) else None for x in one] for one in sets]
    reply = {"type": msg.BUFFERS, "config": cfg, "addresses": addresses}
    old = s.slot_files.pop(cfg, None)
    if old is not None:
        os.close(old)
    if shared is not None:
        s.slot_files[cfg] = shared[1]["fd"]  # open until the next SLOTS: the trusted side takes its own copy
        reply["memfd"] = shared[1]
    send(reply)


def _empty_like(x):
    return _as_input(torch.empty(x.shape, dtype=x.dtype, device=x.device), x) if isinstance(x, torch.Tensor) else x


def _as_input(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Buffer ``t`` for input ``x``: requiring grad as ``x`` does, where it is floating."""
    return t.requires_grad_(x.requires_grad) if x.is_floating_point() else t


def _shared_buffers(originals: list, count: int) -> tuple[list, dict] | None:
    """``count`` input sets laid out on one memfd sealed against shrinking and growing, mapped here and zeroed (its
    pages faulted in, and charged, in this process): (the sets, {fd, base, size}); None where an input is not on the
    CPU or the memfd cannot be made. The trusted side writes each block's inputs into it through its own mapping
    (sandbox/memory.py ``share``) instead of through /proc/<pid>/mem, several times slower on large inputs."""
    tensors = [x for x in originals if isinstance(x, torch.Tensor)]
    if not tensors or any(x.device.type != "cpu" or not x.numel() for x in tensors):
        return None
    offsets, stride = [], 0  # each tensor's place in a set, and a set's bytes
    for x in tensors:
        offsets.append(stride)
        stride += -(-x.numel() * x.element_size() // _ALIGN) * _ALIGN
    size = count * stride
    try:
        fd = os.memfd_create("kbench-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (OSError, AttributeError):
        return None
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        whole = torch.frombuffer(mmap.mmap(fd, size), dtype=torch.uint8)  # (the tensor keeps the mapping)
    except (OSError, ValueError):
        os.close(fd)
        return None
    whole.zero_()
    sets = []
    for k in range(count):
        place = iter(offsets)
        one = []
        for x in originals:
            if not isinstance(x, torch.Tensor):
                one.append(x)
                continue
            at = k * stride + next(place)
            one.append(_as_input(whole[at:at + x.numel() * x.element_size()].view(x.dtype).view(x.shape).detach(), x))
        sets.append(one)
    return sets, {"fd": fd, "base": whole.data_ptr(), "size": size}


def _block(s, header: dict, payload, grad, send) -> None:
    """BLOCK: the first ``calls`` input sets through forward, back to back; the outputs kept until RELEASE."""
    cfg, calls = header["config"], int(header["calls"])
    model, sets = s.models[cfg], s.slots[cfg]
    outs = []
    with grad:
        for k in range(calls):
            outs.append(model(*sets[k]))
        s.backend.sync()
    s.kept = outs
    layout, table = _describe(outs)
    done = {"type": msg.DONE, "config": cfg, "layout": layout}
    if sum(map(len, table)) <= HEADER_TABLE_INTS:
        # In the header, no payload: the reply is made, sent and read inside the block's clock, the same on both
        # sides of a pair, and a JSON list costs a fraction of a tensor's way through pack and unpack
        send({**done, "table": table})
    else:  # (a header is bounded: wire.MAX_HEADER_BYTES)
        send(done, {"table": torch.tensor(table, dtype=torch.int64)})


#: The most integers a timed block's table of outputs carries in its DONE header (beyond: as a tensor payload).
HEADER_TABLE_INTS = 1 << 16


def _release(s, header: dict, payload, grad, send) -> None:
    """RELEASE: the last block's outputs are no longer needed (a GPU block's graph and buffers too)."""
    s.kept = None
    if s.gpu.pop(header["config"], None) is not None:
        # A timed block's buffers and graph (up to gpu_executor.BLOCK_BYTES) go back to the device, not into this
        # process's cache: other candidates' workers on the GPU need their own blocks.
        torch.cuda.empty_cache()
    send({"type": msg.RELEASED, "config": header["config"]})


def output_layout(outs: list) -> list:
    """The outputs' layout: per output leaf of the first call, its dtype and number of dimensions, or the value of
    a Python number (both executors describe their outputs this way)."""
    layout = []
    for leaf in (flatten_outputs(outs[0]) if outs else []):
        if isinstance(leaf, torch.Tensor):
            layout.append({"dtype": str(leaf.dtype).replace("torch.", ""), "ndim": leaf.dim()})
        else:
            layout.append({"value": leaf if isinstance(leaf, (int, float, bool)) else repr(leaf)})
    return layout


def _describe(outs: list) -> tuple[list, list]:
    """The outputs' layout (``output_layout``) and a table with one row (a list of ints) per call: per tensor leaf
    its address, shape and strides."""
    layout = output_layout(outs)
    width = sum(1 + 2 * d["ndim"] for d in layout if "ndim" in d)
    rows = []
    for out in outs:
        leaves = flatten_outputs(out)
        row: list = []
        for leaf, d in zip(leaves, layout):
            if "ndim" not in d:
                continue
            if isinstance(leaf, torch.Tensor) and leaf.dim() == d["ndim"] and str(leaf.dtype) == "torch." + d["dtype"]:
                row += [leaf.data_ptr(), *leaf.shape, *leaf.stride()]
            else:  # a call whose output does not have the first call's layout: unreadable, so wrong if checked
                row += [-1] + [0] * (2 * d["ndim"])
        rows.append(row if len(leaves) == len(layout) else [-1] * width)
    return layout, rows


#: The executor's requests, by kind (worker.loop adds them to its dispatch table).
HANDLERS = {msg.SLOTS: _slots, msg.BLOCK: _block, msg.RELEASE: _release}

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

import torch

from kbench_env.measure.compare import flatten_outputs
from kbench_env.protocol import messages as msg


def _slots(s, header: dict, payload, grad, send) -> None:
    """SLOTS: input buffers for a configuration's timed blocks, shaped as the inputs it was run on."""
    cfg, count = header["config"], int(header["count"])
    originals = s.originals[cfg]
    s.slots[cfg] = None  # the old buffers go before the new are made (memory)
    sets = []
    for _ in range(count):
        one = []
        for x in originals:
            if isinstance(x, torch.Tensor):
                t = torch.empty(x.shape, dtype=x.dtype, device=x.device)
                one.append(t.requires_grad_(x.requires_grad) if x.is_floating_point() else t)
            else:
                one.append(x)
        sets.append(one)
    s.slots[cfg] = sets
    addresses = [[x.data_ptr() if isinstance(x, torch.Tensor) else None for x in one] for one in sets]
    send({"type": msg.BUFFERS, "config": cfg, "addresses": addresses})


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
    send({"type": msg.DONE, "config": cfg, "layout": layout}, {"table": table})


def _release(s, header: dict, payload, grad, send) -> None:
    """RELEASE: the last block's outputs are no longer needed (a GPU block's graph and buffers too)."""
    s.kept = None
    if s.gpu is not None:
        s.gpu = None
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


def _describe(outs: list) -> tuple[list, torch.Tensor]:
    """The outputs' layout (``output_layout``) and a table with one row per call: per tensor leaf its address,
    shape and strides."""
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
    return layout, torch.tensor(rows, dtype=torch.int64).reshape(len(outs), width)


#: The executor's requests, by kind (worker.loop adds them to its dispatch table).
HANDLERS = {msg.SLOTS: _slots, msg.BLOCK: _block, msg.RELEASE: _release}

"""Timing by the trusted side's clock, block by block, with the outputs read and checked here (the CPU's timing).

One configuration's timing, driven from this side (the worker is an executor: worker/executor.py):

1. the worker allocates input buffers (SLOTS) and is stopped (sandbox/memory.py ``Freezer``);
2. per block: this side writes the block's inputs into the buffers (pipeline/revealed_inputs.py: from keys drawn
   now, with randomness the worker never sees), starts its clock, resumes the worker and lets it run the block
   (BLOCK); at DONE it stops the worker and, once every task of it has stopped, the clock; it reads the outputs
   of ``check_calls`` calls chosen now out of the block straight from the worker's memory and compares them with
   the reference for those calls' inputs; the block's time over its number of calls is one sample;
3. a configuration none of whose inputs can vary between calls (revealed_inputs.py ``varies``) has every output of
   a block overwritten with garbage once the block is checked (``poison_outputs``): an output kept from an earlier
   call and returned again reads as garbage when checked, as a stale one does when the inputs change;
4. the first block (``warmup`` calls) and a sizing block after it are not samples: they warm caches and size the
   later blocks so that each runs about ``block_seconds`` (the exchange around a block stays under 1 % of it),
   within ``BLOCK_BYTES`` of inputs and outputs (paired.py sizes a pair's two sides alike).

The count of calls, the clock and the comparison are this side's; the worker reports nothing that is believed.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import torch

from kbench_env.pipeline.revealed_inputs import RevealedInputs
from kbench_env.protocol import messages as msg
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.measure.stats import Timing, summarize

#: Target length of a timed block, and the bounds on its calls and on the bytes its inputs and outputs take: long
#: enough that the exchange around a block is about 1 % of it, even on a loaded machine (bench/RESULTS.md).
BLOCK_SECONDS = 0.05
MAX_BLOCK_CALLS = 4096
BLOCK_BYTES = 256 << 20
#: Blocks at least, after the warm-up block (the median and spread are over blocks).
MIN_BLOCKS = 5
#: Output dtypes this side reads (names as the worker's layout gives them).
_DTYPES = {str(d).replace("torch.", ""): d for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                                     torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                                                     torch.bool, torch.complex64, torch.complex128)}


class Unreadable(Exception):
    """An output the worker described could not be read (no such address, an impossible layout)."""


@dataclass
class BlockTiming:
    """A configuration's timing: ``timing`` (per-call times, one per block), or ``wrong``: why a checked output
    did not match (then ``wrong_call`` is the call's number among the timed calls)."""

    timing: Timing | None = None
    wrong: str | None = None
    wrong_call: int | None = None
    blocks: int = 0
    check_seconds: float = 0.0  # this side's reading and comparing of checked outputs
    samples: dict | None = None  # the worker's CPU samples by library over the blocks (sandbox/samples.py)


def _params(p: dict) -> dict:
    return {"warmup": max(1, int(p.get("warmup", 3))), "min_reps": int(p.get("min_reps", 10)),
            "max_reps": p.get("max_reps"), "min_seconds": float(p.get("min_seconds", 0.3)),
            "max_seconds": float(p.get("max_seconds", 10.0)), "block_seconds": float(p.get("block_seconds", BLOCK_SECONDS)),
            "min_blocks": int(p.get("min_blocks", MIN_BLOCKS))}


def _tensor_bytes(x: torch.Tensor):
    return x.detach().contiguous().reshape(-1).view(torch.uint8).numpy()


def read_outputs(mem, layout: list, row: list) -> list:
    """The output leaves of one call, read from the stopped worker's memory as its table row describes them."""
    leaves, pos = [], 0
    for d in layout:
        if "ndim" not in d:
            leaves.append(d.get("value"))
            continue
        n = int(d["ndim"])
        ptr, shape, stride = row[pos], row[pos + 1:pos + 1 + n], row[pos + 1 + n:pos + 1 + 2 * n]
        pos += 1 + 2 * n
        dtype = _DTYPES.get(d.get("dtype"))
        if dtype is None or ptr < 0 or any(v < 0 for v in shape) or any(v < 0 for v in stride):
            raise Unreadable(f"an output has no readable layout (dtype {d.get('dtype')!r}, shape {shape}, "
                             f"strides {stride})")
        numel = math.prod(shape)
        if numel == 0:
            leaves.append(torch.empty(shape, dtype=dtype))
            continue
        span = 1 + sum((a - 1) * b for a, b in zip(shape, stride))
        itemsize = dtype.itemsize
        if span > 4 * numel + 4096 or span * itemsize > BLOCK_BYTES:
            raise Unreadable(f"an output's strides {stride} span {span} elements for {numel}")
        data = bytearray(mem.read(ptr, span * itemsize))
        leaves.append(torch.frombuffer(data, dtype=dtype).as_strided(shape, stride))
    return leaves


def poison_outputs(mem, layout: list, table: list) -> None:
    """Every output tensor of the block's calls, in the stopped worker's memory, overwritten with 0xff bytes (NaN
    in every floating dtype, -1 in the integer ones). Outputs ``read_outputs`` would refuse are left alone (they
    are wrong if checked)."""
    for row in table:
        pos = 0
        for d in layout:
            if "ndim" not in d:
                continue
            n = int(d["ndim"])
            ptr, shape, stride = row[pos], row[pos + 1:pos + 1 + n], row[pos + 1 + n:pos + 1 + 2 * n]
            pos += 1 + 2 * n
            dtype = _DTYPES.get(d.get("dtype"))
            numel = math.prod(shape)
            if dtype is None or ptr <= 0 or numel <= 0 or any(v < 0 for v in (*shape, *stride)):
                continue
            span = 1 + sum((a - 1) * b for a, b in zip(shape, stride))
            if span <= 4 * numel + 4096 and span * dtype.itemsize <= BLOCK_BYTES:
                mem.write(int(ptr), b"\xff" * (span * dtype.itemsize))


class TimedCallFailed(Exception):
    """The worker answered a timing request with an ERROR: the candidate failed in a timed call (its message)."""


class _Run:
    """One configuration's blocks in one worker (the state ``time_blocks`` threads through)."""

    def __init__(self, worker, config: str, inputs: RevealedInputs, timeout: float, check, check_calls: int):
        self.worker, self.config, self.inputs, self.timeout = worker, config, inputs, timeout
        self.sampler = None  # set for the sampled blocks after the timed ones (_sample)
        self.freezer, self.mem = worker.hands()
        self.check, self.check_calls = check, check_calls
        self.addresses: list = []
        self.rng = random.SystemRandom()
        self.check_seconds = 0.0
        self.placement = None  # sandbox/placement.py: where the worker runs its timed blocks (paired.py sets it)
        self.made: tuple | None = None  # the last block's (keys, inputs' bytes)

    def request(self, header: dict, what: str) -> dict:
        """A request answered while the worker runs (it is stopped again after)."""
        self.freezer.thaw()
        self.worker.send(header)
        reply, _ = self.worker.recv(self.timeout, what)
        self.freezer.freeze()
        self.freezer.settle()  # (outside any clock: the other worker's block may come next)
        if reply["type"] == msg.ERROR:
            raise TimedCallFailed(reply["message"])
        return reply

    def slots(self, count: int) -> None:
        reply = self.request({"type": msg.SLOTS, "config": self.config, "count": count}, "input buffers")
        self.addresses = reply["addresses"]
        if len(self.addresses) != count:
            raise WorkerError(f"the worker made {len(self.addresses)} input buffer sets, {count} were asked for")
        shared = reply.get("memfd")  # (the worker is stopped: its table of files stays as it said)
        if isinstance(shared, dict):
            self.mem.share(shared.get("fd"), shared.get("base"), shared.get("size"))
        else:
            self.mem.unshare()

    def block(self, calls: int, made: tuple | None = None) -> tuple[float, list, list, list]:
        """Run one block of ``calls`` calls: (seconds by this side's clock, keys, layout, table). ``made``: the
        block's inputs as ``prepare`` made them for another worker's block (paired.py: the reference's block runs on
        the candidate's inputs before it), written here as they are; else made now."""
        keys, made = made if made is not None else self.prepare(calls)
        if len(made) != calls:
            raise ValueError(f"inputs for {len(made)} calls given to a block of {calls}")
        self.made = (keys, made)
        # All made first, then all written in one pass: the block starts with its inputs where the writes left
        # them in the caches, the same for every worker (making them between the writes evicted the first ones).
        for j, one in enumerate(made):
            for data, address in zip(one, self.addresses[j]):
                if data is not None:
                    self.mem.write(int(address), data)
        if self.sampler is not None:
            self.sampler.attach()  # threads started since the last block (the worker is stopped)
        self.worker.send({"type": msg.BLOCK, "config": self.config, "calls": calls})
        if self.placement is not None:
            self.placement.apply(self.freezer.pids(), main=self.freezer.pid)
        t0 = time.perf_counter()
        self.freezer.thaw()
        header, payload = self.worker.recv(self.timeout, f"timed block of configuration {self.config!r}")
        self.freezer.freeze()
        # The clock stops once every task of the worker is stopped again, not at its DONE: whatever still ran
        # after DONE (another thread or process, a system call under way) was the block's work too.
        seconds = time.perf_counter() - t0
        if self.sampler is not None:
            self.sampler.drain()
        if header["type"] == msg.ERROR:
            raise TimedCallFailed(header["message"])
        table = table_of(header, payload, calls)
        if table is None:
            raise WorkerError(f"the worker's report of a timed block of {calls} calls had no table of its outputs")
        return seconds, keys, header.get("layout") or [], table

    def prepare(self, calls: int) -> tuple[list, list]:
        """A block's inputs: per call its key and the bytes of each input (None where nothing is written)."""
        keys = [self.inputs.draw() for _ in range(calls)]
        return keys, [[_tensor_bytes(x) if isinstance(x, torch.Tensor) and x.numel() else None
                       for x in self.inputs.make(key)] for key in keys]

    def check_block(self, keys: list, layout: list, table: list) -> tuple[int, str] | None:
        """A timed block's check (paired.py's candidate keeps its outputs to judge later instead)."""
        return self.verdict(keys, layout, table)

    def verdict(self, keys: list, layout: list, table: list) -> tuple[int, str] | None:
        """Check ``check_calls`` calls of the block, chosen now; the first wrong one (its index, why) or None."""
        return self.each_checked(keys, layout, table, lambda j, out: self.check(out, self.inputs.make(keys[j])))

    def each_checked(self, keys: list, layout: list, table: list, take) -> tuple[int, str] | None:
        """``take(j, outputs)`` for ``check_calls`` calls ``j`` of the block, chosen now, their outputs read out of
        the stopped worker: the first ``(j, why)`` where an output cannot be read or ``take`` says why it is wrong,
        else None (nothing without a ``check``; the time goes to ``check_seconds``)."""
        if self.check is None:
            return None
        t0 = time.perf_counter()
        try:
            for j in sorted(self.rng.sample(range(len(keys)), min(self.check_calls, len(keys)))):
                try:
                    out = read_outputs(self.mem, layout, table[j])
                except Exception as exc:  # noqa: BLE001 - whatever the worker described: unreadable is wrong
                    return j, f"its output could not be read from the worker ({type(exc).__name__}: {exc})"
                why = take(j, out)
                if why is not None:
                    return j, why
            return None
        finally:
            self.check_seconds += time.perf_counter() - t0

    def poison(self, layout: list, table: list) -> tuple[int, str] | None:
        """Outputs poisoned once checked, where no input of a call can vary (module docstring, step 3); an output
        that cannot be overwritten is wrong, as one that cannot be read is (its call, why)."""
        if self.inputs.varies:
            return None
        try:
            poison_outputs(self.mem, layout, table)
        except Exception as exc:  # noqa: BLE001 - whatever the worker described: an output kept out of reach
            return 0, f"its output could not be overwritten between blocks ({type(exc).__name__}: {exc})"
        return None

    def release(self) -> None:
        self.request({"type": msg.RELEASE, "config": self.config}, "release of a timed block's outputs")

    def warm(self, p: dict) -> tuple[float, int, tuple[int, str] | None]:
        """The warm-up block (not a sample: it warms caches) and a sizing block of about ``block_seconds`` by the
        warm-up's measure: (the lower of their seconds per call, the bytes of a call's inputs and outputs, and the
        first wrong checked call as (its index, why) or None). The lower: a short block's fixed cost and a load
        only ever add to its time (under load a 3-call warm-up alone can read many times a call's time)."""
        calls, per_call, done = p["warmup"], math.inf, 0
        for _ in range(2):
            self.slots(calls)
            seconds, keys, layout, table = self.block(calls)
            wrong = self.verdict(keys, layout, table) or self.poison(layout, table)
            if wrong is not None:
                return per_call, 0, (done + wrong[0], wrong[1])
            self.release()
            per_call, done = min(per_call, seconds / calls), done + calls
            bytes_per_call = _bytes_per_call(self.inputs, layout, table[0])
            calls = _block_size(per_call, bytes_per_call, p)
            if calls <= 2 * p["warmup"]:
                break
        return per_call, bytes_per_call, None

    def size(self, k: int) -> None:
        """Input buffers for timed blocks of ``k`` calls."""
        if k != len(self.addresses):
            self.slots(k)

    def timed(self, k: int, made: tuple | None = None) -> tuple[float, tuple[int, str] | None]:
        """One timed block of ``k`` calls (on ``made`` inputs: ``block``), its outputs checked and released:
        (seconds by this side's clock, the first wrong checked call as (its index in the block, why), or None)."""
        seconds, keys, layout, table = self.block(k, made)
        wrong = self.check_block(keys, layout, table) or self.poison(layout, table)
        if wrong is None:
            self.release()
        return seconds, wrong


_INT64 = (-(1 << 63), (1 << 63) - 1)  # what a worker's table of outputs may hold (an int64 tensor's range)


def table_of(header: dict, payload, calls: int) -> list | None:
    """The table of a timed block's outputs in a worker's DONE: in its header (a JSON list), or for a large one
    (worker/executor.py ``HEADER_TABLE_INTS``) an int64 tensor in its payload; None unless it is ``calls`` rows
    of one length of 64-bit integers (``_is_table``)."""
    table = header.get("table")
    if table is None and isinstance(payload, dict) and isinstance(payload.get("table"), torch.Tensor):
        t = payload["table"]
        table = t.tolist() if t.dtype == torch.int64 and t.dim() == 2 else None
    return table if _is_table(table, calls) else None


def _is_table(table, calls: int) -> bool:
    """Whether a worker's table of a block's outputs is one: ``calls`` rows of 64-bit integers (what addresses,
    shapes and strides are), all of one length."""
    return (isinstance(table, list) and len(table) == calls
            and all(isinstance(row, list) and all(type(v) is int and _INT64[0] <= v <= _INT64[1] for v in row)
                    for row in table)
            and len({len(row) for row in table}) <= 1)


def _block_size(seconds_per_call: float, bytes_per_call: int, p: dict) -> int:
    k = math.ceil(p["block_seconds"] / max(seconds_per_call, 1e-9))
    k = min(k, MAX_BLOCK_CALLS, max(1, BLOCK_BYTES // max(1, bytes_per_call)))
    if p["max_reps"]:
        k = min(k, max(1, int(p["max_reps"]) // p["min_blocks"]))
    return max(1, k)


def _bytes_per_call(inputs: RevealedInputs, layout: list, row: list) -> int:
    n = sum(x.numel() * x.element_size() for x in inputs.originals if isinstance(x, torch.Tensor))
    pos = 0
    for d in layout:
        if "ndim" in d:
            k = int(d["ndim"])
            dtype = _DTYPES.get(d.get("dtype"), torch.float32)
            n += math.prod(max(0, v) for v in row[pos + 1:pos + 1 + k]) * dtype.itemsize
            pos += 1 + 2 * k
    return n


#: The blocks after the timed ones in which the worker's CPU time is sampled: until this many samples, or this many
#: seconds (sandbox/samples.py; every output checked as in a timed block).
SAMPLES_WANTED, SAMPLE_SECONDS = 400, 0.25


def sample_block_calls(k: int, bytes_per_call: int, per_call_ms: float, block_seconds: float) -> int:
    """Calls per sampled block: at least ``k`` and about ``block_seconds`` long, within the block limits (in a
    block of a few calls the call's way through torch outweighs the candidate's kernel in the samples)."""
    return min(MAX_BLOCK_CALLS, max(1, BLOCK_BYTES // max(1, bytes_per_call)),
               max(k, math.ceil(block_seconds / max(per_call_ms / 1e3, 1e-9))))


def _sample(run: _Run, k: int, sampler, bt: BlockTiming) -> None:
    """Blocks of ``k`` calls after the timed ones, sampled by ``sampler``: untimed, so the samples' interrupts
    cost the timing nothing; a wrong output is wrong as in a timed block. ``bt.samples``: what was sampled."""
    run.sampler, start = sampler, time.monotonic()
    try:
        while sampler.available and sum(sampler.counts.values()) < SAMPLES_WANTED:
            _, keys, layout, table = run.block(k)
            wrong = run.verdict(keys, layout, table)
            if wrong is not None:
                bt.timing, bt.wrong, bt.wrong_call = None, wrong[1], wrong[0]
                return
            run.release()
            if time.monotonic() - start > SAMPLE_SECONDS:
                break
    finally:
        run.sampler = None
    bt.samples = dict(sampler.counts) if sampler.available else None


def time_blocks(worker, config: str, originals: list, noise: float, params: dict, timeout: float,
                check=None, check_calls: int = 1, draws: list | None = None, sampler=None) -> BlockTiming:
    """Time configuration ``config`` (already run in ``worker``) by this side's clock. ``check(out_leaves,
    inputs)`` returns why an output is wrong for its inputs, or None; without it (the reference's timing) nothing
    is checked. ``draws`` (tasks/input_draws.py) makes integer inputs fresh per call. ``sampler``
    (sandbox/samples.Sampler of the worker): the blocks' CPU samples, in the result's ``samples``, from blocks
    after the timed ones (``_sample``). Raises TimedCallFailed if the candidate fails in a timed call, WorkerError
    if the worker breaks the exchange."""
    p = _params(params)
    run = _Run(worker, config, RevealedInputs(originals, noise, draws), timeout, check, max(1, check_calls))
    run.freezer.freeze()
    try:
        per_call, per_call_bytes, wrong = run.warm(p)
        if wrong is not None:
            return BlockTiming(wrong=wrong[1], wrong_call=wrong[0], check_seconds=run.check_seconds)
        k = _block_size(per_call, per_call_bytes, p)
        run.size(k)
        times, calls, total, start = [], 0, 0.0, time.monotonic()
        while True:
            seconds, wrong = run.timed(k)
            if wrong is not None:
                return BlockTiming(wrong=wrong[1], wrong_call=calls + wrong[0], blocks=len(times),
                                   check_seconds=run.check_seconds)
            times.append(seconds * 1e3 / k)
            calls, total = calls + k, total + seconds
            enough = len(times) >= p["min_blocks"] and calls >= p["min_reps"] and total >= p["min_seconds"]
            capped = bool(p["max_reps"]) and calls >= int(p["max_reps"]) and len(times) >= p["min_blocks"]
            if enough or capped or time.monotonic() - start > p["max_seconds"]:
                break
        t = summarize(times)
        bt = BlockTiming(timing=Timing(t.median_ms, t.iqr_ms, calls, t.times_ms), blocks=len(times),
                         check_seconds=run.check_seconds)
        if sampler is not None:  # blocks of block_seconds, whatever max_reps capped the timed ones to
            ks = sample_block_calls(k, per_call_bytes, t.median_ms, p["block_seconds"])
            run.size(ks)
            _sample(run, ks, sampler, bt)
        return bt
    finally:
        if run.freezer.frozen:
            run.freezer.thaw()

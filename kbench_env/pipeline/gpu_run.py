"""A GPU configuration's timed blocks as this side exchanges them with the worker (worker/gpu_executor.py): the
set-up of a block in the worker and the mapping of its buffers here, a block's inputs written and its replay asked
for on this side's clock, the outputs of chosen calls read and checked, or overwritten between blocks, and the
release. What a timing does with the blocks (how many, the bound on reported times, the set-up ahead) is
gpu_blocks.py's."""

from __future__ import annotations

import math
import random
import secrets
import time

import torch

from kbench_env.measure.inputs import fill_perturbed, input_stds
from kbench_env.pipeline.blocks import _DTYPES, TimedCallFailed
from kbench_env.pipeline.deferred_checks import DeferredChecks, Pool
from kbench_env.protocol import messages as msg
from kbench_env.protocol.cuda_ipc import IpcError, Mappings
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.tasks.input_draws import varies
from kbench_env.worker.gpu_executor import MAX_BLOCK

#: A block's input bytes past which this side's cached device memory is freed once its timing ends (``close``).
RETURN_STAGING_BYTES = 256 << 20
L2_FLUSH_BYTES = 256 << 20
_flush: dict = {}


class BlockInputs:
    """Per block, every call's inputs at once: [B, *shape] per input tensor, the configuration's input plus noise
    of ``noise`` times its standard deviation from a generator seeded with a secret drawn per block; an integer
    input with an ``IntegerDraw`` in ``draws`` (tasks/input_draws.py) drawn afresh for every call."""

    def __init__(self, originals: list, noise: float, block: int, device, draws: list | None = None):
        self.originals = [x.detach().to(device) if isinstance(x, torch.Tensor) else x for x in originals]
        self.stds = input_stds(self.originals)
        self.draws = list(draws or [None] * len(self.originals))
        self.varies = varies(self.originals, self.draws)
        self.noise, self.block = noise, block
        self.gen = torch.Generator(device=device)

    def draw(self) -> list:
        self.gen.manual_seed(secrets.randbits(63))
        out = []
        for i, (x, std) in enumerate(zip(self.originals, self.stds)):
            d = self.draws[i] if i < len(self.draws) else None
            if not isinstance(x, torch.Tensor):
                out.append(None)
            elif std is None and d is not None and d.varies and x.numel():
                out.append(d.draw((self.block, *x.shape), self.gen, x.dtype, x.device))
            elif std is None:
                out.append(x.unsqueeze(0).expand(self.block, *x.shape).contiguous())
            else:
                out.append(self._perturbed(x, std))
        return out

    def _perturbed(self, x: torch.Tensor, std: float) -> torch.Tensor:
        """``[block, *shape]`` copies of ``x``, each with its own noise (inputs.fill_perturbed: drawn a chunk of
        rows at a time, as a block's inputs take up to gigabytes on a device the other workers' memory fills)."""
        out = torch.empty((self.block, *x.shape), device=x.device, dtype=x.dtype)
        fill_perturbed([out], [x], secrets.randbits(62), self.noise, [std])
        return out

    def call(self, staged: list, b: int) -> list:
        return [x if t is None else t[b] for x, t in zip(self.originals, staged)]


def _flush_l2(device) -> None:
    if str(device) not in _flush:
        _flush[str(device)] = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    _flush[str(device)].zero_()


def _reply(worker, timeout: float, what: str) -> tuple[dict, object]:
    header, payload = worker.recv(timeout, what)
    if header["type"] == msg.ERROR:
        raise TimedCallFailed(header["message"])
    return header, payload



def mapped_leaves(layout: list, row, maps: Mappings, handle) -> list:
    """One call's output leaves (gpu_executor.describe's ``layout`` and table ``row``) as tensors mapped on the
    worker's memory, Python numbers as they are; ``handle(i)`` the i-th handle the worker named."""
    if not isinstance(row, list) or not isinstance(layout, list):
        raise IpcError("the worker described no output for this call")
    leaves, k = [], 0
    for d in layout:
        if not isinstance(d, dict) or "ndim" not in d:
            leaves.append(d.get("value") if isinstance(d, dict) else None)
            continue
        e = row[k] if k < len(row) else None
        k += 1
        n, dtype = d["ndim"], _DTYPES.get(d.get("dtype"))
        if dtype is None or not isinstance(n, int) or not isinstance(e, list) or len(e) != 2 + 2 * n or e[0] == -1:
            raise IpcError(f"an output has no readable layout ({d}, {e})")
        leaves.append(maps.tensor(handle(e[0]), e[1], dtype, e[2:2 + n], e[2 + n:]))
    return leaves


#: The steps of a block's set-up the worker reports (worker/gpu_executor.py's ``steps_ms``), which the trusted side
#: adds to the set-up's parts (a diagnosis: phases ``ahead_set_up_<step>``), with each step's CPU seconds of the
#: worker's thread (``steps_usage``: ``ahead_set_up_<step>_cpu``, where a step's wall time beyond it was a wait: the
#: driver, the device, other processes) and the candidate's own calls during the capture (``capture_calls``).
WORKER_STEPS = ("warmup", "call", "block_size", "buffers", "fill", "capture", "export")


def _seconds(ms, ceiling_s: float) -> float | None:
    """A worker's figure in ms as seconds in ``[0, ceiling_s]``, or None where it is not a finite number."""
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms):
        return min(max(float(ms) / 1e3, 0.0), max(ceiling_s, 0.0))
    return None


def worker_steps(steps_ms, ceiling_s: float, usage=None) -> dict:
    """The worker's account of its set-up (``steps_ms``: milliseconds by step; ``usage``: its ``steps_usage``, per
    step the thread's CPU ms first, and ``capture_calls``' ``sum_ms``) in seconds, of the known steps only, each a
    finite number in ``[0, ceiling_s]`` (the round trip this side measured): the worker is not trusted, and its
    account is a diagnosis that no figure of the reward reads."""
    steps_ms = steps_ms if isinstance(steps_ms, dict) else {}
    usage = usage if isinstance(usage, dict) else {}
    out = {}
    for name in WORKER_STEPS:
        figures = {name: steps_ms.get(name)}
        used = usage.get(name)
        if isinstance(used, list) and used:
            figures[f"{name}_cpu"] = used[0]
        for key, ms in figures.items():
            seconds = _seconds(ms, ceiling_s)
            if seconds is not None:
                out[key] = seconds
    calls = usage.get("capture_calls")
    seconds = _seconds(calls.get("sum_ms"), ceiling_s) if isinstance(calls, dict) else None
    if seconds is not None:
        out["capture_calls"] = seconds
    return out


def handle_at(handles: list, i) -> str:
    """The ``i``-th memory handle the worker named; IpcError for an index it did not name."""
    if not isinstance(i, int) or not 0 <= i < len(handles):
        raise IpcError(f"the worker named memory handle {i!r} of {len(handles)}")
    return handles[i]


def input_views(maps: Mappings, handles: list, inputs: list, entries, calls: int = 1) -> list:
    """Per input, a uint8 view of the worker's buffer for ``calls`` copies of it (``entries``: per input, the
    worker's ``[handle index, offset, bytes]``), None where there is nothing to write (not a tensor, or empty);
    WorkerError where the worker's buffers do not match the inputs."""
    if not isinstance(entries, list) or len(entries) != len(inputs):
        raise WorkerError("the worker's input buffers do not match the configuration's inputs")
    views = []
    for x, e in zip(inputs, entries):
        nbytes = calls * x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0
        if nbytes == 0:
            views.append(None)
            continue
        if not (isinstance(e, list) and len(e) == 3 and e[2] == nbytes):
            raise WorkerError(f"the worker's buffer for an input of {nbytes} bytes is {e!r}")
        views.append(maps.bytes_at(handle_at(handles, e[0]), e[1], nbytes))
    return views


def read_output(described: dict, device) -> list:
    """A correctness run's output leaves copied out of the worker's memory, where the worker left them
    (worker/loop._exported: ``layout``, ``row``, ``handles``); the worker's allocations are unmapped again."""
    handles = described.get("handles") if isinstance(described, dict) else None
    if not isinstance(handles, list) or not all(isinstance(h, str) for h in handles):
        raise IpcError("the worker named no memory handles for its output")
    maps = Mappings(device)
    try:
        out = [t.clone() if isinstance(t, torch.Tensor) else t
               for t in mapped_leaves(described.get("layout"), described.get("row"), maps,
                                      lambda i: handle_at(handles, i))]
        torch.cuda.synchronize(maps.device)  # copied before the views go
        return out
    finally:
        maps.close()


class _Run:
    """One configuration's blocks in one worker: the mapped buffers, the inputs, the checks."""

    def __init__(self, worker, config: str, originals: list, noise: float, timeout: float, check, check_calls: int,
                 device, backward: bool, defer: bool = False, draws: list | None = None):
        self.worker, self.config, self.timeout, self.backward = worker, config, timeout, backward
        self.draws = draws
        self.originals, self.noise, self.device = originals, noise, torch.device(device)
        self.check, self.check_calls = check, max(1, check_calls)
        self.checks = DeferredChecks(check, defer, Pool.of(device)) if check is not None else None
        self.maps = Mappings(self.device)
        self.rng = random.SystemRandom()
        self.dsts: list = []
        self.layout, self.outputs, self.handles = [], [], []
        self.check_seconds = 0.0
        self.parts: dict = {}

    def take_parts(self) -> dict:
        """Seconds of the set-ups' and blocks' parts (by name) since the last take, and start again."""
        parts, self.parts = self.parts, {}
        return parts

    def _part(self, name: str, seconds: float) -> None:
        self.parts[name] = self.parts.get(name, 0.0) + seconds

    def set_up(self, block: int, p: dict, shrink: dict | None = None) -> tuple[int, str]:
        """The block set up in the worker: ``block`` calls (0: the worker's choice), or, with ``shrink``
        (gpu_blocks.shrink_hint), as few as the worker makes them for a far slower candidate, no more than the
        hint's ``most``. (block size, method)."""
        t0 = time.perf_counter()
        header = {"type": msg.GPU_SLOTS, "config": self.config, "block": block, "backward": self.backward,
                  "warmup": p.get("warmup", 3)}
        if shrink is not None:
            header["shrink"] = shrink
        self.worker.send(header)
        ready, _ = _reply(self.worker, self.timeout, f"timed block set-up of configuration {self.config!r}")
        t1 = time.perf_counter()
        self._part("set_up_worker", t1 - t0)
        for name, seconds in worker_steps(ready.get("steps_ms"), t1 - t0, ready.get("steps_usage")).items():
            self._part(f"set_up_{name}", seconds)
        b, method = ready.get("block"), str(ready.get("method", ""))
        shrunk = shrink is not None and isinstance(b, int) and 1 <= b <= int(shrink["most"])
        if not isinstance(b, int) or not 1 <= b <= MAX_BLOCK or (block and b != block and not shrunk):
            raise WorkerError(f"the worker set up timed blocks of {b!r} calls ({block or 'its choice'} asked)")
        self.handles = list(ready.get("handles") or [])
        self.inputs = BlockInputs(self.originals, self.noise, b, self.device, self.draws)
        self.dsts = input_views(self.maps, self.handles, self.inputs.originals, ready.get("inputs") or [], b)
        self.layout, self.outputs = ready.get("layout") or [], ready.get("outputs") or []
        self.method = method
        self._part("set_up_map", time.perf_counter() - t1)
        return b, method

    def reset(self) -> None:
        """Unmap the block set up so far, before the worker sets up another of the configuration in its place."""
        self.dsts, self.inputs, self.layout, self.outputs, self.handles = [], None, [], [], []  # (views first)
        torch.cuda.synchronize(self.device)
        self.maps.close()
        self.maps = Mappings(self.device)

    def _handle(self, i) -> str:
        return handle_at(self.handles, i)

    def block(self, b: int) -> tuple[float, float, str, list, float]:
        """One block: (wall ms by this side's clock, reported ms, method, the staged inputs, ms of this side's
        staging by its own device events: the copy of the inputs and the L2 flush)."""
        try:
            staged = self.inputs.draw()
        except torch.OutOfMemoryError:  # this long-lived process's cached free blocks given back, then once more
            torch.cuda.empty_cache()
            staged = self.inputs.draw()
        stream = torch.cuda.current_stream(self.device)
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        ev0.record(stream)
        for dst, src in zip(self.dsts, staged):
            if dst is not None and dst.numel():
                dst.copy_(src.reshape(-1).view(torch.uint8))
        _flush_l2(self.device)
        ev1.record(stream)
        torch.cuda.synchronize(self.device)
        t1 = time.perf_counter()
        self.worker.send({"type": msg.GPU_BLOCK, "config": self.config, "backward": self.backward})
        header, _ = self.worker.recv(self.timeout, f"timed block of configuration {self.config!r}")
        t2 = time.perf_counter()
        wall = (t2 - t0) * 1e3
        self._part("block_stage", t1 - t0)
        self._part("block_worker", t2 - t1)
        if header["type"] == msg.ERROR:
            raise TimedCallFailed(header["message"])
        ms = header.get("ms")
        if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
            raise WorkerError(f"the worker reported a block time of {ms!r}")
        method = str(header.get("method", ""))
        if method != self.method:  # the slack depends on it: a block is what its set-up said
            raise WorkerError(f"the worker set up {self.method!r} blocks and ran one as {method!r}")
        if method == "eager-sync":
            self.layout, self.outputs = header.get("layout") or [], header.get("outputs") or []
            self.handles = list(header.get("handles") or [])
        return wall, float(ms), method, staged, ev0.elapsed_time(ev1)

    def verdict(self, staged: list, b: int, base: int) -> tuple[int, str] | None:
        """Read the outputs of ``check_calls`` calls of the block just run, chosen now, and check them (now, or
        kept for later: ``checks``); ``(call number, why)`` for the first found wrong. ``base``: the timed calls
        before this block."""
        if self.check is None:
            return None
        t0 = time.perf_counter()
        try:
            for j in sorted(self.rng.sample(range(b), min(self.check_calls, b))):
                try:
                    out = self.read(j)
                except Exception as exc:  # noqa: BLE001 - whatever the worker described: unreadable is wrong
                    return base + j, f"its output could not be read from the worker ({type(exc).__name__}: {exc})"
                wrong = self.checks.add(base + j, out, self.inputs.call(staged, j))
                if wrong is not None:
                    return wrong
            return None
        finally:
            self.check_seconds += time.perf_counter() - t0

    def poison(self, b: int) -> tuple[int, str] | None:
        """Where no input of a call can vary: every output of the block's ``b`` calls overwritten in the worker's
        memory (NaN, -1 for integers) before the next block; an output that cannot be is wrong (its call, why)."""
        if self.inputs.varies:
            return None
        for j in range(b):
            try:
                for t in self.leaves(j):
                    if isinstance(t, torch.Tensor) and t.numel():
                        t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else -1)
            except Exception as exc:  # noqa: BLE001 - whatever the worker described: out of reach is wrong
                return j, f"its output could not be overwritten between blocks ({type(exc).__name__}: {exc})"
        torch.cuda.synchronize(self.device)
        return None

    def read(self, j: int) -> list:
        """Call ``j``'s output leaves, copied out of the worker's memory."""
        return [t.clone() if isinstance(t, torch.Tensor) else t for t in self.leaves(j)]

    def leaves(self, j: int) -> list:
        """Call ``j``'s output leaves as tensors mapped on the worker's memory (Python numbers as they are)."""
        return mapped_leaves(self.layout, self.outputs[j] if j < len(self.outputs) else None, self.maps, self._handle)

    def close(self, release: bool) -> None:
        """Unmap the worker's memory; with ``release`` (the exchange went well) tell the worker to free it. Large
        staging goes back to the device, not into this long-lived process's cache: other workers need blocks."""
        staged = sum(d.numel() for d in self.dsts if d is not None)
        self.dsts, self.inputs = [], None
        torch.cuda.synchronize(self.device)
        self.maps.close()
        if staged >= RETURN_STAGING_BYTES:
            torch.cuda.empty_cache()
        if release:
            self.worker.send({"type": msg.RELEASE, "config": self.config})
            _reply(self.worker, self.timeout, "release of a timed block")

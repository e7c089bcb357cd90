"""The candidate's worker process: loads untrusted candidate code, runs it on inputs it is sent, times it.

Runs in its own process (started by sandbox.py), in its own session and scratch directory, with resource limits
and a scrubbed environment. It never receives the reference's output: it sends the candidate's outputs back and
the trusted parent compares them. Everything it sends is JSON plus raw tensor bytes (``pack``), or tensors serialised
with ``torch.save`` that the parent reads with ``weights_only=True``, so a hostile candidate cannot make the parent
unpickle objects.

This module must import nothing that runs candidate code at import; the clock is captured (timing.py) before the
candidate loads.
"""

from __future__ import annotations

import ctypes
import io
import json
import math
import os
import re
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import types
import warnings

import torch

from . import integrity, timing  # noqa: F401  (timing captures the clock before candidate code is loaded)
from .backends import get_backend
from .compare import compare_outputs, flatten_outputs
from .task import DTYPES

CANDIDATE_FILE = "candidate.py"
_COMMAND = re.compile(r"\S*(?:c\+\+|g\+\+|gcc|clang\+\+|nvcc|ld)\s+-.*")


# ---------------------------------------------------------------------- message framing (both sides use these)


_WIRE_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128, torch.int64,
    torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_RAW, _SAVED = b"R", b"S"  # payload encodings: raw tensor bytes under a JSON tree; torch.save (anything else)


class _NotRaw(Exception):
    """A payload value the raw encoding does not carry (torch.save does)."""


def _tree(obj, blobs: list):
    """``obj`` as JSON, its tensors replaced by references to ``blobs`` (contiguous CPU tensors)."""
    if isinstance(obj, torch.Tensor):
        if type(obj) is not torch.Tensor and not isinstance(obj, torch.nn.Parameter) or obj.layout != torch.strided:
            raise _NotRaw
        dtype = str(obj.dtype).removeprefix("torch.")
        if dtype not in _WIRE_DTYPES:
            raise _NotRaw
        blobs.append(obj.detach().contiguous())  # copied into the message from where it lies (no staging copy)
        return {"t": [len(blobs) - 1, dtype, list(obj.shape)]}
    if isinstance(obj, (list, tuple)):
        return {"l" if isinstance(obj, list) else "u": [_tree(x, blobs) for x in obj]}
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {"d": {k: _tree(v, blobs) for k, v in obj.items()}}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise _NotRaw


def _untree(node, body: memoryview, blobs: list):
    """The value ``_tree`` encoded; each tensor is a copy of its bytes in ``body`` (``blobs``: offset, length).
    What the worker sends is untrusted: every reference, dtype, shape and length is checked."""
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError("malformed payload")
    (kind, val), = node.items()
    if kind == "t":
        index, dtype, shape = val
        dt = _WIRE_DTYPES[dtype]
        if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
            raise ValueError("malformed tensor shape")
        off, length = blobs[index]
        if length != math.prod(shape) * dt.itemsize or off + length > len(body):
            raise ValueError("tensor bytes do not match its shape")
        if not length:
            return torch.empty(shape, dtype=dt)
        with warnings.catch_warnings():  # the received bytes are read-only; only read here, then copied
            warnings.simplefilter("ignore")
            src = torch.frombuffer(body, dtype=torch.uint8, count=length, offset=off)
        return src.clone().view(dt).reshape(shape)
    if kind in ("l", "u"):
        items = [_untree(x, body, blobs) for x in val]
        return items if kind == "l" else tuple(items)
    if kind == "d":
        return {str(k): _untree(v, body, blobs) for k, v in val.items()}
    if kind == "v" and (val is None or isinstance(val, (bool, int, float, str))):
        return val
    raise ValueError("malformed payload")


def pack(header: dict, payload=None):
    """Frame a message: 4-byte header length, JSON header, optional payload, as one buffer for
    ``Connection.send_bytes``. Tensors, lists, tuples, dicts and scalars travel as a JSON tree followed by each
    tensor's raw bytes (one copy into the buffer; on an H100 ``torch.save`` of a 64 MiB input took ~0.24 s to send
    and ~0.13 s to read back, bench/results/throughput_h100.md); anything else as ``torch.save``."""
    h = json.dumps(header).encode()
    head = struct.pack("<I", len(h)) + h
    if payload is None:
        return head
    blobs: list = []
    try:
        tree = _tree(payload, blobs)
    except _NotRaw:
        buf = io.BytesIO()
        buf.write(head + _SAVED)
        torch.save(payload, buf)
        return buf.getbuffer()
    sizes = [b.numel() * b.element_size() for b in blobs]
    offsets = [sum(sizes[:k]) for k in range(len(sizes))]
    meta = json.dumps({"tree": tree, "blobs": [[o, n] for o, n in zip(offsets, sizes)]}).encode()
    prefix = head + _RAW + struct.pack("<I", len(meta)) + meta
    out = torch.empty(len(prefix) + sum(sizes), dtype=torch.uint8)
    out[: len(prefix)] = torch.frombuffer(bytearray(prefix), dtype=torch.uint8)
    for b, o, n in zip(blobs, offsets, sizes):
        if n:  # torch's copy: several threads, and a device tensor comes straight from the device
            out[len(prefix) + o : len(prefix) + o + n].copy_(b.reshape(-1).view(torch.uint8))
    return memoryview(out.numpy())


def unpack(data) -> tuple[dict, object]:
    view = memoryview(data)
    (n,) = struct.unpack("<I", view[:4])
    header = json.loads(bytes(view[4 : 4 + n]).decode())
    body = view[4 + n :]
    if not len(body):
        return header, None
    kind, body = bytes(body[:1]), body[1:]
    if kind == _SAVED:
        return header, torch.load(io.BytesIO(body), weights_only=True)
    if kind != _RAW:
        raise ValueError("unknown payload encoding")
    (m,) = struct.unpack("<I", body[:4])
    meta = json.loads(bytes(body[4 : 4 + m]).decode())
    blobs = [(int(o), int(k)) for o, k in meta["blobs"]]
    if any(o < 0 or k < 0 for o, k in blobs):
        raise ValueError("malformed payload")
    return header, _untree(meta["tree"], body[4 + m :], blobs)


# ---------------------------------------------------------------------- process set-up


def _confine(job: dict) -> None:
    """Confine this process before any candidate code runs (confine.py: namespaces, Landlock, capabilities,
    seccomp, limits, scrubbed environment, audit hook)."""
    from . import confine

    confine.apply(job)
    torch.set_num_threads(job["threads"])


# ---------------------------------------------------------------------- error text


def format_exception(exc: BaseException, build_root: str = "") -> str:
    """The exception as a person needs it: the candidate's frames and the message, paths made stable."""
    if isinstance(exc, SystemExit):
        return f"the candidate called sys.exit({exc.code!r})"
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if f.filename == CANDIDATE_FILE]
    lines = []
    if frames:
        lines.append("Traceback (candidate code):")
        for f in frames[-4:]:
            lines.append(f"  line {f.lineno}, in {f.name}: {(f.line or '').strip()}")
    msg = f"{type(exc).__name__}: {exc}"
    lines.append(trim_compiler_output(msg, build_root))
    return "\n".join(lines)


def trim_compiler_output(text: str, build_root: str = "", max_lines: int = 40) -> str:
    """Keep the compiler's own messages (errors first), drop build noise and random paths."""
    if build_root:
        text = text.replace(build_root, "<build>")
    # Compiler command lines (hundreds of characters of flags) say nothing the candidate can act on.
    lines = [_COMMAND.sub("<compiler command>", line) if (" -isystem " in line or " -shared " in line) else line
             for line in text.splitlines()]
    if len(lines) <= max_lines:
        return "\n".join(lines)
    key = [i for i, line in enumerate(lines) if "error" in line.lower() and "error: command" not in line.lower()]
    keep: list[int] = []
    for i in key:
        keep.extend(range(max(0, i - 2), min(len(lines), i + 4)))
    keep = sorted(set(keep))[:max_lines] or list(range(max_lines))
    out = [lines[0]] if keep[0] != 0 else []
    prev = -1
    for i in keep:
        if prev >= 0 and i != prev + 1:
            out.append("  ...")
        out.append(lines[i])
        prev = i
    out.append(f"  ... ({len(lines) - len(keep)} more lines)")
    return "\n".join(out)


# ---------------------------------------------------------------------- the worker loop


def _load_candidate(source: str) -> types.ModuleType:
    mod = types.ModuleType("candidate")
    mod.__file__ = CANDIDATE_FILE
    sys.modules["candidate"] = mod
    with open(CANDIDATE_FILE, "w") as f:  # so tracebacks and inspect can show lines
        f.write(source)
    exec(compile(source, CANDIDATE_FILE, "exec"), mod.__dict__)
    if not isinstance(getattr(mod, "ModelNew", None), type):
        raise RuntimeError("the source ran but defines no class ModelNew")
    return mod


def _to_cpu(out):
    if isinstance(out, torch.Tensor):
        return out.detach().cpu() if out.device.type != "cpu" else out.detach().clone()
    if isinstance(out, (list, tuple)):
        return [_to_cpu(o) for o in out]
    if isinstance(out, (int, float, bool)) or out is None:
        return out
    raise TypeError(f"forward returned a {type(out).__name__}; return a tensor (or a tuple of tensors)")


def _subclass_outputs(out) -> set:
    """Names of tensor subclasses among forward's outputs: a subclass can compute its values when they are read
    (by the fingerprint, the copy back or the comparison), outside the timed region."""
    return {type(x).__name__ for x in flatten_outputs(out) if isinstance(x, torch.Tensor) and type(x) is not torch.Tensor}


def _clone(xs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _same(after: list, before: list) -> bool:
    """Bit-for-bit equal (NaN payloads aside): forward did not write into its inputs."""
    for a, b in zip(after, before):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return False
            if not torch.equal(a, b) and not (b.is_floating_point() and torch.equal(a.nan_to_num(), b.nan_to_num())):
                return False
    return True


def _op_namespaces() -> set:
    return {name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names()}


def _device_inputs(xs, device):
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _warm_up(device: str, job: dict) -> tuple[float, float]:
    """Start CUDA, and the profiler the forward audit uses, before the candidate loads: trusted one-off work that
    otherwise lands in the candidate's turn on the device, and done here overlaps other candidates' turns. On an
    H100 (2026-11-23, bench/results/throughput_h100.md): without it, 1.4-3.8 s of a cached evaluation's 3-6 s check
    phase went to the audit's first profile; with it, the check phase took 1.4-1.8 s and the warm-up 6.5-6.8 s.
    KBENCH_WORKER_WARMUP=0 in the parent turns it off (an A/B knob). Returns the seconds it took, and of them
    CUDA's start (context and a first kernel). On every device, the message framing's first use (a tensor
    payload through ``pack`` and ``unpack``: torch.save's and torch.load's set-up, ~2 ms on the CPU) is done here
    too, so a spare worker's first configuration does not pay it."""
    t0 = time.perf_counter()
    unpack(pack({"type": "warm-up"}, {"x": [torch.zeros(2)]}))
    if not device.startswith("cuda"):
        return time.perf_counter() - t0, 0.0
    t_cuda = time.perf_counter()
    torch.cuda.init()
    x = torch.ones(256, device=device)
    torch.cuda.synchronize(device)
    cuda_start = time.perf_counter() - t_cuda
    if job.get("audit", True):
        warm = integrity.ForwardAudit(set(), lambda: 0, device, mode=job.get("audit_mode", "kernels"))
        with warm:
            x.add_(1)
            torch.cuda.synchronize(device)
        warm.report()
    torch.cuda.synchronize(device)
    return time.perf_counter() - t0, cuda_start


def main(conn, job: dict) -> None:
    """Entry point of the worker process (see sandbox.Worker). Requests: run, time, wallclock, calibrate."""
    _confine(job)
    # torch.compile (the reference's baseline) writes its caches under TMPDIR: keep them in the scratch directory.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(job["scratch"], "inductor"))
    tempfile.tempdir = None  # re-read TMPDIR, which the confinement pointed at the scratch directory
    integrity.pin_precision_flags()
    backend = get_backend(job["backend"])
    device = job["device"]
    send = lambda header, payload=None: conn.send_bytes(pack(header, payload))  # noqa: E731
    send({"type": "hello", "pid": os.getpid()})
    warmup_seconds, cuda_start_seconds = _warm_up(device, job) if job.get("warmup", True) else (0.0, 0.0)
    source = job["source"]
    if source is None:  # a spare (sandbox.SpareWorkers): wait for a candidate, or leave
        if not conn.poll(job.get("spare_idle_s", 60.0)):
            return
        header, _ = unpack(conn.recv_bytes())
        if header.get("type") != "source":
            return
        source = header["source"]
        warmup_seconds = cuda_start_seconds = 0.0  # done while idle: no part of this candidate's step
    # what the worker times and checks with, before any candidate code runs (integrity.HarnessGuard)
    guard = integrity.HarnessGuard(extra=[(sys.modules[__name__], "compare_outputs"), (type(backend), "time_calls"),
                                          (type(backend), "sync"), (type(backend), "poison")])
    t0 = time.perf_counter()
    namespaces_before = _op_namespaces()
    try:
        backend.prepare_worker(job["build_root"])
        mod = _load_candidate(source)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a message
        stage = "build" if backend.last_build_failed() else "load"
        send({"type": "error", "stage": stage, "message": format_exception(exc, job["build_root"])})
        return
    own_namespaces = _op_namespaces() - namespaces_before
    send({"type": "loaded", "build_seconds": time.perf_counter() - t0, "cached": backend.build_was_cached(),
          "warmup_seconds": warmup_seconds, "cuda_start_seconds": cuda_start_seconds,
          "harness_patched": guard.changed()})
    models: dict = {}
    originals: dict = {}  # config -> the inputs as received (timing input sets are derived from them)
    # config -> the inputs forward was given in its correctness runs, alive until that configuration is timed, so
    # the timing's buffers never take their addresses (a cache keyed on pointers would find hits; cuda.time_calls)
    handed: dict = {}
    while True:
        header, payload = unpack(conn.recv_bytes())
        kind = header["type"]
        grad = torch.enable_grad() if header.get("backward") else torch.no_grad()
        busy0 = time.perf_counter()
        send = lambda h, p=None, _t=busy0: conn.send_bytes(pack({**h, "busy_s": time.perf_counter() - _t,  # noqa: E731
                                                                 "harness_patched": guard.changed()}, p))
        try:
            if kind == "run":
                cfg = header["config"]
                dtype = DTYPES[header["dtype"]]
                torch.manual_seed(header["init_seed"])
                model = mod.ModelNew(*payload["init_inputs"])
                if isinstance(model, torch.nn.Module):
                    model = model.to(device=device, dtype=dtype).eval()
                if header.get("compile"):  # the torch.compile baseline (reference workers only)
                    model = torch.compile(model)
                models[cfg] = model
                originals[cfg] = _device_inputs(payload["inputs"], device)
                inputs = _clone(originals[cfg])
                again = _clone(originals[cfg])
                handed[cfg] = (inputs, again)
                flags_before = integrity.precision_flags()
                backend.poison(device)
                with grad:
                    audit = integrity.ForwardAudit(own_namespaces, backend.extension_calls, device,
                                                   enabled=job.get("audit", True),
                                                   mode=job.get("audit_mode", "kernels"))
                    with audit:
                        out = model(*inputs)
                        backend.sync()
                    lazy = _subclass_outputs(out)  # before anything reads the output
                    full = header.get("reply", "full") == "full"  # the reference's workers send no output
                    out_cpu = _to_cpu(out) if full else None  # what forward returned, before anything else runs
                    backend.poison(device)
                    out2 = model(*again)
                    backend.sync()
                    lazy |= _subclass_outputs(out2)
                # The second run and the inputs are compared here rather than sent back (each GPU-sized tensor sent
                # is a device-host copy and a serialisation through the pipe): a candidate that could subvert this
                # could equally have sent doctored copies, so nothing is lost; the output itself is compared on the
                # trusted side.
                again_mismatch = None
                if full:  # (the reference's workers skip the checks: their answer is the reference)
                    again_mismatch, _ = compare_outputs(out2, out, dtype, header.get("tolerance"))
                del out, out2
                reply = {"out": out_cpu} if full else None
                send({"type": "output", "config": cfg, "audit": audit.report(),
                      "flags_changed": integrity.changed_flags(flags_before, integrity.precision_flags()),
                      "nondeterministic": again_mismatch.message if again_mismatch is not None else None,
                      "inputs_modified": full and not _same(inputs, originals[cfg]),
                      "lazy_output": sorted(lazy)}, reply)
            elif kind == "time":
                model = models[header["config"]]
                make_inputs = integrity.TimedInputs(originals.pop(header["config"]), header["base_seed"],
                                                    header["sets"], header["seed"], header["noise"]).materialise()
                fps: list = []
                lazy = set()
                fingerprint = integrity.Fingerprint(header.get("fingerprint_seed", 0))  # (reference timings: unchecked)

                def on_block(j0, outs, static):
                    for o in outs:
                        lazy.update(_subclass_outputs(o))
                    fps.extend(fingerprint.pending_block(outs, static=static and not lazy))

                with grad:
                    t = backend.time_calls(model, make_inputs, on_block=on_block, **header.get("params", {}))
                handed.pop(header["config"], None)
                rows, counts = integrity.fingerprint_table(fps)
                send({"type": "timing", "config": header["config"], **t.to_dict(), "times_ms": t.times_ms,
                      "fingerprint_counts": counts, "lazy_output": sorted(lazy)}, {"fingerprints": rows})
            elif kind == "wallclock":
                model = models[header["config"]]
                sets = [integrity.perturb(_device_inputs(payload["inputs"], device), header["seed"] + j, header["noise"])
                        for j in range(header["calls"])]
                backend.sync()
                send({"type": "ready"})
                unpack(conn.recv_bytes())  # "go": the parent starts its clock now
                with grad:
                    for inputs in sets:
                        model(*inputs)
                backend.sync()
                send({"type": "done"})
            elif kind == "calibrate":
                send({"type": "calibration", **backend.calibrate(device, header.get("dtypes", ["float32"]))})
            else:
                send({"type": "error", "stage": "protocol", "message": f"unknown request {kind!r}"})
        except BaseException as exc:  # noqa: BLE001
            traceback.clear_frames(exc.__traceback__)  # free what the failing frames hold (a memory bomb's hoard)
            send({"type": "error", "stage": {"run": "run", "calibrate": "calibrate"}.get(kind, "timing"),
                  "config": header.get("config"), "message": format_exception(exc, job["build_root"])})
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                return

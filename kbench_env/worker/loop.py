"""The candidate's worker process: loads untrusted candidate code and runs it on inputs it is sent, or on
inputs the trusted side writes into its buffers (the timed blocks: worker/executor.py on the CPU,
worker/gpu_executor.py on a GPU), leaving the outputs where the trusted side reads them.

Runs in its own process (started by sandbox/worker_process.py), in its own session and scratch directory, with
resource limits and a scrubbed environment. It never receives the reference's output: it sends the candidate's outputs back and
the trusted parent compares them. Everything it sends is JSON plus raw tensor bytes (wire.pack), or tensors
serialised with ``torch.save`` that the parent reads with ``weights_only=True``, so a hostile candidate cannot make
the parent unpickle objects; the parent bounds what it reads (wire.py).

This module must import nothing that runs candidate code at import; the clock an eagerly run GPU block is timed by
is captured (measure/stats.py) before the candidate loads.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
import types

import torch

from kbench_env.machine.device import Device
from kbench_env.measure import stats  # noqa: F401  (it captures the clock before candidate code is loaded)
from kbench_env.worker import allocator, audit, compile_gate, executor, gpu_executor
from kbench_env.backends import get_backend
from kbench_env.builder.errors import trim_compiler_output
from kbench_env.measure.compare import compare_outputs, flatten_outputs
from kbench_env.measure.inputs import perturb
from kbench_env.tasks.task import DTYPES
from kbench_env.protocol import messages as msg
from kbench_env.protocol.cuda_ipc import Exporter, IpcError
from kbench_env.sandbox.confine import confinement
from kbench_env.protocol.wire import pack, unpack  # noqa: F401  (the message framing, both sides': wire.py)
from kbench_env.worker import cuda_wait, dispatch_records, record_switches
from kbench_env.worker.builds import BuildClient

CANDIDATE_FILE = "candidate.py"


# ---------------------------------------------------------------------- process set-up


def _confine(job: dict, conn) -> None:
    """Confine this process before any candidate code runs (sandbox/confine/: inherited descriptors, namespaces,
    Landlock, capabilities, seccomp, limits, scrubbed environment, audit hook); ``conn`` is its protocol channel."""
    confinement.apply(job, keep_fds=[conn.fileno()])
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
    text = f"{type(exc).__name__}: {exc}"
    lines.append(trim_compiler_output(text, build_root))
    return "\n".join(lines)


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
    (by the copy back or the comparison), outside the timed region."""
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


def select_device(device: str) -> None:
    """Make ``cuda:N`` this process's current device. What acts on the current device rather than on a tensor's
    (events, streams, graph capture, the driver calls of CUDA IPC, the calibration's timings) must run on the
    worker's own GPU: on a host of several GPUs, an evaluator of cuda:1 has its workers on GPU 1."""
    dev = Device.parse(device)
    if dev.is_cuda and dev.index is not None:
        torch.cuda.set_device(dev.index)


def _warm_up(device: str, job: dict) -> tuple[float, float]:
    """Start CUDA, and the profiler the forward audit uses, before the candidate loads: trusted one-off work that
    otherwise lands in the candidate's turn on the device (the audit's first profile costs seconds on a GPU), and
    done here overlaps other candidates' turns. KBENCH_WORKER_WARMUP=0 in the
    parent turns it off. Returns the seconds it took, and of them CUDA's start (context and a first kernel). On
    every device, the message framing's first use (a tensor payload through ``pack`` and ``unpack``: torch.save's
    and torch.load's set-up) is done here too, so a spare worker's first configuration does not pay it."""
    t0 = time.perf_counter()
    unpack(pack({"type": msg.WARM_UP}, {"x": [torch.zeros(2)]}))
    if not Device.parse(device).is_cuda:
        return time.perf_counter() - t0, 0.0
    t_cuda = time.perf_counter()
    torch.cuda.init()
    select_device(device)
    x = torch.ones(256, device=device)
    torch.cuda.synchronize(device)
    cuda_start = time.perf_counter() - t_cuda
    job["cuda_wait"] = cuda_wait.start(job.get("blocking_sync", True))  # (its checks' waits asleep: cuda_wait.py)
    if job.get("audit", True):
        warm = audit.ForwardAudit(set(), lambda: 0, device, mode=job.get("audit_mode", "kernels"))
        with warm:
            x.add_(1)
            torch.cuda.synchronize(device)
        warm.report()
    torch.cuda.synchronize(device)
    return time.perf_counter() - t0, cuda_start


class _Session:
    """What the request handlers share once the candidate is loaded: its module, the models and the inputs per
    configuration."""

    def __init__(self, conn, job: dict, backend, mod: types.ModuleType, own_namespaces: set, guard):
        self.conn, self.job, self.backend, self.mod = conn, job, backend, mod
        self.device = job["device"]
        self.own_namespaces = own_namespaces
        self.models: dict = {}
        self.originals: dict = {}  # config -> the inputs as received (the timed blocks' buffers are shaped by them)
        # config -> the inputs forward was given in its correctness runs, kept alive so no timed block's buffer
        # takes their addresses (a cache keyed on pointers would find hits while a GPU block is captured)
        self.handed: dict = {}
        self.slots: dict = {}  # config -> the input buffers of its timed blocks (executor.py)
        self.slot_files: dict = {}  # config -> the memfd its input buffers are on (executor.py)
        self.kept = None  # the last timed block's outputs, until the trusted side has read them
        self.check_output = None  # the last correctness run's output where the trusted side reads it (_exported)
        self.gpu: dict = {}  # config -> its GPU timed block (gpu_executor.py); several set up ahead at once
        self.guard = guard  # audit.AuditGuard, made before the candidate loaded


def _run(s: _Session, header: dict, payload, grad, send) -> None:
    """RUN: make the configuration's model, run forward once audited and once more, reply OUTPUT."""
    cfg, device, backend = header["config"], s.device, s.backend
    dtype = DTYPES[header["dtype"]]
    torch.manual_seed(header["init_seed"])
    model = s.mod.ModelNew(*payload["init_inputs"])
    if isinstance(model, torch.nn.Module):
        model = model.to(device=device, dtype=dtype).eval()
    if header.get("compile"):  # the torch.compile baseline (reference workers only; compile_gate.py)
        model = compile_gate.compile_model(model, bool(header.get("gate")), s.conn, send, backend.sync)
    s.models[cfg] = model
    given = payload["inputs"]
    if header.get("input_slots") is not None:  # large inputs: written by the trusted side into this worker's memory
        given = _input_slots(s, header["input_slots"], given, send)
    s.originals[cfg] = _device_inputs(given, device)
    inputs = _clone(s.originals[cfg])
    again = _clone(s.originals[cfg])
    s.handed[cfg] = (inputs, again)
    flags_before = audit.precision_flags()
    backend.poison(device)
    with grad:
        forward_audit = audit.ForwardAudit(s.own_namespaces, backend.extension_calls, device,
                                           enabled=s.job.get("audit", True), mode=s.job.get("audit_mode", "kernels"))
        with forward_audit:
            out = model(*inputs)
            backend.sync()
        lazy = _subclass_outputs(out)  # before anything reads the output
        full = header.get("reply", "full") == "full"  # the reference's workers send no output
        # what forward returned, before anything else runs: a device copy left where the trusted side reads it
        # (large outputs on a GPU, ``ipc_min`` bytes and up), else a host copy sent through the pipe
        shared = _exported(out, header.get("ipc_min")) if full else None
        out_cpu = _to_cpu(out) if full and shared is None else None
        backend.poison(device)
        out2 = model(*again)
        backend.sync()
        lazy |= _subclass_outputs(out2)
    # The second run and the inputs are compared here rather than sent back (each GPU-sized tensor sent is a
    # device-host copy and a serialisation through the pipe): a candidate that could subvert this could equally
    # have sent doctored copies, so nothing is lost; the output itself is compared on the trusted side.
    again_mismatch = None
    if full:  # (the reference's workers skip the checks: their answer is the reference)
        again_mismatch, _ = compare_outputs(out2, out, dtype, header.get("tolerance"))
    del out, out2
    if not full and Device.parse(device).is_cuda:
        # A reference's worker may wait a while for its timing (run ahead: reference_start.py): what its run left in
        # this process's cache (outputs, torch.compile's buffers) goes back to the device for the candidates'.
        torch.cuda.empty_cache()
    s.check_output = shared[0] if shared is not None else None  # alive until the next request
    reply = {"out": out_cpu} if full and shared is None else None
    send({"type": msg.OUTPUT, "config": cfg, "ipc": shared[1] if shared is not None else None,
          "audit": forward_audit.report(), "audit_patched": s.guard.changed(),
          "flags_changed": audit.changed_flags(flags_before, audit.precision_flags()),
          "nondeterministic": again_mismatch.message if again_mismatch is not None else None,
          "inputs_modified": full and not _same(inputs, s.originals[cfg]),
          "lazy_output": sorted(lazy)}, reply)


def _input_slots(s: _Session, slots: list, given: list, send) -> list:
    """A RUN's inputs the trusted side writes into this worker's GPU memory rather than sending through the pipe:
    per input, ``[dtype, shape]`` (a tensor made here, its place reply READY names) or None (the value sent).
    Waits for GO: the trusted side has written them."""
    made, exporter = [], Exporter()
    for spec, value in zip(slots, given):
        if spec is None:
            made.append(value)
            continue
        dtype = getattr(torch, str(spec[0]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"an input slot of unknown dtype {spec[0]!r}")
        made.append(torch.empty([int(n) for n in spec[1]], dtype=dtype, device=s.device))
    where = gpu_executor.buffer_entries([t if spec is not None else None for t, spec in zip(made, slots)], exporter)
    torch.cuda.synchronize(s.device)  # allocated before the trusted side writes
    send({"type": msg.READY, "slots": where, "handles": exporter.handles})
    unpack(s.conn.recv_bytes())  # GO: written
    return made


def _exported(out, ipc_min) -> tuple | None:
    """``(kept, description)`` of a correctness run's output for the trusted side to read from this worker's memory
    (protocol/cuda_ipc.py): ``kept`` a device copy of ``out`` (a second run and the poisoning of free memory come
    before the read), ``description`` its layout, its one row of where each leaf lies, and the allocations'
    handles (gpu_executor.describe's form). None, so that the output goes through the pipe, off a GPU, below
    ``ipc_min`` bytes, or where a leaf is not a plain, non-empty CUDA tensor (a Python number among them too)."""
    if not isinstance(ipc_min, int) or isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
        return None
    leaves = flatten_outputs(out)
    if not leaves or any(type(x) is not torch.Tensor or not x.is_cuda or not x.numel() for x in leaves) \
            or sum(x.numel() * x.element_size() for x in leaves) < ipc_min:
        return None
    kept = [x.detach().clone() for x in leaves]
    exporter = Exporter()
    try:
        layout, table = gpu_executor.describe([kept], exporter)
    except IpcError:  # memory the driver will not export: the pipe carries it
        return None
    return kept, {"layout": layout, "row": table[0], "handles": exporter.handles}


def _wallclock(s: _Session, header: dict, payload, grad, send) -> None:
    """WALLCLOCK: make the inputs, reply READY, wait for GO (the trusted side's clock), run, reply DONE."""
    model = s.models[header["config"]]
    sets = [perturb(_device_inputs(payload["inputs"], s.device), header["seed"] + j, header["noise"])
            for j in range(header["calls"])]
    s.backend.sync()
    send({"type": msg.READY})
    unpack(s.conn.recv_bytes())  # GO: the parent starts its clock now
    with grad:
        for inputs in sets:
            model(*inputs)
    s.backend.sync()
    send({"type": msg.DONE})


def _calibrate(s: _Session, header: dict, payload, grad, send) -> None:
    """CALIBRATE: measure the device's capacity; reply CALIBRATION."""
    send({"type": msg.CALIBRATION, **s.backend.calibrate(s.device, header.get("dtypes", ["float32"]))})


#: The requests a loaded worker serves, by kind.
HANDLERS = {msg.RUN: _run, msg.WALLCLOCK: _wallclock, msg.CALIBRATE: _calibrate,
            **executor.HANDLERS, **gpu_executor.HANDLERS}
#: The ERROR stage of a request that failed (any other: "timing").
_ERROR_STAGE = {msg.RUN: "run", msg.CALIBRATE: "calibrate"}


def _set_up(conn, job: dict) -> None:
    """Confine the process and pin what candidate code must find as it is."""
    _confine(job, conn)
    if Device.parse(job["device"]).is_cpu:
        allocator.hold_steady()  # every timed block's outputs in pages already mapped (allocator.py)
    # torch.compile (the reference's baseline) writes its caches under TMPDIR: keep them in the scratch directory.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(job["scratch"], "inductor"))
    tempfile.tempdir = None  # re-read TMPDIR, which the confinement pointed at the scratch directory
    audit.pin_precision_flags()
    record_switches.remove()  # after the audit hook is installed: a refused switch is reported through it
    dispatch_records.install()  # the dispatcher's record-free entries from Python get a record


def _await_source(conn, job: dict) -> str | None:
    """A spare's candidate (sandbox.SpareWorkers): the SOURCE request, or None when it leaves idle."""
    if not conn.poll(job.get("spare_idle_s", 60.0)):
        return None
    header, _ = unpack(conn.recv_bytes())
    if header.get("type") != msg.SOURCE:
        return None
    return header["source"]


def main(conn, job: dict) -> None:
    """Entry point of the worker process (see sandbox.Worker): set up, build and load the candidate, then serve
    requests (HANDLERS) until the parent closes the connection."""
    _set_up(conn, job)
    backend = get_backend(job["backend"])
    device = job["device"]
    send = lambda header, payload=None: conn.send_bytes(pack(header, payload))  # noqa: E731
    send({"type": msg.HELLO, "pid": os.getpid()})
    if job.get("warmup", True):
        warmup_seconds, cuda_start_seconds = _warm_up(device, job)
    else:
        select_device(device)
        warmup_seconds = cuda_start_seconds = 0.0
    if job.get("compile_warm"):
        compile_gate.warm()
    cpu_started = time.process_time()  # (since the fork: the start's CPU, sandbox/cpu_tally.py's stages)
    source = job["source"]
    if source is None:  # a spare: wait for a candidate, or leave
        source = _await_source(conn, job)
        if source is None:
            return
        warmup_seconds = cuda_start_seconds = 0.0  # done while idle: no part of this candidate's step
    # what the forward audit and the in-worker checks run on, before any candidate code runs (audit.AuditGuard)
    guard = audit.AuditGuard(extra=[(sys.modules[__name__], "compare_outputs"), (sys.modules[__name__], "_same"),
                                        (sys.modules[__name__], "_subclass_outputs")])
    t0 = time.perf_counter()
    namespaces_before = _op_namespaces()
    builds = BuildClient(conn)
    try:
        # The candidate's builds are made by the trusted builder (worker/builds.py); this process loads them.
        backend.prepare_worker(builds)
        mod = _load_candidate(source)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a message
        stage = "build" if builds.failed else "load"
        send({"type": msg.ERROR, "stage": stage, "message": format_exception(exc, job["build_root"])})
        return
    own_namespaces = _op_namespaces() - namespaces_before
    send({"type": msg.LOADED, "build_seconds": time.perf_counter() - t0, "cached": builds.cached(), "cuda_wait":
          job.get("cuda_wait"), "warmup_seconds": warmup_seconds, "cuda_start_seconds": cuda_start_seconds,
          "cpu_seconds": {"warm_up": cpu_started, "loaded": time.process_time()}})
    _serve(_Session(conn, job, backend, mod, own_namespaces, guard))


def _serve(s: _Session) -> None:
    """Answer requests one by one; every failure is an ERROR reply, and the candidate's exit ends the worker."""
    while True:
        header, payload = unpack(s.conn.recv_bytes())
        kind = header["type"]
        s.check_output = None  # the trusted side has read it (it reads a run's output before its next request)
        grad = torch.enable_grad() if header.get("backward") else torch.no_grad()
        busy0 = time.perf_counter()
        send = lambda h, p=None, _t=busy0: s.conn.send_bytes(pack({**h, "busy_s": time.perf_counter() - _t}, p))  # noqa: E731
        try:
            handler = HANDLERS.get(kind)
            if handler is None:
                send({"type": msg.ERROR, "stage": "protocol", "message": f"unknown request {kind!r}"})
            else:
                with cuda_wait.during(kind):
                    handler(s, header, payload, grad, send)
        except BaseException as exc:  # noqa: BLE001
            traceback.clear_frames(exc.__traceback__)  # free what the failing frames hold (a memory bomb's hoard)
            send({"type": msg.ERROR, "stage": _ERROR_STAGE.get(kind, "timing"),
                  "config": header.get("config"), "message": format_exception(exc, s.job["build_root"])})
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                return

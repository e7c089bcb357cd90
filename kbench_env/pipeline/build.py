"""The build stage: a sandboxed worker for the candidate (a spare one when kept), which loads its module, the
trusted builder compiling the kernels it asks for (kbench_env/builder); this side reads the outcome (compiled or the compiler's error, build time, cache
hit, the worker's warm-up phases). Builds run concurrently with other candidates' builds and runs."""

from __future__ import annotations

import contextlib

from kbench_env.machine.device import Device
from kbench_env.pipeline.quiet import LIVE
from kbench_env.pipeline.reports import flag_builds, flag_sandbox_violations
from kbench_env.pipeline.result import EvalResult, add_phase, trim_log
from kbench_env.protocol import messages as msg
from kbench_env.sandbox.worker_process import Worker


@contextlib.contextmanager
def live_worker(make, device: str, rules: str, result: EvalResult):
    """The worker ``make()`` gives (the candidate's: a spare given it, or a new one), closed at the end of the
    block; on the CPU started and registered as a live worker under ``LIVE.starting`` (quiet.py: not while another
    evaluation times, stopped while one does). At the end of the block, whatever the stages did, ``result`` gets
    the worker's busy time, its sandbox's violations and the builds it made after the build stage (in forward)."""
    cpu = Device.parse(device).is_cpu
    with contextlib.ExitStack() as stack:
        with LIVE.starting() if cpu else contextlib.nullcontext():
            worker = stack.enter_context(make())
            if cpu:
                stack.enter_context(LIVE.member(worker))
        try:
            yield worker
        finally:
            result.worker_seconds = round(worker.busy_seconds, 4)
            seconds = worker._builds.builder_seconds  # noqa: SLF001 - its builds' time in the builder
            if seconds:  # (the rest of the build phase: waiting for a builder's place, the worker's start)
                add_phase(result, "builder", seconds)
            flag_sandbox_violations(worker, result)
            flag_builds(rules, worker, result)


def build(worker: Worker, result: EvalResult, timeout: float) -> None:
    """Wait for the worker's build-and-load reply and record it in ``result`` (``result.compiled`` on success)."""
    header, _ = worker.recv(timeout, "build and load")
    if header["type"] == msg.ERROR:
        result.error, result.error_stage = header["message"], header["stage"]
        result.log_tail = trim_log(worker.log_tail())
        return
    result.compiled = True
    result.stage = "built"
    result.build_seconds = round(header["build_seconds"], 3)
    result.cached_build = header.get("cached")
    for key, phase in (("warmup_seconds", "worker_warmup"), ("cuda_start_seconds", "worker_cuda_start")):
        if header.get(key):
            add_phase(result, phase, float(header[key]))

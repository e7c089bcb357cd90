"""The reference's torch.compile (reference workers only), with the device's hold let go while inductor compiles.

Inductor compiles inside the compiled model's first call: seconds of the host's work during which this process runs
nothing on the device, yet the trusted side's shared hold of the device (a run ahead: pipeline/reference_start.py)
would last through it, and every timing waits for a hold to end. With ``gate`` the compile is dynamo's backend
wrapped in two messages: READY ``compiling`` once this process's device work has finished (the trusted side may let
its hold go), then READY ``compiled`` and a wait for GO (the trusted side holds the device again) before dynamo
runs the compiled graph. A benchmark inductor runs on the device while it compiles (its matmul padding pass times
both shapes) waits for the same GO first, and the rest of that compile stays under the hold. Each graph of a model
that dynamo splits is compiled between its own pair of messages.

Without ``gate`` it is torch.compile's inductor as is, with the same option: one compile thread (inductor's
default is a pool of one process per core, each importing torch, in every worker that compiles, while the host's
cores build other candidates and compile other references).

Gated or not, each configuration is compiled for its own shapes (``dynamic=False``): a reference worker compiles a
task's configurations one after another in one process, and dynamo's automatic dynamic shapes would compile the
second shape it meets as a graph over symbolic sizes and serve every later configuration of the same dtype from it,
so the compiled reference timed for them would be a dynamic-shape graph, not what compiling that program for that
shape gives (KernelBench's torch.compile baseline: one shape, compiled for it).
"""

from __future__ import annotations

import torch

from kbench_env.protocol import messages as msg
from kbench_env.protocol.wire import unpack

#: Inductor's settings for the reference's compile, gated or not (``options``).
OPTIONS = {"compile_threads": 1}
#: Graphs dynamo may compile for one forward before it runs the rest eagerly (its default: 8): compiled for each
#: configuration's shapes and dtype, a task of many configurations would otherwise have its later ones timed eager
#: under the compiled reference's name.
RECOMPILE_LIMIT = 64


def compile_model(model, gate: bool, conn, send, sync):
    """``model`` under torch.compile; with ``gate``, its compiles between READY messages (``send``; GO read from
    ``conn``), ``sync`` (the backend's device synchronisation) run before the device is let go."""
    _room_for_every_configuration()
    if not gate:
        return torch.compile(model, options=options(), dynamic=False)
    return torch.compile(model, backend=_Gate(conn, send, sync).backend, dynamic=False)


def warm() -> None:
    """Import what a compile imports at its start (dynamo, inductor's entry and its benchmarker): seconds of CPU that
    a reference worker which will compile (pipeline/compile_later.py) spends as it starts, at its low priority and
    before the trusted side holds the device for its run, instead of inside the run's hold."""
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import torch._inductor.runtime.benchmarking  # noqa: F401


def options() -> dict:
    """OPTIONS, and inductor's precompiled headers (the CPU's C++ kernels) off where this torch has the setting:
    inductor hashes a header it precompiles with an ``openssl`` subprocess, a program the worker's confinement does
    not run (sandbox/confine/audit_hook.py), so a CPU reference's compile failed there; a precompiled header changes
    how long a compile takes, not what it compiles. (Read here, not on import: importing inductor's config takes
    seconds of CPU, and every worker imports this module.)"""
    from torch._inductor import config

    out = dict(OPTIONS)
    if hasattr(config, "cpp_cache_precompile_headers"):
        out["cpp_cache_precompile_headers"] = False
    return out


def _room_for_every_configuration() -> None:
    """Dynamo's recompile limit raised to RECOMPILE_LIMIT in this process (its name differs between torch versions;
    where both exist they are one setting)."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if getattr(config, name, RECOMPILE_LIMIT) < RECOMPILE_LIMIT:
            setattr(config, name, RECOMPILE_LIMIT)


class _Gate:
    def __init__(self, conn, send, sync):
        self.conn, self.send, self.sync = conn, send, sync
        self.let_go = False  # READY compiling sent, GO not yet received

    def _let_go(self) -> None:
        self.sync()  # this process's device work has finished before the trusted side lets the device go
        self.send({"type": msg.READY, "phase": msg.COMPILING})
        self.let_go = True

    def _hold(self) -> None:
        if self.let_go:
            self.send({"type": msg.READY, "phase": msg.COMPILED})
            unpack(self.conn.recv_bytes())  # GO: the trusted side holds the device again
            self.let_go = False

    def backend(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx
        from torch._inductor.runtime import benchmarking

        bench = getattr(benchmarking, "benchmarker", None)
        timed = getattr(bench, "benchmark_gpu", None)
        if timed is None:  # a torch whose compile-time benchmarks this cannot gate: compiled under the hold
            return compile_fx(gm, example_inputs, config_patches=options())

        def held_first(*args, **kwargs):
            self._hold()
            return timed(*args, **kwargs)

        own = vars(bench).get("benchmark_gpu")  # (normally none: the class's method)
        self._let_go()
        bench.benchmark_gpu = held_first
        try:
            return compile_fx(gm, example_inputs, config_patches=options())
        finally:
            if own is None:
                del bench.benchmark_gpu
            else:
                bench.benchmark_gpu = own
            self._hold()

"""Every kind of message the trusted side and the candidate's worker exchange: the ``"type"`` of a message header
(framing is wire.py). One exchange after another, each request answered by one reply (ERROR answers any of them):

    worker start      worker sends HELLO
    SOURCE            a spare worker's candidate (no reply: the worker builds and loads it)
    build and load    worker sends LOADED (build seconds, cache hit, warm-up) or ERROR (stage build or load)
    RUN               one configuration's run        -> OUTPUT (the candidate's output, audit, reports); on a GPU
                      large inputs come as ``input_slots`` -> READY (where the worker made them), GO (the
                      trusted side wrote them), and a large output stays in the worker's memory (OUTPUT's ``ipc``:
                      where; read before the next request)
                      a reference's compiled run with ``gate``: READY ``compiling`` (the trusted side may let
                      the device go while inductor compiles), READY ``compiled`` -> GO (it holds the device again),
                      per graph compiled (worker/compile_gate.py)
    WALLCLOCK         inputs for a re-timing         -> READY; then GO (the trusted side's clock starts) -> DONE
    CALIBRATE         the device's capacity          -> CALIBRATION (bandwidth, FLOP rates, graph-node gap)
    SLOTS             input buffers for timed blocks -> BUFFERS (their addresses; worker/executor.py)
    BLOCK             one timed block of calls       -> DONE (where the outputs are; the trusted side reads them)
    RELEASE           the block's outputs are read   -> RELEASED
    GPU_SLOTS         a GPU block made and captured  -> GPU_BUFFERS (inter-process handles; worker/gpu_executor.py)
    GPU_BLOCK         one timed GPU block            -> DONE (its device time; the trusted side reads the outputs)

Inside any exchange, before its reply, the worker may ask for a build: it sends BUILD (a build request,
builder/requests.py) and waits for BUILT ({"ok", "path", "module", "cached"} or {"ok": False, "message"}), which
the trusted side sends once the trusted builder has answered (sandbox/worker_build.py).

ERROR carries ``stage`` (one of ERROR_STAGES) and ``message``.
"""

from __future__ import annotations

# requests: trusted side -> worker
SOURCE = "source"
RUN = "run"
WALLCLOCK = "wallclock"
GO = "go"
CALIBRATE = "calibrate"
SLOTS = "slots"
BLOCK = "block"
RELEASE = "release"
GPU_SLOTS = "gpu_slots"
GPU_BLOCK = "gpu_block"
BUILT = "built"  # the answer to the worker's BUILD

# READY's ``phase`` in a gated compile (worker/compile_gate.py)
COMPILING = "compiling"
COMPILED = "compiled"

# replies: worker -> trusted side
HELLO = "hello"
LOADED = "loaded"
OUTPUT = "output"
READY = "ready"
DONE = "done"
CALIBRATION = "calibration"
BUFFERS = "buffers"
RELEASED = "released"
GPU_BUFFERS = "gpu_buffers"
ERROR = "error"
BUILD = "build"  # the worker's request for a build, inside any exchange

#: The worker's first use of the framing on itself, never sent (worker.loop's warm-up).
WARM_UP = "warm-up"

#: Messages by direction: trusted side -> worker, worker -> trusted side.
REQUESTS = frozenset({SOURCE, RUN, WALLCLOCK, GO, CALIBRATE, SLOTS, BLOCK, RELEASE, GPU_SLOTS, GPU_BLOCK, BUILT})
REPLIES = frozenset({HELLO, LOADED, OUTPUT, READY, DONE, CALIBRATION, BUFFERS, RELEASED, GPU_BUFFERS, ERROR, BUILD})

#: Where an ERROR reply says the failure happened.
ERROR_STAGES = ("build", "load", "run", "timing", "calibrate", "protocol")

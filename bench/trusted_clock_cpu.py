"""What the trusted side's clock costs on the CPU (pipeline/blocks.py): the time of one block of one call of a
trivial forward (relu of 16 floats, the shipped C++ solution), from the moment the trusted side resumes the worker to
its DONE: the exchange that every timed block carries, against the 50 ms a block aims at.

    python bench/trusted_clock_cpu.py [--blocks 200] [--no-cgroup]

Prints the median and quartiles of that time in microseconds, and of the freeze (the worker's freezer cgroup until
the kernel says frozen; with ``--no-cgroup``, SIGSTOP until every thread has stopped), the input write and the
output read around it. A timed block's clock runs over the window and the freeze after it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import time

import torch

from kbench_env.pipeline import blocks
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.revealed_inputs import RevealedInputs
from kbench_env.protocol import messages as msg
from kbench_env.sandbox.worker_process import Worker
from kbench_env.tasks.suite import resolve_task, solution_path


def quartiles(xs: list) -> dict:
    q = statistics.quantiles(xs, n=4)
    return {"median_us": round(q[1] * 1e6, 1), "q1_us": round(q[0] * 1e6, 1), "q3_us": round(q[2] * 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=200)
    ap.add_argument("--no-cgroup", action="store_true", help="no cgroup: the stop is by signal")
    args = ap.parse_args()
    task = resolve_task("level1/relu")
    x = torch.randn(16)
    ev = Evaluator(device="cpu", cache_dir=tempfile.mkdtemp(prefix="kbench-clock-"), spare_worker=False)
    limits = dataclasses.replace(ev.limits, isolation_off=("cgroup",) if args.no_cgroup else ())
    with Worker(solution_path(task, "cpu").read_text(), "cpu", "cpu", ev.build_root, limits, builder=ev.builder) as w:
        loaded, _ = w.recv(300, "load")
        assert loaded["type"] == msg.LOADED, loaded
        w.send({"type": msg.RUN, "config": "c", "dtype": "float32", "init_seed": 0, "backward": False},
               {"init_inputs": [], "inputs": [x]})
        out, _ = w.recv(60, "run")
        assert out["type"] == msg.OUTPUT, out
        run = blocks._Run(w, "c", RevealedInputs([x], 1e-2), 60, None, 1)
        run.freezer.freeze()
        run.slots(1)
        window, freeze, write, read = [], [], [], []
        for _ in range(args.blocks):
            t0 = time.perf_counter()
            key = run.inputs.draw()
            run.mem.write(int(run.addresses[0][0]), blocks._tensor_bytes(run.inputs.make(key)[0]))
            t1 = time.perf_counter()
            w.send({"type": msg.BLOCK, "config": "c", "calls": 1})
            t2 = time.perf_counter()
            run.freezer.thaw()
            header, payload = w.recv(60, "block")
            t3 = time.perf_counter()
            run.freezer.freeze()
            t4 = time.perf_counter()
            blocks.read_outputs(run.mem, header["layout"], payload["table"].tolist()[0])
            t5 = time.perf_counter()
            run.release()
            window.append(t3 - t2)
            freeze.append(t4 - t3)
            write.append(t1 - t0)
            read.append(t5 - t4)
        run.freezer.thaw()
    row = {"what": "one block of one 16-float relu call", "blocks": args.blocks, "cores": os.cpu_count(),
           "window": quartiles(window), "freeze": quartiles(freeze), "input_write": quartiles(write),
           "output_read": quartiles(read), "stop": "signal" if run.freezer.group is None else
           f"cgroup v{run.freezer.group.version}", "load_average": os.getloadavg()[0],
           "date": time.strftime("%Y-%m-%d %H:%M")}
    print(json.dumps(row))


if __name__ == "__main__":
    main()

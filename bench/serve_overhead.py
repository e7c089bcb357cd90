"""Serving overhead: the same env steps in-process and through `kbench serve` on localhost (CPU backend, timing off),
and a streamed batch. Usage: .venv/bin/python bench/serve_overhead.py (starts and stops its own server)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import gymnasium as gym, kbench_env
from tests.serving_server import ServerProcess, TOKEN
from kbench_env.config import EvaluatorConfig
from kbench_env.serving.aclient import AsyncKBenchClient
RELU = open("tasks/solutions/cpu/level1/relu.py").read()
srv = ServerProcess("--workers", "2", "--queue", "200", "--suite", "default", "--max-batch", "200")
try:
    for label, src, n in (("garbage (screen only)", "garbage", 200), ("relu, cached build", RELU, 20)):
        loc = gym.make("KBench-v0", task="level1/relu", device="cpu", max_turns=10**6,
                       config=EvaluatorConfig.from_options(time_candidates=False, spare_worker=False))
        rem = gym.make("KBench-v0", url=srv.url, token=TOKEN, task="level1/relu", max_turns=10**6)
        loc.reset(seed=0); rem.reset(seed=0); loc.step(src); rem.step(src)
        t0 = time.perf_counter(); [loc.step(src) for _ in range(n)]; tl = time.perf_counter() - t0
        t0 = time.perf_counter(); [rem.step(src) for _ in range(n)]; tr = time.perf_counter() - t0
        print(f"{label}: {n} sequential steps: local {tl/n*1000:.2f} ms/step, remote {tr/n*1000:.2f} ms/step")
        loc.close(); rem.close()
    async def b():
        async with AsyncKBenchClient(srv.url, TOKEN) as c:
            t0 = time.perf_counter(); r = await c.evaluate_many([("level1/relu", "garbage")] * 200); return time.perf_counter() - t0, len(r)
    t, k = asyncio.run(b()); print(f"batch of {k} garbage items: {t*1000:.1f} ms total")
finally:
    srv.stop()

"""What the target hardware is, in the words a kernel writer needs (shown in the prompt)."""

from __future__ import annotations

import os
import platform
from functools import lru_cache

import torch

from kbench_env.machine.device import Device

_VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile", "neon", "asimd", "sve")


@lru_cache(maxsize=1)
def cpu_description() -> str:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    model = value.strip()
                elif key in ("flags", "Features"):
                    flags = set(value.split())
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    vec = [f for f in _VECTOR_FLAGS if f in flags]
    return f"CPU: {model}, {cores} cores available, {platform.machine()}, vector extensions: {', '.join(vec) or 'unknown'}"


def gpu_description(device: str = "cuda") -> str:
    idx = torch.device(device).index or 0
    p = torch.cuda.get_device_properties(idx)
    return (f"GPU: {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB memory, "
            f"compute capability {p.major}.{p.minor}")


def describe(device: str) -> str:
    if Device.parse(device).is_cuda and torch.cuda.is_available():
        return gpu_description(device)
    return cpu_description()

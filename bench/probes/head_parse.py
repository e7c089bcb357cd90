"""Probe (issue #36): how much of a KernelBench-format build's two EDG front ends (cudafe++ and cicc, ~15.5 of its
~21 CPU-s) is the torch head a ``.cu`` parses, and which part of it.

The builder's ``.cu`` of ``--task``'s shipped CUDA solution is taken as the builder writes it (narrow head and all:
``torch_ext.build`` run up to its nvcc step, on this machine's nvcc with bench/build_cost.py's set-up), and nvcc
is run on variants of it with the builder's own flags:

- ``floor``: <cuda_runtime.h> and a one-line kernel with its launch (what any ``.cu`` pays);
- ``tensor``: <ATen/core/Tensor.h> (the Tensor class and its methods) before the same;
- ``tensor_ivalue``: that and <ATen/core/ivalue.h> (every operator header reaches it: ``ATen/ops/*.h`` include
  <ATen/DeviceGuard.h>, which includes IListRef, List and ivalue);
- ``narrow_head``: the builder's narrow head (its lines before the candidate's own code) and the one-line kernel;
- ``builder``: the builder's ``.cu`` as it is.

Per variant, the CPU-seconds (user + system of nvcc's children) of ``nvcc --cuda`` (host preprocessing, cudafe++,
and the device passes: preprocessing, cicc, ptxas) and of ``nvcc --ptx`` (device preprocessing and cicc alone),
the median of ``--rounds`` runs each, and the preprocessed size. Run it on a quiet machine.

    python bench/probes/head_parse.py --task level1/relu --out bench/results/head_parse_cpu.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import build_cost  # noqa: E402

from kbench_env.backends import narrow_head  # noqa: E402
from kbench_env.backends.cuda import CudaBackend  # noqa: E402
from kbench_env.builder import nvcc_steps, pch, torch_ext  # noqa: E402
from kbench_env.builder.store import Store  # noqa: E402

KERNEL = ("__global__ void kb_probe(const float* x, float* y, long n) { long i = blockIdx.x * blockDim.x + "
          "threadIdx.x; if (i < n) y[i] = x[i] > 0 ? x[i] : 0; }\n"
          "void kb_probe_launch(const float* x, float* y, long n) { kb_probe<<<(n + 255) / 256, 256>>>(x, y, n); }\n")


HEAD_END = "\n} // namespace torch\n"


class _Grabbed(Exception):
    pass


def builder_cu(task: str, work: Path) -> tuple[str, list, str]:
    """The builder's ``.cu`` for the task's shipped CUDA solution, its nvcc command and the build directory (a copy)."""
    got = {}

    def grab(argv, source, cwd, *args, **kwargs):
        got.update(text=Path(source).read_text(), argv=list(argv), cwd=str(work / "build"))
        shutil.copytree(cwd, work / "build", dirs_exist_ok=True)
        raise _Grabbed

    saved, nvcc_steps.compile_cu = nvcc_steps.compile_cu, grab
    try:
        req = build_cost.request_of(ROOT / "tasks/solutions/cuda" / f"{task}.py")
        torch_ext.build(req, CudaBackend(), Store(str(work / "store")), {"torch": "probe", "backend": "cuda"}, 1800.0,
                        1 << 31, compile_fn=build_cost.compile_fn(work, "probe", wall=True),
                        pch=pch.BindingHeaders(str(work / "pch")))
    except _Grabbed:
        pass
    finally:
        nvcc_steps.compile_cu = saved
    if not got:
        raise SystemExit(f"{task}: the builder made no stepped nvcc compile")
    return got["text"], got["argv"], got["cwd"]


def flags_of(argv: list) -> list:
    """nvcc's command less its compile's own parts (-c, -o X, the source)."""
    out, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and not a.endswith(".cu"):
            out.append(a)
    return out


def cpu_of(cmd: list, cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed:\n{p.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="level1/relu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kbench-head-parse-"))
    text, argv_, cwd = builder_cu(a.task, work)
    if not text.startswith(narrow_head.MARK):
        raise SystemExit(f"{a.task}: the builder gave no narrow head")
    nvcc, flags = argv_[0], flags_of(argv_)
    # the narrow head ends with <torch/types.h>'s own namespace block, copied: its last before the first kernel
    end = text.rfind(HEAD_END, 0, max(0, text.find("__global__")))
    if end < 0:
        raise SystemExit(f"{a.task}: the narrow head's end ({HEAD_END.strip()!r}) not found")
    head = text[:end + len(HEAD_END)]
    variants = {"floor": "#include <cuda_runtime.h>\n" + KERNEL,
                "tensor": "#include <ATen/core/Tensor.h>\n#include <cuda_runtime.h>\n" + KERNEL,
                "tensor_ivalue": "#include <ATen/core/Tensor.h>\n#include <ATen/core/ivalue.h>\n"
                                 "#include <cuda_runtime.h>\n" + KERNEL,
                "narrow_head": head + "#include <cuda_runtime.h>\n" + KERNEL,
                "builder": text}
    rows = []
    for name, src in variants.items():
        path = Path(cwd) / f"probe_{name}.cu"
        path.write_text(src)
        row = {"task": a.task, "variant": name, "cores": os.cpu_count()}
        for mode in ("cuda", "ptx"):
            times = [cpu_of([nvcc, *flags, f"--{mode}", str(path), "-o", str(path) + f".{mode}"], cwd)
                     for _ in range(a.rounds)]
            row[f"{mode}_cpu_s"] = round(statistics.median(times), 2)
            row[f"{mode}_cpu_s_all"] = [round(t, 2) for t in times]
        pre = subprocess.run([nvcc, *flags, "-E", str(path)], cwd=cwd, capture_output=True, timeout=900)
        row["preprocessed_bytes"] = len(pre.stdout)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

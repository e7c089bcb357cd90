"""Run fast-format CUDA candidates on the CPU, to test what their kernels compute where there is no GPU: each
``cuda_kernel`` source is compiled by g++ against bench/cuda_emulate.h (one thread per CUDA thread, blocks one after
another, ``__syncthreads`` and float warp shuffles emulated), launched with kbench_env.fastpath's own argument
marshalling, on CPU tensors of the task's configurations (``--configs``, default the held-out "odd" one; float32 and,
where the task has a bfloat16 configuration, the same sizes in bfloat16), and compared with the task's reference by
the evaluator's own comparison (compare.py, the task's tolerances).

It checks indexing, tails, reductions and barriers; not speed, not what the CPU cannot show (atomics, inter-block
cooperation, memory ordering, the GPU's own math library: erff, expf and rsqrtf here are glibc's). Slow: a thread
per CUDA thread, so keep configurations small.

    python bench/cuda_emulate.py bench/data/rl_batch/fast_cuda/*/*.py
    python bench/cuda_emulate.py --configs small,odd path.py
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import re
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
HEADER = Path(__file__).resolve().with_suffix(".h")


def _host_source(source: str) -> str:
    """The kernel source as host C++ with a launcher per kernel: ``emu_launch_<name>(grid, block, args)`` where
    ``args`` is the array of pointers to the arguments that cuLaunchKernel would take."""
    from fast_cuda_check import signatures

    src = re.sub(r"#include\s*<cuda_bf16\.h>", "", source)
    src = re.sub(r"extern\s+__shared__\s+(\w+)\s+(\w+)\[\];", r"\1* \2 = (\1*)emu_dyn_smem;", src)
    launchers = []
    for name, params in signatures(source).items():
        call = ", ".join(f"*({t}*)a[{i}]" for i, t in enumerate(params))
        launchers.append(f'extern "C" void emu_launch_{name}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, '
                         f'unsigned by, unsigned bz, void** a) {{ emu_run({{gx, gy, gz}}, {{bx, by, bz}}, '
                         f'[&] {{ {name}({call}); }}); }}')
    return f'#include "{HEADER}"\n{src}\n' + "\n".join(launchers) + "\n"


def _library(source: str, cache: Path) -> ctypes.CDLL:
    text = _host_source(source)
    # the header is #included by path: its text is in the key too, so a changed header builds anew
    so = cache / f"{hashlib.sha256((HEADER.read_text() + text).encode()).hexdigest()[:20]}.so"
    if not so.exists():
        cpp = so.with_suffix(".cpp")
        cpp.write_text(text)
        # -fno-gnu-unique: template statics ("__shared__" arrays) of two candidates' libraries must not be merged
        p = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-fno-gnu-unique", str(cpp),
                            "-o", str(so)], capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"g++ could not build the emulated kernels:\n{p.stderr[-3000:]}")
    return ctypes.CDLL(str(so))


def emulated_kernel(cache: Path):
    """A stand-in for kbench_env.fastpath.cuda_kernel that builds and launches on the CPU."""
    import kbench_env.fastpath as fastpath

    def cuda_kernel(source: str, name: str, flags=None):
        fn = getattr(_library(source, cache), f"emu_launch_{name}")

        def launch(grid, block, *args, shared_mem: int = 0):
            g = tuple(grid) + (1,) * (3 - len(tuple(grid))) if isinstance(grid, (tuple, list)) else (int(grid), 1, 1)
            b = tuple(block) + (1,) * (3 - len(tuple(block))) if isinstance(block, (tuple, list)) else (int(block), 1, 1)
            if shared_mem > 1 << 16:
                raise ValueError(f"{name}: {shared_mem} bytes of dynamic shared memory (the emulator has 64 KiB)")
            cargs = [fastpath._c_arg(a, ctypes.c_float) for a in args]  # noqa: SLF001 - the launcher's own marshalling
            params = (ctypes.c_void_p * len(cargs))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in cargs])
            fn(*[ctypes.c_uint(v) for v in g + b], params)

        return launch

    return cuda_kernel


def emulate(path: Path, configs: tuple = ("odd",), cache: Path | None = None) -> list[tuple[str, str | None]]:
    """[(configuration, None or why its output is wrong)] for the candidate at ``path``
    (bench/data/rl_batch/fast_cuda/<level>/<task>__<variant>.py)."""
    import torch

    import kbench_env.fastpath as fastpath
    from kbench_env.measure.compare import compare_outputs
    from kbench_env.tasks.suite import resolve_task
    from kbench_env.tasks.task import DTYPES

    cache = cache or Path(tempfile.gettempdir()) / "kbench-cuda-emulate"
    cache.mkdir(parents=True, exist_ok=True)
    saved = fastpath.cuda_kernel
    fastpath.cuda_kernel = emulated_kernel(cache)
    try:
        mod = types.ModuleType("candidate")
        exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    finally:
        fastpath.cuda_kernel = saved
    task = resolve_task(f"{path.parent.name}/{path.stem.split('__')[0]}")
    chosen = [task.config(n) for n in configs]  # a misspelt name: an error naming the task's configurations
    if any(c.dtype == "bfloat16" for c in task.configs_for("cuda")):
        chosen += [dataclasses.replace(c, name=f"{c.name} (bfloat16)", dtype="bfloat16") for c in list(chosen)]
    out = []
    for cfg in chosen:
        tmod, init, inputs = task.instantiate(cfg, 7, "cpu")
        dtype = DTYPES[cfg.dtype]
        torch.manual_seed(11)
        model = mod.ModelNew(*init).to(dtype=dtype)
        with torch.no_grad():
            got = model(*inputs)
            ref = task.reference_output(tmod, init, inputs, cfg, 11, "cpu")
        mismatch, _ = compare_outputs(got, ref, dtype, task.tolerance)
        out.append((cfg.name, mismatch.message if mismatch else None))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--configs", default="odd", help="the task's configurations to run, comma-separated")
    args = ap.parse_args(argv)
    failed = 0
    for f in args.files:
        t0 = time.perf_counter()
        try:
            res = emulate(Path(f).resolve(), tuple(args.configs.split(",")))
        except Exception as e:  # noqa: BLE001 - reported per file
            res = [("-", f"{type(e).__name__}: {e}")]
        bad = [(c, why) for c, why in res if why]
        failed += bool(bad) or not res
        print(f"{'FAIL' if bad or not res else 'ok  '} {f} ({', '.join(c for c, _ in res) or 'no configuration'}; "
              f"{time.perf_counter() - t0:.1f} s)" + "".join(f"\n     - {c}: {why}" for c, why in bad), flush=True)
    print(f"{len(args.files) - failed} of {len(args.files)} ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

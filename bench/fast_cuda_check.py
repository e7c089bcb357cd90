"""Check fast-format CUDA candidates without a GPU: every ``cuda_kernel`` source compiled with ``nvcc -cubin`` for
one arch (as kbench_env/builder/fast.py builds it), and ModelNew's forward run on the CPU for every configuration
of its task that runs on CUDA (its dtype included), with each launch checked against the kernel's ``extern "C"``
signature instead of run: the arity, a tensor for each pointer (of the pointee's dtype), a Python int for each
``long long``/``int64_t``, a float for each ``float``; block at most 1024 threads, grid y/z at most 65535, static
shared memory at most 48 KiB. ModelNew's parameters are compared with the task's Model (names, shapes, seeded values).
Nothing checks what the kernels compute: that needs the GPU.

    python bench/fast_cuda_check.py bench/data/rl_batch/fast_cuda/*/*.py --arch sm_90
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from kbench_env.builder.compiler import CompileError  # noqa: E402
from kbench_env.builder.errors import BuildRefused  # noqa: E402
from kbench_env.builder.fast import build_here  # noqa: E402
from kbench_env.measure.compare import flatten_outputs  # noqa: E402

SIG = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)\s*\(([^)]*)\)', re.S)


def signatures(source: str) -> dict[str, list[str]]:
    """Kernel name -> its parameter types, from the ``extern "C" __global__`` definitions."""
    out = {}
    for name, params in SIG.findall(source):
        types = []
        for p in (x.strip() for x in params.split(",") if x.strip()):
            types.append(re.sub(r"\s*\b\w+$", "", p.replace("__restrict__", "")).strip())
        out[name] = types
    return out


def _expect(ctype: str, arg, where: str) -> str | None:
    import torch

    if "*" in ctype:
        if not isinstance(arg, torch.Tensor):
            return f"{where}: {ctype} takes a tensor, got {type(arg).__name__}"
        base = ctype.replace("const", "").replace("*", "").strip()
        want = {"float": torch.float32, "float4": torch.float32, "float2": torch.float32, "double": torch.float64,
                "__nv_bfloat16": torch.bfloat16, "__nv_bfloat162": torch.bfloat16, "int": torch.int32,
                "long long": torch.int64}.get(base)
        if want is not None and arg.dtype != want:
            return f"{where}: {ctype} given a {arg.dtype} tensor"
        return None
    if ctype in ("long long", "int64_t", "long long int"):
        return None if isinstance(arg, int) and not isinstance(arg, bool) else f"{where}: {ctype} given {arg!r}"
    if ctype == "float":
        return None if isinstance(arg, float) else f"{where}: float given {arg!r}"
    return f"{where}: parameter type {ctype!r} cannot be passed by fastpath (ints go as long long, floats as float)"


class Recorder:
    """Stands for kbench_env.fastpath.cuda_kernel: records each source, and checks launches instead of running."""

    def __init__(self):
        self.sources, self.problems, self.launches = [], [], 0

    def __call__(self, source: str, name: str, flags=None):
        self.sources.append((source, tuple(flags or [])))
        sigs = signatures(source)
        if name not in sigs:
            self.problems.append(f'cuda_kernel(..., {name!r}): no extern "C" __global__ void {name}(...) in the source')
        params = sigs.get(name, [])

        def launch(grid, block, *args, shared_mem: int = 0):
            self.launches += 1
            g = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
            b = tuple(block) if isinstance(block, (tuple, list)) else (block,)
            if not all(isinstance(v, int) and v >= 1 for v in g + b):
                self.problems.append(f"{name}: grid {g} block {b}: every dimension an int >= 1")
            elif len(g) > 1 and max(g[1:]) > 65535 or g[0] >= 2 ** 31:
                self.problems.append(f"{name}: grid {g} over the limits")
            n = 1
            for v in b:
                n *= v
            if n > 1024:
                self.problems.append(f"{name}: block {b} has {n} threads (at most 1024)")
            if shared_mem > 48 * 1024:
                self.problems.append(f"{name}: {shared_mem} bytes of dynamic shared memory (at most 48 KiB)")
            if len(args) != len(params):
                self.problems.append(f"{name}: {len(args)} arguments for {len(params)} parameters")
            for i, (ct, a) in enumerate(zip(params, args)):
                p = _expect(ct, a, f"{name} argument {i}")
                if p:
                    self.problems.append(p)

        return launch


def check_file(path: Path, device: str = "cuda") -> tuple[list, list[str]]:
    """(the sources to compile, the problems found running ModelNew on every configuration of ``device``: the
    CUDA ones by default; "cpu" picks the task's small ones, for a quick test)."""
    import types

    import torch

    import kbench_env.fastpath as fastpath
    from cuda_compile_check import check_parameters
    from kbench_env.tasks.suite import resolve_task
    from kbench_env.tasks.task import DTYPES

    rec = Recorder()
    saved = fastpath.cuda_kernel
    fastpath.cuda_kernel = rec
    try:
        mod = types.ModuleType("candidate")
        exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    finally:
        fastpath.cuda_kernel = saved
    problems = []
    p = check_parameters(path, mod)
    if p:
        problems.append(p)
    task = resolve_task(f"{path.parent.name}/{path.stem.split('__')[0]}")
    for cfg in task.configs_for(device):
        tmod, init, inputs = task.instantiate(cfg, 0, "cpu")
        dtype = DTYPES[cfg.dtype]
        torch.manual_seed(0)
        model = mod.ModelNew(*init).to(dtype=dtype)
        ref = task.make_model(tmod, init, 0, dtype, "meta")
        before = rec.launches
        try:
            with torch.no_grad():
                out = model(*inputs)
                want = ref(*[x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs])
        except Exception as e:  # noqa: BLE001 - reported per configuration
            problems.append(f"config {cfg.name} ({cfg.dtype}): forward raised {type(e).__name__}: {e}")
            continue
        if rec.launches == before:
            problems.append(f"config {cfg.name}: forward launched no kernel")
        got, wanted = ([(tuple(t.shape), t.dtype) for t in flatten_outputs(o)] for o in (out, want))
        if got != wanted:
            problems.append(f"config {cfg.name}: outputs {got}, the task's {wanted}")
    return rec.sources, list(dict.fromkeys(problems + rec.problems))


def compile_cubin(source: str, flags: tuple, arch: str) -> str | None:
    """nvcc's error for ``source``, or None: the fast path's own build (``builder.fast.build_here``: the flags it
    accepts, its command, its cache), as a candidate's build would be."""
    try:
        build_here("cuda", source, list(flags), arch)
    except (CompileError, BuildRefused) as e:
        return str(e)[-2000:]
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args(argv)
    failed = 0
    checked = [(Path(f).resolve(), *check_file(Path(f).resolve())) for f in args.files]
    sources = list(dict.fromkeys(s for _, srcs, _ in checked for s in srcs))
    with ThreadPoolExecutor(args.j) as pool:  # every file's kernels at once, each distinct source once
        errors = dict(zip(sources, pool.map(lambda s: compile_cubin(s[0], s[1], args.arch), sources)))
    for path, srcs, problems in checked:
        problems += [f"nvcc: {errors[s]}" for s in dict.fromkeys(srcs) if errors[s]]
        failed += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {os.path.relpath(path, ROOT)}"
              + "".join(f"\n     - {p}" for p in problems), flush=True)
    print(f"{len(args.files) - failed} of {len(args.files)} ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

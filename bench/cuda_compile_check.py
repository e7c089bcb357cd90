"""Compile-check the CUDA sample solutions without a GPU: build each solution's ``cuda_sources`` with nvcc the way
``torch.utils.cpp_extension.load_inline`` would (torch's implicit headers, COMMON_NVCC_FLAGS, -O3, one arch), and
check that ``ModelNew`` creates the same parameters and buffers (names, shapes, seeded values) as the task's
``Model``, that every function named in ``functions=[...]`` is declared in ``cpp_sources`` and that those declarations
link against the definitions in the CUDA object (an unresolved symbol means a signature mismatch), and that the
object passes the builds' symbol check (pipeline/linked.py: no PyTorch or math-library compute past the dispatcher,
no record switch), as its library would on a GPU host.

    python bench/cuda_compile_check.py                      # every file under tasks/solutions/cuda
    python bench/cuda_compile_check.py path.py ... -j 2 --arch sm_90 --std c++17

This machine's CUDA toolkit may lack the cuBLAS/cuSPARSE/cuSOLVER headers that <ATen/cuda/CUDAContext.h> includes;
where they are missing, stub headers declaring only their handle and status types are used (likewise the two configuration headers that
only CUDA builds of torch ship) (so a solution that
calls cuBLAS, which the integrity rules forbid anyway, fails here).

The solution module is executed with ``load_inline`` replaced by a recorder (nothing is built by torch), so the
arguments are exactly what the module passes. Exit status 1 if any solution fails.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from kbench_env.builder import symbols  # noqa: E402
from kbench_env.pipeline import linked  # noqa: E402
NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]
#: Running a module (load_inline swapped for a recorder) and seeding torch's global RNG to build ModelNew and Model
#: are process-wide: checks running in parallel threads (-j) take turns for that part; only nvcc runs in parallel.
_MODULE_LOCK = threading.Lock()
IMPLICIT_CUDA_HEADERS = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]


class _Stop(Exception):
    pass


def extract(path: Path, module_out: list | None = None) -> list[dict]:
    """The load_inline calls a solution makes (keyword arguments as passed), recorded by running the module."""
    import torch.utils.cpp_extension as cpp

    calls = []

    def recorder(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        calls.append({"name": name, "cpp_sources": cpp_sources, "cuda_sources": cuda_sources, **kwargs})
        return _Dummy()

    saved = cpp.load_inline
    cpp.load_inline = recorder
    try:
        mod = types.ModuleType("kb_solution")
        mod.__file__ = str(path)
        exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    finally:
        cpp.load_inline = saved
    if module_out is not None:
        module_out.append(mod)
    return calls


def check_parameters(path: Path, mod) -> str | None:
    """ModelNew must create the same parameters and buffers as the task's Model, in the same order, so that the
    harness's seeding gives both the same weights. Compares names, shapes and values on the CPU (the extension is
    not built: ModelNew is only constructed)."""
    import torch

    from kbench_env.tasks.suite import resolve_task

    task_path = ROOT / "tasks" / path.parent.name / (path.stem.split("__")[0] + ".py")  # <task>__<variant>.py
    if not task_path.is_file():
        return f"no task file {task_path.relative_to(ROOT)} for this solution"
    task = resolve_task(str(task_path))
    cfg = task.configs[0]
    tmod = task.module(cfg)
    init = list(tmod.get_init_inputs())
    ref = task.make_model(tmod, init, 1234, torch.float32, "cpu")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        new = mod.ModelNew(*init)
    if not isinstance(ref, torch.nn.Module):
        return None
    a = dict(ref.state_dict())
    b = dict(new.state_dict()) if isinstance(new, torch.nn.Module) else {}
    if [(k, tuple(v.shape)) for k, v in a.items()] != [(k, tuple(v.shape)) for k, v in b.items()]:
        return f"state_dict differs: Model {[(k, tuple(v.shape)) for k, v in a.items()]} vs ModelNew {[(k, tuple(v.shape)) for k, v in b.items()]}"
    bad = [k for k in a if not torch.equal(a[k], b[k].to(a[k].dtype))]
    return f"different initial values (creation order?) for {bad}" if bad else None


class _Dummy:
    def __getattr__(self, name):
        return lambda *a, **k: None


def _join(src) -> str:
    if src is None:
        return ""
    return src if isinstance(src, str) else "\n".join(src)


def _includes() -> list[str]:
    import torch

    t = Path(torch.__file__).parent / "include"
    inc = [str(t), str(t / "torch/csrc/api/include"), sysconfig.get_paths()["include"]]
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    if Path(cuda_home, "include").is_dir():
        inc.append(str(Path(cuda_home, "include")))
    return inc


_STUBS = {
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\ntypedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;",
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\n"
                  "typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n"
                  "const char* cusparseGetErrorString(cusparseStatus_t);",
    "cusolver_common.h": "typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;",
    "cusolverDn.h": "#include <cusolver_common.h>\ntypedef struct cusolverDnContext* cusolverDnHandle_t;",
    # Generated at configure time in CUDA builds of torch only (as a CUDA build writes them):
    "c10/cuda/impl/cuda_cmake_macros.h": "#define C10_CUDA_BUILD_SHARED_LIBS",
    "ATen/cuda/CUDAConfig.h": "#define AT_CUDNN_ENABLED() 1\n#define AT_CUSPARSELT_ENABLED() 0\n"
                              "#define AT_HIPSPARSELT_ENABLED() 0\n#define AT_ROCM_ENABLED() 0\n"
                              "#define AT_MAGMA_ENABLED() 0\n#define NVCC_FLAGS_EXTRA \"\"",
}


def _stub_dir(workdir: Path, includes: list[str]) -> list[str]:
    """Stub headers for the CUDA math libraries the toolkit here lacks (see the module docstring)."""
    missing = [h for h in _STUBS if not any(Path(i, h).is_file() for i in includes)]
    if not missing:
        return []
    d = workdir / "stub-include"
    d.mkdir(exist_ok=True)
    for h in missing:
        (d / h).parent.mkdir(parents=True, exist_ok=True)
        (d / h).write_text(f"#pragma once\n// kbench compile-check stub\n{_STUBS[h]}\n")
    return [str(d)]


def _declared(cpp: str, fn: str) -> bool:
    return re.search(rf"\b{re.escape(fn)}\s*\(", cpp) is not None


def check_one(path: Path, arch: str, std: str, workdir: Path) -> tuple[bool, str, float]:
    t0 = time.perf_counter()
    mods: list = []
    with _MODULE_LOCK:
        try:
            calls = extract(path, mods)
        except Exception as exc:  # noqa: BLE001
            return False, f"module failed to run: {type(exc).__name__}: {exc}", 0.0
        try:
            problem = check_parameters(path, mods[0])
        except Exception as exc:  # noqa: BLE001
            problem = f"ModelNew could not be constructed next to Model: {type(exc).__name__}: {exc}"
    if problem:
        return False, f"parameters: {problem}", 0.0
    calls = [c for c in calls if c.get("cuda_sources")]
    if not calls:
        return False, "no load_inline(..., cuda_sources=...) call", 0.0
    msgs = []
    ok = True
    for c in calls:
        name = c["name"]
        cpp = _join(c["cpp_sources"])
        functions = c.get("functions") or []
        if isinstance(functions, str):
            functions = [functions]
        missing = [f for f in functions if not _declared(cpp, f)]
        if missing:
            ok = False
            msgs.append(f"{name}: functions {missing} are not declared in cpp_sources")
        # The CUDA translation unit as torch writes it, plus the cpp declarations and a reference to each function,
        # so a declaration that does not match its definition leaves an undefined symbol in the object.
        refs = "".join(f"  (void*)&{f},\n" for f in functions)
        tu = "\n".join(IMPLICIT_CUDA_HEADERS + [_join(c["cuda_sources"])])
        tu += f"\n\n// ---- kbench compile check: declarations from cpp_sources\n{_strip_includes(cpp)}\n"
        if refs:
            tu += f"void* kb_compile_check_refs[] = {{\n{refs}}};\n"
        src = workdir / f"{path.parent.name}_{path.stem}_{name}.cu"
        obj = src.with_suffix(".o")
        src.write_text(tu)
        extra = [f for f in (c.get("extra_cuda_cflags") or []) if not f.startswith(("-gencode", "-arch"))]
        if not any(f.startswith("-O") for f in extra):
            extra.append("-O3")
        cmd = ["nvcc", f"-std={std}", f"-arch={arch}", "-c", str(src), "-o", str(obj), "--compiler-options", "-fPIC",
               f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H", *NVCC_FLAGS, *extra]
        incs = _includes()
        for inc in incs + _stub_dir(workdir, incs):
            cmd += ["-isystem", inc]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            ok = False
            msgs.append(f"{name}: nvcc failed:\n" + _trim(p.stderr or p.stdout))
            continue
        warnings = [ln for ln in (p.stderr or "").splitlines() if "warning" in ln and str(src) in ln]
        if warnings:
            msgs.append(f"{name}: {len(warnings)} warning(s), first: {warnings[0].replace(str(workdir) + '/', '')}")
        nm = subprocess.run(["nm", "-C", "-u", str(obj)], capture_output=True, text=True).stdout
        undefined = [ln.strip() for ln in nm.splitlines() if any(re.search(rf"\b{re.escape(f)}\(", ln) for f in functions)]
        if undefined:
            ok = False
            msgs.append(f"{name}: declared but not defined with the same signature: {undefined}")
        flagged = linked.flags([(obj.name, symbols.scan(str(obj)))])
        if flagged:
            ok = False
            msgs.append(f"{name}: the symbol check flags it: {'; '.join(flagged)}")
    return ok, "\n".join(msgs), time.perf_counter() - t0


def _strip_includes(cpp: str) -> str:
    return "\n".join(ln for ln in cpp.splitlines() if not ln.strip().startswith("#include"))


def _trim(text: str, n: int = 30) -> str:
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.splitlines()
    return "\n".join("    " + ln for ln in lines[:n])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--std", default="c++17")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    paths = args.paths or sorted((ROOT / "tasks/solutions/cuda").glob("*/*.py"))
    if not paths:
        print("no CUDA solutions found")
        return 1
    with tempfile.TemporaryDirectory(prefix="kb-nvcc-") as d:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda p: (p, *check_one(p, args.arch, args.std, Path(d))), paths))
    failed = 0
    for p, ok, msg, secs in results:
        rel = p.relative_to(ROOT) if p.is_relative_to(ROOT) else p
        print(f"{'PASS' if ok else 'FAIL'}  {rel}  ({secs:.1f} s)")
        if msg:
            print("\n".join("      " + ln for ln in msg.splitlines()))
        failed += not ok
    print(f"{len(results) - failed}/{len(results)} compiled ({args.arch}, -std={args.std})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

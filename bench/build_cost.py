"""CPU-seconds of KernelBench-format CUDA builds, step by step, through the trusted builder's own code
(builder/torch_ext.build: its plans, light headers and flags, torch's ninja rules) on a machine with nvcc and a CPU
build of torch: torch's CUDA paths are pointed at the toolkit, the configuration headers only CUDA builds of torch
ship are stubbed (bench/cuda_compile_check.py), and the library links against empty stand-ins for libc10_cuda and
libtorch_cuda (so it links, and its undefined symbols can be checked against torch's libraries here).

Each build is run one ninja target at a time and each target's compiler children are measured
(resource.getrusage(RUSAGE_CHILDREN): user + sys), so the rows say where the CPU time goes. Every build starts from
an empty build store (cold) unless --warm: then each solution is built a second time after a change to its kernel
source that leaves its headers alone (what an RL batch of distinct candidates for one task sees).

    python bench/build_cost.py [solution.py ...] [--out bench/results/build_cost_cpu.md] [--warm [--renamed]]
                               [--compare | --compare-renamed] [--no-renamed-reuse] [--wall]

With --compare each build is made twice, one after the other: "before" with nvcc compiling the device code whole
(--no-steps), "after" with the builder's stepped compile (builder/nvcc_steps.py: the host step against a
precompiled shared start), each configuration with its own build store and precompiled heads.
With --renamed the distinct candidate also names its extension anew, as a policy's new sample may: its binding
object is reused, its init function renamed, where the file names the module only in PYBIND11_MODULE
(pch.name_free), and compiled afresh with --no-renamed-reuse; --compare-renamed makes each build without (before)
and with (after) that reuse, both with the stepped compile; --compare-apart without (before) and with (after) the
build cut apart (backends/host_device_split.py: kernels by nvcc without torch's head, host code by GCC with it
precompiled; --no-apart: never cut). With --wall every command runs as the builder runs it
(ninja's targets and the stepped device code side by side), so the wall times are the builder's, and no per-step
table is made.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cuda_compile_check as ccc  # noqa: E402

from kbench_env.backends import narrow_head  # noqa: E402
from kbench_env.backends.cuda import CudaBackend  # noqa: E402
from kbench_env.builder import compiler, nvcc_steps, pch, requests, torch_ext  # noqa: E402
from kbench_env.builder.store import Store  # noqa: E402

DEFAULT = ["tasks/solutions/cuda/level1/relu.py", "tasks/solutions/cuda/level1/softmax_rows.py",
           "tasks/solutions/cuda/level2/conv2d_batchnorm_relu.py"]
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
STEPS: list = []  # (solution, target, cpu seconds, wall seconds) of every ninja target run


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _targets(directory: str) -> list:
    """The ninja file's object targets, then its default target (the link)."""
    text = open(os.path.join(directory, "build.ninja")).read()
    objects = re.findall(r"^build ([^:\s]+\.o):", text, re.M)
    return objects + [None]


def stepwise_run(label: str):
    """A stand-in for compiler.run that runs ``ninja`` one target at a time (the command's own targets, or every
    target) and records each target's CPU time; another command (a cut build's host compile, nm) is measured whole."""
    def run(command, cwd, timeout, what):
        if os.path.basename(command[0]) != "ninja":
            return measured_run(label, _apart_step)(command, cwd, timeout, what)
        named = [t for i, t in enumerate(command[1:], 1) if not t.startswith("-") and command[i - 1] != "-j"]
        for target in named or _targets(cwd):
            c0, w0 = _cpu(), time.perf_counter()
            p = subprocess.run(["ninja", "-v"] + ([target] if target else []), cwd=cwd, capture_output=True,
                               text=True, timeout=timeout)
            STEPS.append((label, (target or "link") + _head(cwd, target), _cpu() - c0, time.perf_counter() - w0))
            if p.returncode != 0:
                raise torch_ext.CompileError(f"{what}: {p.stdout[-4000:]}")
    return run


def _head(directory: str, target: str | None) -> str:
    """Which torch head the device code of a .cu target was built with."""
    if not target or not target.endswith(".cuda.o"):
        return ""
    with open(os.path.join(directory, target[:-len(".cuda.o")] + ".cu")) as f:
        first = f.readline()
    return " (narrow head)" if first.startswith(narrow_head.MARK) else " (<torch/types.h>)" if "torch/types.h" in \
        first else " (device code apart)" if first.startswith("#include <cuda.h>") else ""


def _apart_step(command) -> str:
    """The name of a cut build's own command (builder/torch_ext._compile_apart)."""
    if os.path.basename(command[0]) == "nm":
        return "cuda_host.o: nm"
    return "cuda_host.cpp: host compile (apart)" + (" (precompiled head)" if "-include" in command else "")


def measured_run(label: str, step):
    """compiler.run, its CPU time recorded as ``step`` (a name, or a function of the command that names it)."""
    def run(command, cwd, timeout, what):
        name = step(command) if callable(step) else step
        c0, w0 = _cpu(), time.perf_counter()
        try:
            return compiler.run(command, cwd, timeout, what)
        finally:
            STEPS.append((label, name, _cpu() - c0, time.perf_counter() - w0))
    return run


def _precompile_step(command) -> str:
    if command[0] == "/bin/sh":
        return "precompile host start"
    return "precompile host head (apart)" if any(f"/{pch.HOST}/" in c for c in command) else \
        "precompile binding head"


def _nvcc_step(command) -> str:
    """The name of one of nvcc_steps' commands (the dryrun, or a step's shell script)."""
    if "--dryrun" in command:
        return "cuda.cu: nvcc --dryrun"
    tokens = shlex.split(command[-1].rsplit("\n", 1)[-1])
    prog = os.path.basename(tokens[0])
    if "-E" in tokens:
        return "cuda.cu: preprocess " + ("device" if any(t.startswith("-D__CUDA_ARCH__") for t in tokens) else "host")
    if "-c" in tokens:
        src = next(t for t in tokens if t.endswith(".cudafe1.cpp"))
        with open(src) as f:
            used = f.readline().startswith(f'#include "{nvcc_steps.HOST_HEADER}"')
        return "cuda.cu: host compile" + (" (precompiled start)" if used else "")
    return f"cuda.cu: {prog}"


def _stub_libs(workdir: Path) -> str:
    """Empty libc10_cuda.so and libtorch_cuda.so for the link (a CPU build of torch has neither)."""
    d = workdir / "stub-lib"
    d.mkdir(exist_ok=True)
    for lib in ("c10_cuda", "torch_cuda"):
        subprocess.run(["cc", "-shared", "-o", str(d / f"lib{lib}.so"), "-x", "c", "/dev/null"], check=True)
    return str(d)


def compile_fn(workdir: Path, label: str, wall: bool = False):
    import torch.utils.cpp_extension as cpp

    stub_inc = ccc._stub_dir(workdir, ccc._includes())
    stub_lib = _stub_libs(workdir)

    def compile_(name, sources, options, directory, timeout, **kwargs):
        cpp.CUDA_HOME = CUDA_HOME  # a CPU build of torch sets it to None
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
        options = {**options, "extra_include_paths": list(options.get("extra_include_paths") or []) + stub_inc,
                   "extra_ldflags": list(options.get("extra_ldflags") or []) + [f"-L{stub_lib}"]}
        saved = torch_ext.run, pch.run, nvcc_steps.run, nvcc_steps.ThreadPoolExecutor
        if not wall:  # (with wall, every command runs as the builder runs it: ninja's targets side by side)
            torch_ext.run, pch.run = stepwise_run(label), measured_run(label, _precompile_step)
            nvcc_steps.run = measured_run(label, _nvcc_step)
            nvcc_steps.ThreadPoolExecutor = _InTurn  # cudafe++ measured alone, not beside cicc
        try:
            torch_ext.compile_with_ninja(name, sources, options, directory, timeout, **kwargs)
        finally:
            torch_ext.run, pch.run, nvcc_steps.run, nvcc_steps.ThreadPoolExecutor = saved
    return compile_


class _InTurn:
    """nvcc_steps' executor for cudafe++ beside the device passes, run in its turn instead: cudafe++'s children are
    measured in a window of their own (beside cicc, the children reaped in its window would be both's)."""

    def __init__(self, *args, **kwargs):
        pass

    def submit(self, fn, *args) -> Future:
        done = Future()
        try:
            done.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - the compile's error, raised where nvcc_steps waits for it
            done.set_exception(exc)
        return done

    def shutdown(self, wait: bool = True) -> None:
        pass


def request_of(path: Path, salt: str = "", rename: str = "") -> dict:
    calls = [c for c in ccc.extract(path) if c.get("cuda_sources")]
    c = dict(calls[0])
    cuda = ccc._join(c.pop("cuda_sources")) + salt
    return requests.normalise({"kind": "inline", "name": c.pop("name") + rename, "cpp_sources": c.pop("cpp_sources"),
                               "cuda_sources": cuda, "functions": c.pop("functions", None),
                               "options": {k: v for k, v in c.items() if k in requests.OPTIONS}})  # as the worker sends


def _exported(libs: list) -> set:
    out = set()
    for lib in libs:
        nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
        out.update(ln.split()[-1] for ln in nm.splitlines() if ln.strip())
    return out


def check_library(so: str, module: str) -> str:
    """Whether the library exports the module's init function, and its undefined symbols that no library here
    defines (torch's CPU libraries, libpython, libcudart, libc/libstdc++), those of torch's CUDA libraries apart."""
    import torch

    lib = Path(torch.__file__).parent / "lib"
    defined = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout
    init = f"PyInit_{module}" in defined
    undefined = subprocess.run(["nm", "-D", "--undefined-only", so], capture_output=True, text=True).stdout
    names = {ln.split()[-1] for ln in undefined.splitlines() if ln.strip() and ln.split()[0] != "w"}  # not weak
    known = _exported([str(p) for p in lib.glob("lib*.so")] + [f"{CUDA_HOME}/lib64/libcudart.so"])
    demangled = subprocess.run(["c++filt"], input="\n".join(sorted(names - known)), capture_output=True,
                               text=True).stdout.splitlines()
    foreign = [d for d in demangled if not re.search(r"\b(c10::cuda|at::cuda)::|@GLIBC|@CXXABI|@GCC|^_?Py|@",
                                                      d) and d.strip()]
    return f"PyInit_{module} {'exported' if init else 'MISSING'}; unresolved outside CUDA torch: {len(foreign)}" + (
        f" ({', '.join(foreign[:3])})" if foreign else "")


def build_one(path: Path, store_root: str, workdir: Path, salt: str = "", label: str | None = None,
              headers: pch.BindingHeaders | None = None, rename: str = "", wall: bool = False) -> dict:
    label = label or path.stem
    req = request_of(path, salt, rename)
    ctx = {"torch": "bench", "backend": "cuda"}
    c0, w0, s0 = _cpu(), time.perf_counter(), time.process_time()
    manifest = torch_ext.build(req, CudaBackend(), Store(store_root), ctx, 1800.0, 1 << 31,
                               compile_fn=compile_fn(workdir, label, wall), pch=headers)
    return {"label": label, "cpu": _cpu() - c0, "wall": time.perf_counter() - w0, "cached": manifest["cached"],
            "own": time.process_time() - s0,  # the builder's own Python (writing, splitting, hashing files)
            "plan": manifest.get("plan", "?"), "check": check_library(manifest["path"], manifest["module"])}


def _runs(args, paths: list, d: str) -> list:
    """Every build, in order: per source its first build then (--warm) a distinct candidate, and with --compare the
    builder without and with the stepped device code one after the other (the load lands on both)."""
    # (label, stepped device code, a binding object reused for a module named anew, the build cut apart tried)
    if args.compare_apart:
        configs = [("before", True, True, False), ("after", True, True, True)]
    elif args.compare_renamed:
        configs = [("before", True, False, True), ("after", True, True, True)]
    elif args.compare:
        configs = [("before", False, True, True), ("after", True, True, True)]
    else:
        configs = [("", not args.no_steps, not args.no_renamed_reuse, not args.no_apart)]
    # One builder process per configuration: its precompiled heads (made by the first build needing one) serve the rest.
    headers = {c[0]: None if args.no_pch else pch.BindingHeaders(os.path.join(d, f"pch-{c[0] or 'one'}"))
               for c in configs}
    results, stepped_code, name_free = [], torch_ext._device_code_in_steps, pch.name_free
    cut = CudaBackend.split_cuda_sources
    try:
        for p in paths:
            results += _source_runs(args, p, d, configs, headers, stepped_code)
    finally:
        torch_ext._device_code_in_steps, pch.name_free = stepped_code, name_free
        CudaBackend.split_cuda_sources = cut
    return results


def _source_runs(args, p: Path, d: str, configs: list, headers: dict, stepped_code) -> list:
    """One source's builds: its first and (--warm) a distinct candidate's, in each configuration (the builder's
    stepped device code, or nvcc's own device compile where the configuration turns the steps off)."""
    results = []
    stores = {c[0]: tempfile.mkdtemp(dir=d) for c in configs}  # cold: nothing built before
    name_free, cut = pch.name_free, CudaBackend.split_cuda_sources
    for salt, label in [("", p.stem)] + ([("\n// a distinct candidate\n", p.stem + " (2nd, new kernel)")]
                                        if args.warm else []):
        for c, stepped, renamed_reuse, apart in configs:
            torch_ext._device_code_in_steps = stepped_code if stepped else (lambda *a, **k: None)
            pch.name_free = name_free if renamed_reuse else (lambda text: False)
            CudaBackend.split_cuda_sources = cut if apart else (lambda self, cuda_sources: None)
            load = os.getloadavg()[0]
            r = build_one(p, stores[c], Path(d), salt=salt, label=f"{c}: {label}" if c else label,
                          headers=headers[c], rename="_2" if salt and args.renamed else "", wall=args.wall)
            results.append({**r, "config": c, "source": p.stem, "later": bool(salt), "load": load})
    return results


def _summary(results: list, what: str = "cpu") -> list:
    """The side-by-side table of a --compare run: ``what`` (CPU s, or wall s) per source, first build and distinct
    candidate."""
    cell = {(r["source"], r["config"], r["later"]): r[what] for r in results}
    sources = list(dict.fromkeys(r["source"] for r in results))
    lines = [f"{'CPU' if what == 'cpu' else 'Wall'} s:", "",
             "| source | before, first | after, first | before, distinct candidate | after, distinct candidate |",
             "| --- | --- | --- | --- | --- |"]
    for s in sources:
        lines.append(f"| {s} | " + " | ".join(f"{cell.get((s, c, later), float('nan')):.1f}"
                                              for later in (False, True) for c in ("before", "after")) + " |")
    means = []
    for later in (False, True):
        for c in ("before", "after"):
            v = [cell[(s, c, later)] for s in sources if (s, c, later) in cell]
            means.append(sum(v) / len(v) if v else float("nan"))
    lines.append("| **mean** | " + " | ".join(f"**{m:.1f}**" for m in means) + " |")
    loads = [r["load"] for r in results]
    own = {c: [r["own"] for r in results if r["config"] == c and r["later"]] for c in ("before", "after")}
    lines += ["", f"After / before, distinct candidates: {means[3] / means[2]:.2f}x; first builds: "
              f"{means[1] / means[0]:.2f}x. Load average at the builds' starts {min(loads):.1f}-{max(loads):.1f}. "
              "The builder's own Python CPU s per distinct candidate (not in the figures above): " + ", ".join(
                  f"{c} {sum(v) / len(v):.2f}" for c, v in own.items() if v) + "."]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--warm", action="store_true", help="build each a second time with a changed kernel")
    ap.add_argument("--title", default="")
    ap.add_argument("--no-pch", action="store_true", help="no precompiled binding head (as the builder was)")
    ap.add_argument("--no-narrow", action="store_true", help="no narrow head for the device code (as it was)")
    ap.add_argument("--no-object-reuse", action="store_true", help="the binding compiled for every build (as it was)")
    ap.add_argument("--no-steps", action="store_true", help="nvcc compiles the device code whole (as it was)")
    ap.add_argument("--renamed", action="store_true", help="the distinct candidate (--warm) names its extension "
                    "anew, as another policy sample would: its binding file is then compiled afresh")
    ap.add_argument("--wall", action="store_true", help="ninja and nvcc's steps run as the builder runs them "
                    "(side by side where it runs them so), for wall times; no per-step table")
    ap.add_argument("--compare", action="store_true", help="each build without (before) and with (after) the "
                    "stepped device code, one after the other")
    ap.add_argument("--no-renamed-reuse", action="store_true", help="a binding file compiled afresh for a module "
                    "named anew (as it was), not its object reused renamed (pch.name_free)")
    ap.add_argument("--no-apart", action="store_true", help="no build cut apart (host_device_split.py; as it was)")
    ap.add_argument("--compare-apart", action="store_true", help="as --compare, but before is the builder without "
                    "the build cut apart, after with it (use with --warm --renamed)")
    ap.add_argument("--compare-renamed", action="store_true", help="as --compare, but before is the builder "
                    "without the binding object reused for a module named anew (--no-renamed-reuse), after with it; "
                    "both step the device code (use with --warm --renamed)")
    args = ap.parse_args(argv)
    if args.no_narrow:
        CudaBackend.narrow_cuda_sources = lambda self, cuda_sources: None
    if args.no_object_reuse:
        pch.BindingHeaders.binding_object = lambda self, key: None
    paths = args.paths or [ROOT / p for p in DEFAULT]
    with tempfile.TemporaryDirectory(prefix="kb-buildcost-") as d:
        results = _runs(args, paths, d)
    lines = [f"### {args.title or 'build cost'} ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
             f"{platform.machine()}, {os.cpu_count()} cores)", "",
             f"`python bench/build_cost.py {' '.join(sys.argv[1:] if argv is None else argv)}`", ""]
    args.compare = args.compare or args.compare_renamed or args.compare_apart
    if args.compare:
        lines += _summary(results) + ([""] + _summary(results, "wall") if args.wall else []) + [""]
    lines += ["| build | step | CPU s (user+sys) | wall s |", "| --- | --- | --- | --- |"]
    lines += [f"| {lab} | {tgt} | {cpu:.1f} | {wall:.1f} |" for lab, tgt, cpu, wall in STEPS]
    lines += ["", "| build | CPU s | builder's own CPU s | wall s | built with | library |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['label']} | {r['cpu']:.1f} | {r['own']:.2f} | {r['wall']:.1f} | {r['plan']} | {r['check']} |"
              for r in results]
    later = [r["cpu"] for r in results if r["later"] and not args.compare]
    if later:
        lines += ["", f"Distinct candidates (2nd builds): {len(later)}, CPU s mean {sum(later) / len(later):.1f}, "
                  f"min {min(later):.1f}, max {max(later):.1f}; load average at the end "
                  f"{os.getloadavg()[0]:.1f}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which CUDA solutions' device code compiles with the narrow torch head (backends/narrow_head.py), checked without
a GPU and more cheaply than a build: each solution's request goes through the builder's plans
(builder/torch_ext._plans), and the narrow plan's ``.cu`` goes through nvcc's first two steps only (the
preprocessor and cudafe++, the host-side front end, where an undeclared torch name is an error: the commands of
``nvcc --dryrun`` up to cudafe++'s), with the flags of torch's ninja file and the stubbed CUDA-only torch headers of
bench/build_cost.py. A solution that fails here is not broken: its build falls
back to <torch/types.h>, paying for the narrow attempt.

    python bench/narrow_head_check.py [solution.py ...]     # default: tasks/solutions/cuda/** and the KB sample
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import build_cost  # noqa: E402

from kbench_env.backends.cuda import CudaBackend  # noqa: E402
from kbench_env.builder import torch_ext  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def check(path: Path, workdir: Path) -> str:
    req = build_cost.request_of(path)
    plans = torch_ext._plans(req, CudaBackend(), True)
    narrow = [p for p in plans if p[0] == "narrow"]
    if not narrow:
        return "| {} | no narrow head (refused) | | |".format(path.relative_to(ROOT))
    _, _, files, options = narrow[0]
    d = Path(tempfile.mkdtemp(dir=workdir))
    for name, text in files.items():
        (d / name).write_text(text)
    seen = {}

    def stop(command, cwd, timeout, what):
        seen["ninja"] = (Path(cwd) / "build.ninja").read_text()

    saved = build_cost.stepwise_run
    build_cost.stepwise_run = lambda label: stop  # compile_fn runs this in place of ninja
    try:
        build_cost.compile_fn(workdir, path.stem)(req["name"], [str(d / f) for f in files], options, str(d), 600.0)
    finally:
        build_cost.stepwise_run = saved
    flags = re.search(r"^cuda_cflags = (.*)$", seen["ninja"], re.M).group(1)
    dry = subprocess.run(["nvcc", *shlex.split(flags), "-c", str(d / "cuda.cu"), "-o", str(d / "cuda.o"), "--dryrun"],
                         capture_output=True, text=True, timeout=60)
    steps = [ln[3:] for ln in (dry.stdout + dry.stderr).splitlines() if ln.startswith("#$ ")
             and (ln.startswith("#$ PATH=") or not re.match(r"#\$ \w+=", ln))]  # the commands come expanded
    upto = next(i for i, ln in enumerate(steps) if ln.startswith("cudafe++"))
    c0 = _cpu()
    p = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(steps[:upto + 1])], capture_output=True, text=True,
                       timeout=900, cwd=str(d))
    cpu = _cpu() - c0
    errors = [ln for ln in (p.stdout + p.stderr).splitlines() if "error" in ln][:2] or [(p.stdout + p.stderr)[-300:]]
    verdict = "front end ok" if p.returncode == 0 else "FAILS: " + " / ".join(errors).replace("|", "/")[:300]
    return f"| {path.relative_to(ROOT)} | {verdict} | {cpu:.1f} | {len(files['cuda.cu'].splitlines())} |"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a).resolve() for a in args] or sorted((ROOT / "tasks/solutions/cuda").rglob("*.py")) + sorted(
        (ROOT / "bench/data/kernelbench_cuda").glob("*.py"))
    rows = ["| solution | narrow head | front-end CPU s | lines of cuda.cu |", "| --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="kb-narrow-") as d:
        for p in paths:
            rows.append(check(p, Path(d)))
            print(rows[-1], flush=True)
    failed = sum("FAILS" in r for r in rows)
    print(f"\n{len(paths)} solutions; narrow head front end fails for {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

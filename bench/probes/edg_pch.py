"""Probe (issue #36, builds): do cudafe++ and cicc (EDG front ends) take a precompiled header of the shared start of
their preprocessed input, as GCC does for the host compile (builder/nvcc_steps.py)?

Both read gcc's preprocessed output (no #include left), so nothing can be precompiled from it as it stands. Here the
input is split where the builder's shared start ends (nvcc_steps.split_at), the start written to a header and the
rest made to include it first, so the EDG "header stop" falls after the shared start. One source's build makes
the .pch (--create_pch), the other's uses it (--use_pch); each step's CPU seconds are measured against the same
step run on the whole input, and the outputs compared (cudafe++'s host source, line markers aside; cicc's PTX).

    python bench/probes/edg_pch.py [solution.py solution.py]   # default: relu, then gelu
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import build_cost  # noqa: E402

from kbench_env.builder import nvcc_steps, pch as binding_pch  # noqa: E402

KEPT: list = []  # (source .cu, Steps, keep dir) of each stepped compile


def _capture():
    plan, rmtree = nvcc_steps.plan, nvcc_steps.shutil.rmtree

    def planned(argv, cwd, keep, timeout):
        steps = plan(argv, cwd, keep, timeout)
        src = next(a for a in argv if a.endswith(".cu"))
        KEPT.append((src if os.path.isabs(src) else os.path.join(cwd, src), steps, keep, cwd))
        return steps

    class _Keep:
        @staticmethod
        def rmtree(path, ignore_errors=False):
            if not any(path == k[2] for k in KEPT):
                rmtree(path, ignore_errors=ignore_errors)

    nvcc_steps.plan = planned
    nvcc_steps.shutil = _Keep


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(steps, command: str, cwd: str) -> tuple:
    c0, w0 = _cpu(), time.perf_counter()
    p = subprocess.run(steps.script(command), cwd=cwd, capture_output=True, text=True, timeout=600)
    return _cpu() - c0, time.perf_counter() - w0, p.returncode, (p.stdout + p.stderr)[-1500:]


def split_input(path: str, lines: int, header: str) -> str | None:
    """``path`` split at the shared start: the start into ``header``, the rest (including it) written beside
    ``path``; the rest's path, or None."""
    text = open(path).read()
    parts = nvcc_steps.split_at(text, lines + 1)
    if parts is None:
        return None
    with open(header, "w") as f:
        f.write(parts[0])
    rest = path + ".rest.ii"
    with open(rest, "w") as f:
        f.write(f'#include "{header}"\n' + parts[1])
    return rest


def with_input(command: str, old: str, new: str, extra: list) -> str:
    tokens = shlex.split(command)
    tokens = [new if t == old else t for t in tokens]
    return shlex.join(tokens[:1] + extra + tokens[1:])


def strip_markers(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("#") and ln.strip())


def probe_step(name: str, index_of, kept: list, pchdir: str, lines: list) -> None:
    """Step ``name`` (index_of(steps) -> its command's index) of each kept compile: whole, then split with the
    .pch made by the first and used by the second."""
    pch = os.path.join(pchdir, f"{name}.pch")
    for k, ((src, steps, keep, cwd), n) in enumerate(zip(kept, lines)):
        i = index_of(steps)
        command = steps.commands[i]
        tokens = shlex.split(command)
        inp = next(t for t in tokens if t.endswith(".ii"))
        outs = [tokens[j + 1] for j, t in enumerate(tokens) if t in ("-o", "--gen_c_file_name", "--stub_file_name",
                                                                      "--gen_device_file_name")]
        whole = timed(steps, command, cwd)
        saved = {o: open(o).read() for o in outs if os.path.exists(o)}
        header = os.path.join(pchdir, f"{name}_start_{k}.h")
        rest = split_input(inp, n, header)
        if rest is None:
            print(f"{name} {Path(src).parent.name}: no split")
            continue
        flag = ["--create_pch", pch] if k == 0 else ["--use_pch", pch]
        split = timed(steps, with_input(command, inp, rest, flag), pchdir)
        same = {os.path.basename(o): (strip_markers(open(o).read()) == strip_markers(saved[o]))
                for o in saved if os.path.exists(o)}
        print(f"{name} build {k} ({flag[0]}): whole {whole[0]:.2f} CPU s / {whole[1]:.2f} s rc {whole[2]}; "
              f"split {split[0]:.2f} CPU s / {split[1]:.2f} s rc {split[2]}; outputs same (markers aside): {same}")
        if split[2] or "precompiled" in split[3]:
            print("   ", split[3].strip().replace("\n", "\n    ")[:1500])
        if k == 0 and not split[2]:
            plain = timed(steps, with_input(command, inp, rest, []), pchdir)
            print(f"    split without a pch: {plain[0]:.2f} CPU s rc {plain[2]}")


def main() -> int:
    paths = [Path(p) for p in sys.argv[1:]] or [ROOT / "tasks/solutions/cuda/level1/relu.py",
                                                 ROOT / "tasks/solutions/cuda/level1/gelu.py"]
    _capture()
    work = Path(tempfile.mkdtemp(prefix="edg-pch-"))
    headers = binding_pch.BindingHeaders(str(work / "binding-pch"))
    for p in paths:
        r = build_cost.build_one(p, str(work / f"store-{p.stem}"), work, headers=headers)
        print(f"built {p.stem}: {r['cpu']:.1f} CPU s, {r['plan']}")
    kept = [k for k in KEPT if k[1] is not None]
    if len(kept) < 2:
        print(f"only {len(kept)} stepped compiles kept: {KEPT}")
        return 1
    lines = [nvcc_steps.shared_lines(open(k[0]).read()) for k in kept]
    print("shared lines:", lines)
    pchdir = str(work / "pch")
    os.makedirs(pchdir)
    probe_step("cudafe", lambda s: s.cudafe, kept, pchdir, lines)
    probe_step("cicc", lambda s: next(i for i, c in enumerate(s.commands)
                                      if os.path.basename(shlex.split(c)[0]) == "cicc"), kept, pchdir, lines)
    print("work dir:", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

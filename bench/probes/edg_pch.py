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

import json
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
        src = src if os.path.isabs(src) else os.path.join(cwd, src)
        with open(src) as f:  # (the build's directory is gone after it)
            text = f.read()
        KEPT.append((text, steps, keep, keep))
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
    """``command`` (nvcc's text, its program perhaps a shell variable) reading ``new`` for ``old``, ``extra`` after
    its program."""
    program, rest = command.split(" ", 1)
    assert f'"{old}"' in rest or old in rest
    return " ".join([program, shlex.join(extra), rest.replace(old, new)])


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
            print(f"{name} build {k}: no split")
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


def one_command(name: str, index_of, kept: list, pchdir: str, norandom: bool) -> None:
    """The first compile's own split command makes the .pch and then reads it, on its own input and on the second
    source's rest put at its path (the header line kept): nothing differs but the text after the header stop.
    ``norandom``: both under ``setarch -R`` (EDG maps a .pch at the addresses it was made at)."""
    pch = os.path.join(pchdir, f"{name}-one.pch")
    (_, steps, keep, _), (_, _, keep1, _) = kept[0], kept[1]
    command = steps.commands[index_of(steps)]
    inp = next(t for t in shlex.split(command) if t.endswith(".ii"))
    rest, rest1 = inp + ".rest.ii", inp.replace(keep, keep1) + ".rest.ii"
    own = open(rest).read()
    wrap = "setarch x86_64 -R " if norandom else ""
    runs = [("create", ["--create_pch", pch], own), ("use, own input", ["--use_pch", pch], own),
            ("use, the other's rest", ["--use_pch", pch], own.split("\n", 1)[0] + "\n" + open(rest1).read().split("\n", 1)[1])]
    for what, flag, text in runs:
        with open(rest, "w") as f:
            f.write(text)
        cpu, wall, rc, out = timed(steps, wrap + with_input(command, inp, rest, flag), keep)
        said = " | ".join(ln for ln in out.splitlines() if "pch" in ln or "precompiled" in ln or "fault" in ln)
        print(f"{name} one command{' (setarch -R)' if norandom else ''}, {what}: {cpu:.2f} CPU s rc {rc}: {said}")
    with open(rest, "w") as f:
        f.write(own)


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
    lines = [nvcc_steps.shared_lines(k[0]) for k in kept]
    print("shared lines:", lines)
    with open(work / "steps.json", "w") as f:
        json.dump([{"env": k[1].env, "commands": k[1].commands, "keep": k[2], "lines": n} for k, n in zip(kept, lines)],
                  f, indent=1)
    pchdir = str(work / "pch")
    os.makedirs(pchdir)
    probe_step("cudafe", lambda s: s.cudafe, kept, pchdir, lines)
    probe_step("cicc", lambda s: next(i for i, c in enumerate(s.commands)
                                      if os.path.basename(shlex.split(c)[0]) == "cicc"), kept, pchdir, lines)
    for norandom in (False, True):
        one_command("cudafe", lambda s: s.cudafe, kept, pchdir, norandom)
        one_command("cicc", lambda s: next(i for i, c in enumerate(s.commands)
                                           if os.path.basename(shlex.split(c)[0]) == "cicc"), kept, pchdir, norandom)
    print("work dir:", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

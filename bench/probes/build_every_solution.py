"""Probe (issue #36): every shipped KernelBench-format CUDA solution built through the builder's own code
(bench/build_cost.build_one, --wall: commands run as the builder runs them), first as shipped and then as a
distinct candidate named anew, one builder's precompiled heads serving all; a JSON row per build appended to
<dir>/rows.jsonl: which plan built it (apart, narrow, light, written), CPU and wall seconds. A cut build's failure
is printed (it falls back to the next plan).

    python bench/probes/build_every_solution.py /tmp/every tasks/solutions/cuda/*/*.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import build_cost  # noqa: E402

from kbench_env.builder import pch  # noqa: E402
from kbench_env.builder import torch_ext  # noqa: E402


def main(argv: list) -> None:
    directory, paths = Path(argv[0]), argv[1:]
    directory.mkdir(parents=True, exist_ok=True)
    apart = torch_ext._compile_apart

    def told(*args, **kwargs):
        try:
            return apart(*args, **kwargs)
        except Exception as exc:  # the builder falls back; say why the cut build failed
            print("cut build failed:", str(exc)[:1500], flush=True)
            raise

    torch_ext._compile_apart = told
    heads = pch.BindingHeaders(str(directory / "pch"))
    with open(directory / "rows.jsonl", "a") as out:
        for path in paths:
            for salt in ("", "\n// a distinct candidate\n"):
                try:
                    row = build_cost.build_one(Path(path), str(directory / "store"), directory, salt=salt,
                                               headers=heads, wall=True, rename="_x" if salt else "")
                except Exception as exc:  # noqa: BLE001 - a row says it, the probe goes on
                    row = {"label": path, "error": str(exc)[:500]}
                row.update(path=path, second=bool(salt))
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

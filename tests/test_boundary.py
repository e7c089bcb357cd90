"""The trust boundary drawn in the tree (issue #38): what the sandboxed worker loads holds nothing of the trusted side.

- the worker's import closure: a fresh interpreter imports what a worker process has (the fork server's preloads,
  sandbox/confine/forkserver.py, which hold the worker loop and through it the executors and every backend) and
  lists the ``kbench_env`` modules it then holds: all of them are in ``WORKER_CLOSURE``, and none is the
  pipeline's, the env's, the executors' or the server's; a real worker, started by the Evaluator, reports the same
  of itself;
- statically, over every import statement (inside functions too): nothing under worker/, measure/ or backends/
  reaches the pipeline, measure/ imports neither side, and no module the worker's closure reaches does either;
- ``import kbench_env`` loads no module of the pipeline, while ``kbench_env.Evaluator`` and ``from kbench_env import
  Evaluator`` still give the Evaluator.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import cpu_evaluator
from kbench_env.sandbox.confine import forkserver
from kbench_env.tasks.suite import resolve_task

ROOT = Path(__file__).resolve().parent.parent

#: The packages of the trusted side only: a worker never holds a module of theirs.
TRUSTED_ONLY = ("kbench_env.pipeline", "kbench_env.env", "kbench_env.executors", "kbench_env.serving")

#: Every kbench_env module a worker may hold, by package ("" is the package itself). The fork server also preloads
#: the trusted builder's server (builder processes are forked from it too), hence the builder's modules.
WORKER_CLOSURE = {
    "kbench_env": ["", "fastpath"],
    "kbench_env.machine": ["", "device"],
    "kbench_env.worker": ["", "allocator", "audit", "audit_threads", "builds", "compile_gate", "cuda_wait",
                          "dispatch_records", "executor", "gpu_executor", "loop", "profile_times", "record_switches"],
    "kbench_env.measure": ["", "compare", "inputs", "ownership", "stats"],
    "kbench_env.protocol": ["", "cuda_ipc", "messages", "screen_error", "wire"],
    "kbench_env.config": ["", "environ"],  # the KBENCH_* variables' one reader (the builder's CUTLASS checkout)
    "kbench_env.backends": ["", "base", "cpu", "cu_scan", "cuda", "cutlass", "extension", "gpu_calibration",
                            "host_device_split", "kernel_launch", "narrow_head", "triton"],
    "kbench_env.tasks": ["", "pysource", "sizes", "task"],  # pysource: the parses of task.py and sizes.py
    "kbench_env.sandbox": [""],
    "kbench_env.sandbox.confine": ["", "audit_hook", "confinement", "environment", "landlock", "libc", "namespaces",
                                   "paths", "privileges", "record_controls", "rlimits", "seccomp"],
    "kbench_env.builder": ["", "cache", "compiler", "errors", "fast", "flags", "nvcc_steps", "pch", "requests",
                           "server", "store", "torch_ext"],
}
ALLOWED = {f"{pkg}.{m}" if m else pkg for pkg, mods in WORKER_CLOSURE.items() for m in mods}

#: What a worker process holds besides the fork server's preloads: its entry module (sandbox/worker_process.py
#: starts ``worker.loop.main``), the executors of timed blocks and the backends it may be asked for.
WORKER_ENTRIES = ["kbench_env.worker.loop", "kbench_env.worker.executor", "kbench_env.worker.gpu_executor",
                  "kbench_env.backends"]


def _fresh_modules(imports: list[str], then: str = "") -> dict:
    """The kbench_env modules a fresh interpreter holds after importing ``imports`` (and running ``then``)."""
    code = ("import importlib, json, sys\n"
            f"for m in {imports!r}: importlib.import_module(m)\n"
            f"{then}\n"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'kbench_env' or m.startswith('kbench_env.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT),
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _trusted(modules) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in TRUSTED_ONLY)]


def test_the_workers_import_closure_is_the_listed_one():
    loaded = _fresh_modules([m for m in forkserver._PRELOAD if m.startswith("kbench_env")] + WORKER_ENTRIES)
    assert not _trusted(loaded), f"a worker imports the trusted side: {_trusted(loaded)}"
    extra = sorted(set(loaded) - ALLOWED)
    assert not extra, (f"the worker's import closure ({len(loaded)} kbench_env modules) holds modules not in "
                       f"WORKER_CLOSURE: {extra} (a module the worker needs belongs there; one of the trusted side's "
                       "must not be reached)")
    assert "kbench_env.worker.loop" in loaded and "kbench_env.measure.compare" in loaded  # (the check can fail)


def test_the_checker_sees_a_trusted_module():
    assert _trusted(["kbench_env.worker.loop", "kbench_env.pipeline.evaluator", "kbench_env.env"]) == [
        "kbench_env.pipeline.evaluator", "kbench_env.env"]
    assert "kbench_env.pipeline.compare" not in ALLOWED


def test_a_real_worker_holds_no_module_of_the_trusted_side():
    """The closure as a sandboxed worker has it once the candidate loads: its source reports what the worker
    holds (after the fork server's preloads and the worker's own imports) in the error it raises."""
    source = (
        "import json, sys\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n\n"
        "def never():\n    return load_inline(name='never', cpp_sources='')\n\n\n"
        f"ALLOWED = {sorted(ALLOWED)!r}\n"
        "HELD = [m for m in sys.modules if m == 'kbench_env' or m.startswith('kbench_env.')]\n"
        "raise RuntimeError('worker holds ' + json.dumps(sorted(m for m in HELD if m not in ALLOWED)) + ' beyond '"
        " + str(len(HELD)))\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    r = cpu_evaluator().evaluate(resolve_task("level1/relu"), source)
    assert r.error and "RuntimeError: worker holds " in r.error, r.feedback()
    beyond = json.loads(r.error.split("RuntimeError: worker holds ", 1)[1].split(" beyond ", 1)[0])
    assert beyond == [], f"a sandboxed worker holds modules not in WORKER_CLOSURE: {beyond}"


# ---------------------------------------------------------------------- static: every import statement


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "kbench_env").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The kbench_env modules an import anywhere in ``path`` names (inside functions too), with the packages whose
    ``__init__`` each such import runs."""
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    found = set()
    for name in named:
        parts = name.split(".")
        found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & MODULES.keys()
    return found


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _reach(starts) -> dict[str, str | None]:
    """Every module reachable from ``starts`` over GRAPH, each with the module that first imports it."""
    came = {s: None for s in starts}
    todo = list(starts)
    while todo:
        m = todo.pop()
        for d in sorted(GRAPH[m]):
            if d not in came:
                came[d] = m
                todo.append(d)
    return came


def _path(came: dict, m: str) -> str:
    chain = [m]
    while came[chain[-1]] is not None:
        chain.append(came[chain[-1]])
    return " <- ".join(chain)


def _under(*packages: str) -> list[str]:
    return [m for m in MODULES if any(m == p or m.startswith(p + ".") for p in packages)]


def test_the_untrusted_side_never_reaches_the_pipeline():
    """From any module of worker/, measure/ or backends/ (the worker loads them all), following every import,
    nothing of the trusted side's packages is reached."""
    came = _reach(_under("kbench_env.worker", "kbench_env.measure", "kbench_env.backends"))
    bad = [_path(came, m) for m in _trusted(came)]
    assert not bad, "the worker's side imports the trusted side:\n" + "\n".join(bad)


def test_measure_imports_neither_side():
    bad = {m: sorted(d for d in GRAPH[m] if d.startswith(("kbench_env.pipeline", "kbench_env.worker")))
           for m in _under("kbench_env.measure")}
    assert not {m: d for m, d in bad.items() if d}, bad


def test_the_static_check_finds_a_path_to_the_pipeline():
    came = {"a": None, "b": "a", "kbench_env.pipeline.x": "b"}
    assert _trusted(came) == ["kbench_env.pipeline.x"]
    assert _path(came, "kbench_env.pipeline.x") == "kbench_env.pipeline.x <- b <- a"
    assert "kbench_env.pipeline.evaluator" in _reach(["kbench_env.env.env"])  # the trusted side does reach it


# ---------------------------------------------------------------------- the package's lazy names


def test_importing_the_package_loads_no_pipeline_and_its_names_still_resolve():
    bare = _fresh_modules(["kbench_env"])
    assert not _trusted(bare), bare
    names = _fresh_modules(["kbench_env"], then=(
        "import kbench_env\nfrom kbench_env import Evaluator, load_task\n"
        "from kbench_env.pipeline.evaluator import Evaluator as E\n"
        "assert kbench_env.Evaluator is Evaluator is E and callable(load_task)\n"
        "assert 'KBenchEnv' in dir(kbench_env) and kbench_env.KBenchEnv.__name__ == 'KBenchEnv'\n"
        "try:\n    kbench_env.no_such_name\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)"))
    assert "kbench_env.pipeline.evaluator" in names

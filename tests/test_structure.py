"""The package's shape, as issue #20 set it: the parts depend one way, and no module or function outgrows a reader.

- no module-level import circle inside ``kbench_env`` (imports inside functions are for optional extras and are
  left out of the graph);
- the environment never imports the apps, the agents or the training code, and the apps find agents through the
  ``kbench.agents`` entry-point group, not by importing them;
- no module over 400 lines, no function over 80 (the agents and the training code too), ``Evaluator`` under 200;
- no import inside a function, except of an optional extra or for a stated reason (``LATE_IMPORTS``);
- no comment or docstring citing a bench record, a GPU model's figures, a date or what the code did before
  (``NOT_IN_LIBRARY``): where a number came from is in bench/RESULTS.md, what changed in the git log.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kbench_env", "kbench_apps")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_EVALUATOR_LINES = 200


def _modules(package: str) -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = {name: path for pkg in PACKAGES for name, path in _modules(pkg).items()}
#: The folders installed as kbench_agents and kbench_training (pyproject.toml): held to the same sizes.
SIZED = {**MODULES, **_modules("agents"), **_modules("training")}
#: Import names of the agents and the training code: the installed ones, and the folders' own (never imported).
UPPER = ("kbench_agents", "kbench_training", "agents", "training")


def _top_level_imports(name: str, path: Path) -> set[str]:
    """Modules this one imports when it is imported (not inside functions; ``TYPE_CHECKING`` blocks excluded)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    continue
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                visit(getattr(node, "finalbody", []))
    visit(tree.body)
    return {m for m in found if m in MODULES or m.split(".")[0] in UPPER}


GRAPH = {name: _top_level_imports(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            # importing a package's submodule runs the package's __init__ first, which is not a cycle by itself
            if state.get(nxt) == 1 and not node.startswith(nxt + "."):
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def test_the_checker_finds_a_cycle_and_a_clean_graph():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle():
    assert _cycle(GRAPH) is None, f"import circle: {' -> '.join(_cycle(GRAPH))}"


def test_the_environment_never_imports_apps_agents_or_training():
    bad = {name: sorted(m for m in deps if m.split(".")[0] in ("kbench_apps", *UPPER))
           for name, deps in GRAPH.items() if name.startswith("kbench_env")}
    bad = {k: v for k, v in bad.items() if v}
    # imports inside functions count too: the env must not reach up at all
    for name, path in MODULES.items():
        if name.startswith("kbench_env"):
            for node in ast.walk(ast.parse(path.read_text())):
                mod = node.module if isinstance(node, ast.ImportFrom) else None
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [mod or ""]
                if any(n.split(".")[0] in ("kbench_apps", *UPPER) for n in names):
                    bad.setdefault(name, []).append(names[0])
    assert not bad, f"the env imports upward: {bad}"


def _imported_roots(path: Path) -> set[str]:
    """The top-level packages a module imports anywhere in it (inside functions too), absolute imports only."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_apps_find_agents_through_the_entry_point_group_only():
    """kbench_apps reaches agents through ``importlib.metadata.entry_points(group="kbench.agents")``, never by
    importing them: an agent from another package is then as much at home as the shipped ones."""
    bad = {name: sorted(_imported_roots(path) & set(UPPER)) for name, path in MODULES.items()
           if name.startswith("kbench_apps")}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"kbench_apps imports agents or training directly (use the kbench.agents entry points): {bad}"


#: Top-level packages of the optional extras (pyproject's optional-dependencies): imported where they are used,
#: inside functions, so that the core imports without them.
OPTIONAL_PACKAGES = {"trl", "transformers", "openai", "matplotlib", "ray", "triton", "peft", "accelerate", "datasets",
                     "vllm", "cupy", "httpx", "starlette", "uvicorn", "websockets"}

#: In-function imports of core modules that must stay late, each with its reason: (module, what it imports; a
#: dotted prefix).
LATE_IMPORTS = {
    ("kbench_apps.serve", "kbench_env.serving.app"): "it imports starlette, the [serve] extra",
    ("kbench_env.env.factory", "kbench_env.serving.remote_env"): "it imports httpx, the [serve] extra",
    ("kbench_env", "kbench_env.env.env"):
        "gymnasium may be absent (a bare GPU image): `import kbench_env` gives the Evaluator without it",
    ("kbench_env.backends.extension", "torch.utils.cpp_extension"):
        "the fork server imports this module and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_apps.report", "kbench_apps.plots"): "plots imports matplotlib, the [plot] extra, at its top",
    ("kbench_env.builder.torch_ext", "torch.utils.cpp_extension"):
        "the fork server imports the builder's server, and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_env.backends.narrow_head", "torch.utils.cpp_extension"):
        "the fork server imports the CUDA backend, and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_env.worker.builds", "torch.utils.cpp_extension"):
        "the fork server imports the worker loop, and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_env.pipeline.integrity", "torch.utils.flop_counter"):
        "a quarter of a second to import, for the roofline floor only (the trusted side, once per configuration)",
    ("kbench_env.fastpath", "kbench_env.builder.fast"):
        "only a process with no builder to ask (the builder itself, a test) builds in place; candidates import "
        "fastpath in the worker, which must not load the compiler's driver code",
}

def _function_imports(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each import inside a function: ``what`` is the module, or ``module.name`` for each name
    of a ``from module import name`` (absolute imports; relative ones are not used in these packages)."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, a.name) for a in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                found.extend((child.lineno, f"{child.module}.{a.name}") for a in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source), False)
    return found


def _late_import_allowed(module: str, what: str) -> bool:
    if what.split(".")[0] in OPTIONAL_PACKAGES:
        return True
    return any(m == module and (what == w or what.startswith(w + "."))
               for m, w in LATE_IMPORTS)


def test_the_checker_finds_imports_inside_functions():
    src = "import os\ndef f():\n    import json\n    from kbench_env.tasks import task\n    class C:\n" \
          "        def g(self):\n            import triton\n"
    assert _function_imports(src) == [(3, "json"), (4, "kbench_env.tasks.task"), (7, "triton")]
    assert _late_import_allowed("m", "triton.runtime.jit.JITFunction")
    assert not _late_import_allowed("m", "json")
    assert _late_import_allowed("kbench_apps.report", "kbench_apps.plots.make_plots")
    assert not _late_import_allowed("kbench_apps.cli", "kbench_apps.plots.make_plots")


def test_no_import_inside_a_function_but_optional_extras_and_stated_exceptions():
    bad = [f"{MODULES[name].relative_to(ROOT)}:{line} imports {what}" for name in sorted(MODULES)
           for line, what in _function_imports(MODULES[name].read_text()) if not _late_import_allowed(name, what)]
    assert not bad, ("imports inside functions (move them to the module's top; an optional extra belongs in "
                     "OPTIONAL_PACKAGES, a late import with a reason in LATE_IMPORTS): " + "; ".join(bad))


def test_the_optional_packages_are_no_core_dependency():
    core = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower()
            for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert not OPTIONAL_PACKAGES & core


@pytest.mark.parametrize("name", sorted(SIZED))
def test_module_size(name):
    lines = len(SIZED[name].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{SIZED[name].relative_to(ROOT)}: {lines} lines (at most {MAX_MODULE_LINES})"


@pytest.mark.parametrize("name", sorted(SIZED))
def test_function_size(name):
    tree = ast.parse(SIZED[name].read_text())
    long = [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{SIZED[name].relative_to(ROOT)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_evaluator_holds_only_the_stage_order():
    tree = ast.parse(MODULES["kbench_env.pipeline.evaluator"].read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Evaluator"]
    assert cls.end_lineno - cls.lineno + 1 < MAX_EVALUATOR_LINES


#: What library code does not hold: a bench record cited, a GPU model (its figures belong to a record), a date, a
#: change-log phrase. Comments say why the code is so; bench/RESULTS.md says where its numbers came from.
NOT_IN_LIBRARY = re.compile(
    r"bench/results/|\b(?:[AHB]100|H[28]00|A10G?|[GH]?B200|V100|L40S?|MI[23]\d0X?|RTX ?\d{4})s?\b"
    r"|\b20\d\d-[01]\d-[0-3]\d\b|\bA/B\b|\b[Aa]s before\b|\b[Nn]o longer\b(?! (?:needed|matches))")


def test_the_library_check_finds_citations_figures_and_change_logs():
    for line in ("(bench/results/trust_gpu.md)", "about 1 ms on an H200", "4 H100s of one host", "on 2026-11-25",
                 "an A/B knob", "judged as before the pipelining", "kept, but no longer shapes the timing"):
        assert NOT_IN_LIBRARY.search(line), line
    for line in ("the outputs are no longer needed", "a build whose library no longer matches its digest",
                 "HIP on MI-series cards", "bench/hold_overlap.py checks the log", "a 100 MB limit",
                 "figures: bench/RESULTS.md"):
        assert not NOT_IN_LIBRARY.search(line), line


def test_library_code_cites_no_bench_record_gpu_figure_date_or_change_log():
    bad = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for path in SIZED.values()
           for i, line in enumerate(path.read_text().splitlines(), 1) if NOT_IN_LIBRARY.search(line)]
    assert not bad, ("figures and their sources belong in bench/ records (bench/RESULTS.md), history in the git "
                     "log; comments say why the code is so:\n" + "\n".join(bad))


def test_the_fork_servers_preloads_do_not_import_cpp_extension():
    """With a CUDA build of torch, importing torch.utils.cpp_extension in the fork server makes every forked worker
    fail "Cannot re-initialize CUDA in forked subprocess" (sandbox/confine/forkserver.py): no preload may pull it in."""
    from kbench_env.sandbox.confine import forkserver

    code = ("import sys, importlib\n"
            f"for m in {forkserver._PRELOAD!r}: importlib.import_module(m)\n"
            "print('torch.utils.cpp_extension' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False", "a fork-server preload imports torch.utils.cpp_extension"

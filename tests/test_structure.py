"""The package's shape, as issues #20 and #38 set it: the parts depend one way, each name means one thing, and no
module or function outgrows a reader. Every package is held to it: kbench_env's, kbench_apps, the agents and the
training code (installed as kbench_agents and kbench_training), and the verifiers plugin module.

- no module-level import circle (imports inside functions are for optional extras and are left out of this graph);
- between packages, imports anywhere in a module count: no two packages import each other, and the packages keep
  the layers of DESIGN.md (``LAYERS``);
- the environment never imports the apps, the agents or the training code, and the apps find agents through the
  ``kbench.agents`` entry-point group, not by importing them;
- kbench_env's root holds its facade and the candidates' fast-path toolkit only; no two modules share a file name;
- no module over 400 lines, no function over 80, ``Evaluator`` under 200;
- no import inside a function in kbench_env and kbench_apps, except of an optional extra or for a stated reason
  (``LATE_IMPORTS``);
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
#: The folders of the packages and the names they are imported by (pyproject.toml installs agents/ and training/
#: as kbench_agents and kbench_training, through the links of those names at the root).
PACKAGES = {"kbench_env": "kbench_env", "kbench_apps": "kbench_apps", "agents": "kbench_agents",
            "training": "kbench_training", "kbench_verifiers": "kbench_verifiers"}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_EVALUATOR_LINES = 200


def _modules(folder: str, name: str) -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        parts = [name, *path.relative_to(ROOT / folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = {name: path for folder, pkg in PACKAGES.items() for name, path in _modules(folder, pkg).items()}
#: The environment and the apps: held to the rule on late imports too.
CORE = {name: path for name, path in MODULES.items() if name.split(".")[0] in ("kbench_env", "kbench_apps")}
#: Import names of the agents and the training code: the installed ones, and the folders' own (never imported).
UPPER = ("kbench_agents", "kbench_training", "agents", "training")


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> set[str]:
    """What one import statement names: ``m`` and, for ``from m import f``, ``m.f`` (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(up + ([node.module] if node.module else []))
    return {base} | {f"{base}.{a.name}" for a in node.names}


def _top_level_imports(name: str, path: Path) -> set[str]:
    """Modules this one imports when it is imported (not inside functions; ``TYPE_CHECKING`` blocks excluded)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_imported(node, package))
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
    ("kbench_apps.integrations.verl_reward", "kbench_env.serving.remote"):
        "it imports httpx, the [serve] extra, which only scoring on a server needs",
    ("kbench_env.backends.extension", "torch.utils.cpp_extension"):
        "the fork server imports this module and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_apps.report", "kbench_apps.plots"): "plots imports matplotlib, the [plot] extra, at its top",
    ("kbench_env.builder.torch_ext", "torch.utils.cpp_extension"):
        "the fork server imports the builder's server, and must not import cpp_extension "
        "(sandbox/confine/forkserver.py)",
    ("kbench_env.builder.pch", "torch.utils.cpp_extension"):
        "the fork server imports the builder's server, and must not import cpp_extension "
        "(sandbox/confine/forkserver.py)",
    ("kbench_env.backends.narrow_head", "torch.utils.cpp_extension"):
        "the fork server imports the CUDA backend, and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_env.worker.builds", "torch.utils.cpp_extension"):
        "the fork server imports the worker loop, and must not import cpp_extension (sandbox/confine/forkserver.py)",
    ("kbench_env.pipeline.integrity", "torch.utils.flop_counter"):
        "a quarter of a second to import, for the roofline floor only (the trusted side, once per configuration)",
    ("kbench_env.worker.compile_gate", "torch._dynamo"):
        "every worker imports this module, and only a reference's worker that compiles needs dynamo",
    ("kbench_env.worker.compile_gate", "torch._inductor"):
        "every worker imports this module, and only a reference's worker that compiles needs inductor",
    ("kbench_env.builder.compiler", "kbench_env.sandbox.confine.proc_table"):
        "the worker's import closure reaches this module (its CompileError), and the process table's reader, which "
        "only a build past its deadline needs, is not in that closure (tests/test_boundary.py)",
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
    bad = [f"{CORE[name].relative_to(ROOT)}:{line} imports {what}" for name in sorted(CORE)
           for line, what in _function_imports(CORE[name].read_text()) if not _late_import_allowed(name, what)]
    assert not bad, ("imports inside functions (move them to the module's top; an optional extra belongs in "
                     "OPTIONAL_PACKAGES, a late import with a reason in LATE_IMPORTS): " + "; ".join(bad))


def test_the_optional_packages_are_no_core_dependency():
    core = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower()
            for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert not OPTIONAL_PACKAGES & core


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{MODULES[name].relative_to(ROOT)}: {lines} lines (at most {MAX_MODULE_LINES})"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_size(name):
    tree = ast.parse(MODULES[name].read_text())
    long = [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{MODULES[name].relative_to(ROOT)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


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
    bad = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for path in MODULES.values()
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


#: The modules that read ``KBENCH_*`` environment variables: config/environ.py alone, each exception with its reason.
ENVIRON_READERS = {"kbench_env.config.environ": "the one place: its table names each variable, its type and default"}
_KBENCH_NAME = re.compile(r"^KBENCH_[A-Z0-9_]+$")


def _names_kbench_variable(node: ast.AST) -> bool:
    """Whether ``node`` is a string naming a KBENCH_ variable, or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(_KBENCH_NAME.match(node.value))
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_names_kbench_variable(e) for e in node.elts)


def _kbench_constants(sources: list[str]) -> set[str]:
    """Module-level names bound to a KBENCH_ variable's name (``TOKEN_ENV = "KBENCH_TOKEN"``) in any of
    ``sources``, and the names they are imported as."""
    found: set[str] = set()
    trees = [ast.parse(s) for s in sources]
    for tree in trees:
        for node in tree.body:
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:  # ``A = "KBENCH_X"``, and ``A, B = "KBENCH_X", "KBENCH_Y"`` pairwise
                pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                         and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                found.update(t.id for t, v in pairs if isinstance(t, ast.Name) and _names_kbench_variable(v))
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found.update(a.asname for a in node.names if a.asname and a.name in found)
    return found


def _environment_reads(source: str, constants: set[str]) -> list[int]:
    """Lines that read a KBENCH_ variable from the process environment: ``os.environ.get(k)``, ``os.getenv(k)``,
    ``os.environ[k]``, ``k in os.environ``, where ``k`` is such a name, a constant of one (``constants``) or a loop
    variable over them."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def kbench_key(key: ast.AST) -> bool:
        if _names_kbench_variable(key) or (isinstance(key, ast.Name) and key.id in constants):
            return True
        if not isinstance(key, ast.Name):
            return False
        node = key
        while node in parents:  # a loop variable: ``for k in ("KBENCH_A", ...)`` or over a constant
            node = parents[node]
            for loop in ([node] if isinstance(node, ast.For) else getattr(node, "generators", [])):
                if any(isinstance(t, ast.Name) and t.id == key.id for t in ast.walk(loop.target)):
                    return any(_names_kbench_variable(n) or (isinstance(n, ast.Name) and n.id in constants)
                               for n in ast.walk(loop.iter))
        return False

    lines = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" \
                and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and any(ast.unparse(c) == "os.environ" for c in node.comparators):
            key = node.left
        if key is not None and kbench_key(key):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_checker_finds_environment_reads():
    src = ('import os\nTOKEN = "KBENCH_TOKEN"\nA = os.environ.get("KBENCH_X", "1")\nB = os.getenv(TOKEN)\n'
           'C = [os.environ.get(k) for k in ("KBENCH_Y", "OTHER")]\nfor v in ("KBENCH_Z",):\n    D = os.environ[v]\n'
           'E = "KBENCH_W" in os.environ\nF = os.environ.get("HOME")\nG = environ.get("KBENCH_X")\n'
           'U, V = "KBENCH_U", "KBENCH_V"\nfor key, var in (("u", U), ("v", V)):\n    H = os.environ.get(var)\n')
    assert _environment_reads(src, _kbench_constants([src])) == [3, 4, 5, 7, 8, 13]
    assert _kbench_constants(["A = ('KBENCH_A', 'B')\n", "from m import A as ENV_VARS\n"]) == {"A", "ENV_VARS"}


def test_kbench_environment_variables_are_read_in_one_module():
    """config/environ.py reads the KBENCH_* variables (its table says what each is); everything else asks it."""
    sources = {name: path.read_text() for name, path in MODULES.items()}
    constants = _kbench_constants(list(sources.values()))
    bad = [f"{MODULES[name].relative_to(ROOT)}:{line}" for name, src in sorted(sources.items())
           if name not in ENVIRON_READERS for line in _environment_reads(src, constants)]
    assert not bad, ("KBENCH_ variables read outside kbench_env/config/environ.py (read them with "
                     "environ.get(name), adding the variable to its table): " + "; ".join(bad))
    assert set(ENVIRON_READERS) <= set(MODULES)


#: The Evaluator's own state, which evaluator.py alone touches: the stages get a StageContext (pipeline/context.py).
EVALUATOR_PRIVATE = ("_spares", "_device_lock", "_device_slots", "_trusted_threads")


def _takes_the_evaluator(source: str) -> list[str]:
    """Functions of ``source`` with a parameter that is the Evaluator (named ``ev`` or ``evaluator``, or annotated
    ``Evaluator``), and reads of the Evaluator's private state."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs:
                annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                if arg.arg in ("ev", "evaluator") or re.search(r"\bEvaluator\b", annotation):
                    found.append(f"{node.name}({arg.arg})")
        elif isinstance(node, ast.Attribute) and node.attr in EVALUATOR_PRIVATE:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_the_checker_finds_a_stage_that_takes_the_evaluator():
    assert _takes_the_evaluator("def check(ev, task):\n    ev._device_lock.acquire()\n") == [
        "check(ev)", "line 2: ._device_lock"]
    assert _takes_the_evaluator("def time(x: 'Evaluator'):\n    pass\n") == ["time(x)"]
    assert _takes_the_evaluator("def check(ctx: StageContext):\n    ctx.hold.lock.acquire()\n") == []


def test_no_stage_function_takes_the_evaluator():
    """The stages (every pipeline module but evaluator.py) take a StageContext, never the Evaluator: what a stage
    reads of the evaluator is in the context, and the Evaluator's state is its own."""
    bad = {name: found for name, path in MODULES.items()
           if name.startswith("kbench_env.pipeline.") and name != "kbench_env.pipeline.evaluator"
           for found in [_takes_the_evaluator(path.read_text())] if found}
    assert not bad, f"pipeline modules that take the Evaluator or reach its private state: {bad}"


# ---------------------------------------------------------------------------------------------- package arrows

#: The layers of DESIGN.md's Layout, top to bottom: a package imports packages of its own layer or below, and
#: inside a layer one way only. ``kbench_env`` is the package's own ``__init__``, its facade (the public names, and
#: gym.make's ``make_env``, which picks the local env or the served one); ``fastpath`` is the candidates' toolkit
#: (``from kbench_env.fastpath import cpp_kernel``: part of the fast action format), which the worker routes to the
#: builder; ``sandbox/confine`` is the sandbox's lower layer, which the builder's process uses too.
LAYERS = (
    ("kbench_verifiers", "kbench_apps", "kbench_agents", "kbench_training"),
    ("kbench_env",),
    ("serving",),
    ("env", "executors"),
    ("pipeline",),
    ("sandbox", "worker", "fastpath", "builder", "backends", "protocol", "measure"),
    ("sandbox/confine",),
    ("tasks",),
    ("machine",),
    ("config",),
)
#: The modules at kbench_env's root besides its __init__, each with why it is not in a package.
ROOT_MODULES = {"fastpath": "the fast action format's toolkit, imported by candidates by this name"}


def _package(module: str) -> str:
    """A module's node in the package graph: the subpackage of kbench_env it is in (``sandbox/confine``, the lower
    layer, is a node of its own), a module at kbench_env's root, ``kbench_env`` for its __init__, or the package."""
    parts = module.split(".")
    if parts[0] != "kbench_env":
        return parts[0]
    if len(parts) == 1:
        return "kbench_env"
    return "sandbox/confine" if parts[1:3] == ["sandbox", "confine"] else parts[1]


def _module_of(name: str) -> str | None:
    """The module an imported name is in (``kbench_env.machine.device.Device`` -> ``kbench_env.machine.device``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _package_graph() -> dict[str, dict[str, set[str]]]:
    """{package: {package it imports: {"module -> module", ...}}}, counting imports anywhere in a module (one inside
    a function is as much a dependency as one at the top)."""
    graph: dict = {}
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in filter(None, map(_module_of, _imported(node, package))):
                    if _package(target) != _package(name):
                        graph.setdefault(_package(name), {}).setdefault(_package(target), set()).add(
                            f"{name} -> {target}")
    return graph


PACKAGE_GRAPH = _package_graph()
_RANK = {package: i for i, layer in enumerate(LAYERS) for package in layer}


def _arrows(graph) -> dict[tuple, set]:
    return {(a, b): why for a, deps in graph.items() for b, why in deps.items()}


def _upward(graph) -> dict[tuple, set]:
    """The arrows of ``graph`` from a lower layer to a higher one."""
    return {(a, b): why for (a, b), why in _arrows(graph).items() if _RANK[a] > _RANK[b]}


def test_the_package_checker_names_nodes_and_finds_upward_arrows():
    assert _package("kbench_env.sandbox.confine.policy") == "sandbox/confine"
    assert _package("kbench_env.sandbox.worker_process") == "sandbox"
    assert (_package("kbench_env.fastpath"), _package("kbench_env"), _package("kbench_agents.llm")) == \
        ("fastpath", "kbench_env", "kbench_agents")
    assert _module_of("kbench_env.machine.device.Device") == "kbench_env.machine.device"
    graph = {"tasks": {"pipeline": {"t -> p"}}, "pipeline": {"tasks": {"p -> t"}}}
    assert list(_upward(graph)) == [("tasks", "pipeline")]


def test_every_package_has_a_layer():
    missing = {_package(name) for name in MODULES} - set(_RANK)
    assert not missing, f"packages in no layer of LAYERS (place each where DESIGN.md's Layout puts it): {missing}"


def test_no_two_packages_import_each_other():
    arrows = _arrows(PACKAGE_GRAPH)
    pairs = {(a, b): sorted(arrows[a, b])[:3] + sorted(arrows[b, a])[:3]
             for a, b in arrows if a < b and (b, a) in arrows}
    assert not pairs, f"packages importing each other: {pairs}"


def test_the_packages_keep_their_layers():
    up = {k: sorted(v)[:3] for k, v in _upward(PACKAGE_GRAPH).items()}
    assert not up, f"imports from a lower layer into a higher one (LAYERS): {up}"


def test_no_package_circle_inside_a_layer():
    arrows = _arrows(PACKAGE_GRAPH)
    same = {}
    for a, b in arrows:
        if _RANK[a] == _RANK[b]:
            same.setdefault(a, set()).add(b)
    assert _cycle(same) is None, f"package circle: {' -> '.join(_cycle(same))}"


def test_the_package_root_holds_its_facade_and_the_candidates_toolkit_only():
    loose = {p.stem for p in (ROOT / "kbench_env").glob("*.py")} - {"__init__"}
    assert loose == set(ROOT_MODULES), f"modules at kbench_env's root: {sorted(loose)} (give each a package)"


def test_no_two_modules_share_a_file_name():
    """One name per concept: ``timing``, ``client`` or ``reports`` in two packages made a reader ask which one."""
    seen: dict = {}
    for name, path in MODULES.items():
        if path.stem not in ("__init__", "__main__"):
            seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    shared = {stem: paths for stem, paths in seen.items() if len(paths) > 1}
    assert not shared, f"modules sharing a file name: {shared}"


def test_agents_and_training_install_and_import_under_kbench_names():
    """agents/ and training/ are imported as kbench_agents and kbench_training (links at the root, which pyproject.toml
    installs), never as ``agents`` or ``training``: names a user's environment may hold for its own packages."""
    for folder, name in (("agents", "kbench_agents"), ("training", "kbench_training")):
        assert (ROOT / name).is_symlink() and (ROOT / name).resolve() == (ROOT / folder).resolve()
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {"kbench_agents*", "kbench_training*"} <= set(include) and not {"agents*", "training*"} & set(include)
    bad = {name: sorted(_imported_roots(path) & {"agents", "training"}) for name, path in MODULES.items()}
    assert not {k: v for k, v in bad.items() if v}, f"imports of the folders' own names: {bad}"

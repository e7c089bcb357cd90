"""Packaging: what `pip install .` brings, that an installed (non-editable) kbench finds its shipped tasks, how a
backend from outside the package is made available, and how the runner finds agents (the kbench.agents group)."""

from __future__ import annotations

import argparse
import glob
import importlib
import importlib.metadata
import inspect
import re
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from kbench_apps import runner
from kbench_env.tasks import suite

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def test_core_dependencies_are_what_the_environment_needs():
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert {"torch", "gymnasium", "numpy", "ninja"} <= core
    # training and LLM clients are extras: a gym environment must not pull them
    assert not core & {"trl", "transformers", "openai", "matplotlib", "ray", "peft", "datasets", "vllm"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {"trl", "transformers"} <= {_name(r) for r in extras["train"]}
    assert {"openai", "transformers"} <= {_name(r) for r in extras["llm"]}


def test_every_package_a_test_skips_without_is_in_the_test_extra():
    """`scripts/setup.sh --test` installs the [test] extra (CI does the same): a package a test skips without must
    come with it (listed, or required by a listed one), or that test never runs in CI."""
    test_extra = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    brought = set(test_extra)
    for dist in test_extra:
        try:
            reqs = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        brought |= {_name(r) for r in reqs if "extra ==" not in r}
    skipped_without = set()
    for f in (ROOT / "tests").glob("*.py"):
        skipped_without |= set(re.findall(r'importorskip\("([A-Za-z_]+)"\)', f.read_text()))
    missing = {m for m in skipped_without if m.replace("_", "-") not in brought and m not in brought}
    assert not missing, f"tests skip without {sorted(missing)}, which the [test] extra does not install"


def test_every_shipped_task_file_is_installed_as_data():
    data_files = PYPROJECT["tool"]["setuptools"]["data-files"]
    installed = {}
    for dest, patterns in data_files.items():
        for pattern in patterns:
            for f in glob.glob(str(ROOT / pattern)):
                installed[Path(f).relative_to(ROOT)] = Path(dest) / Path(f).name
    shipped = {f.relative_to(ROOT) for f in (ROOT / "tasks").rglob("*") if f.is_file() and "__pycache__" not in f.parts}
    assert shipped, "no tasks found"
    missing = sorted(str(f) for f in shipped - set(installed))
    assert not missing, f"tasks not listed in pyproject's [tool.setuptools.data-files]: {missing[:5]}"
    # each lands at the same relative place under share/kbench/
    assert all(dest == Path("share/kbench") / src for src, dest in installed.items())


def test_an_installed_package_finds_the_tasks_under_its_prefix(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "site-packages" / "kbench_env" / "tasks"
    site.mkdir(parents=True)
    monkeypatch.setattr(suite, "__file__", str(site / "suite.py"))
    monkeypatch.delenv("KBENCH_TASKS", raising=False)
    data = tmp_path / "prefix"
    monkeypatch.setattr(suite, "_install_prefixes", lambda: [str(tmp_path / "elsewhere"), str(data)])
    installed = data / "share" / "kbench" / "tasks"
    assert suite.tasks_root() != installed  # nothing installed yet
    installed.mkdir(parents=True)
    (installed / "suites.json").write_text("{}")
    assert suite.tasks_root() == installed
    monkeypatch.setenv("KBENCH_TASKS", str(tmp_path / "mine"))
    assert suite.tasks_root() == tmp_path / "mine"


def test_a_backend_registered_from_outside_is_found_by_name_and_the_default_follows_the_device():
    from kbench_env.backends import CpuBackend, default_backend, get_backend, register_backend

    class MyCpu(CpuBackend):
        name = "my-cpu"

    from kbench_env import backends

    register_backend("my-cpu", MyCpu)
    try:
        assert isinstance(get_backend("my-cpu"), MyCpu)
    finally:
        backends._BACKENDS.pop("my-cpu")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        get_backend("nope")
    assert (default_backend("cpu"), default_backend("cuda:1")) == ("cpu", "cuda")



def test_every_installed_import_name_is_our_own():
    """`pip install .` puts kbench_env, kbench_apps, kbench_agents and kbench_training on sys.path, nothing as
    generic as `agents` or `training` that a user's own package could be (the folders agents/ and training/ are
    installed under the kbench_ names: the links kbench_agents and kbench_training at the root point at them)."""
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include and all(pattern.startswith("kbench_") for pattern in include), include
    for folder in ("agents", "training"):
        link = ROOT / f"kbench_{folder}"
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), f"{link} does not point at {folder}/"
    for target in PYPROJECT["project"]["entry-points"]["kbench.agents"].values():
        assert target.startswith("kbench_agents."), target


def test_nothing_imports_the_agents_or_the_training_code_by_its_folder_name():
    """`import agents` only works from the checkout's root, and would load a second copy beside kbench_agents."""
    pattern = re.compile(r"^\s*(from|import)\s+(agents|training)\b|-m\s+(agents|training)\.", re.M)
    files = [f for ext in ("py", "sh", "md", "toml") for f in ROOT.glob(f"**/*.{ext}")
             if not {".git", ".venv", "results", "node_modules"} & set(f.relative_to(ROOT).parts)
             and f.relative_to(ROOT).parts[0] not in ("kbench_agents", "kbench_training")]
    bad = [f"{f.relative_to(ROOT)}: {m.group(0).strip()}" for f in files for m in pattern.finditer(f.read_text())]
    assert not bad, f"imports of the folder names (use kbench_agents / kbench_training): {bad}"

# ====================================================================== agents: the kbench.agents entry points
AGENT_GROUP = PYPROJECT["project"]["entry-points"]["kbench.agents"]


def _agent_classes() -> set[type]:
    """Every public class under agents/ that plays episodes: the shipped agents."""
    found = set()
    for path in sorted((ROOT / "agents").glob("*.py")):
        mod = importlib.import_module(f"kbench_agents.{path.stem}")
        found |= {obj for name, obj in vars(mod).items() if inspect.isclass(obj) and not name.startswith("_")
                  and obj.__module__ == mod.__name__ and callable(getattr(obj, "run_episode", None))}
    return found


def test_every_shipped_agent_is_registered_in_the_entry_point_group():
    assert {"shipped", "evolutionary", "single_shot", "best_of_n", "refine"} <= set(AGENT_GROUP)
    options = argparse.Namespace(llm="offline", budget=3, seed=0)  # the LLM baselines with the offline client
    built = {}
    for name, target in AGENT_GROUP.items():
        factory = EntryPoint(name, target, "kbench.agents").load()
        built[name] = factory("cpu", options)
        assert callable(built[name].run_episode), f"{name} ({target}) built no agent"
    classes = _agent_classes()
    assert classes, "no agent classes found under agents/"
    missing = sorted(c.__name__ for c in classes if not any(isinstance(a, c) for a in built.values()))
    assert not missing, f"agents no [project.entry-points.\"kbench.agents\"] factory builds: {missing}"


def _fake_group(monkeypatch, tmp_path, entries: dict[str, str]) -> None:
    """The runner sees exactly ``entries`` in its group; the factories live in a module of tmp_path."""
    (tmp_path / "fake_agents.py").write_text(
        "class Agent:\n"
        "    def __init__(self, name, backend, options):\n"
        "        self.name, self.backend, self.options = name, backend, options\n"
        "    def run_episode(self, env, task, seed=None):\n"
        "        yield from ()\n"
        "def mine(backend, options):\n"
        "    return Agent('mine', backend, options)\n"
        "def evolutionary(backend, options):\n"
        "    return Agent('evolutionary', backend, options)\n"
        "def shipped(backend, options):\n"
        "    return Agent('shipped', backend, options)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint(name, value, runner.AGENT_GROUP) for name, value in entries.items()]
    monkeypatch.setattr(runner, "entry_points", lambda group: [e for e in eps if group == runner.AGENT_GROUP])


def test_the_runner_finds_agents_through_the_group_and_names_the_installed_ones(monkeypatch, tmp_path):
    _fake_group(monkeypatch, tmp_path, {"mine": "fake_agents:mine", "shipped": "fake_agents:shipped",
                                        "broken": "fake_agents_gone:make"})
    options = argparse.Namespace(budget=2, proposer="llm")
    agent = runner.make_agent("mine", "triton", options)
    assert (agent.name, agent.backend, agent.options) == ("mine", "triton", options)
    with pytest.raises(ValueError, match=r"no agent named 'nope' .*'kbench.agents'.*installed: broken, mine, shipped"):
        runner.make_agent("nope", "cpu")
    with pytest.raises(ValueError, match=r"agent 'broken' is registered as 'fake_agents_gone:make'.*fake_agents_gone"):
        runner.make_agent("broken", "cpu")
    assert runner.make_agent("auto", "cpu").name == "shipped"  # no evolutionary agent installed


def test_auto_is_the_evolutionary_agent_with_the_offline_proposer_where_installed(monkeypatch, tmp_path):
    _fake_group(monkeypatch, tmp_path, {"evolutionary": "fake_agents:evolutionary", "shipped": "fake_agents:shipped"})
    agent = runner.make_agent("auto", "cpu", argparse.Namespace(budget=5, proposer="llm", soft_verify=True))
    assert agent.name == "evolutionary"
    assert (agent.options.budget, agent.options.proposer, agent.options.soft_verify) == (5, "offline", False)

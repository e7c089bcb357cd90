"""Packaging: what `pip install .` brings, that an installed (non-editable) kbench finds its shipped tasks, and
how a backend from outside the package is made available."""

from __future__ import annotations

import glob
import re
import tomllib
from pathlib import Path

import pytest

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

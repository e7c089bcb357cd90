"""``kbench run --format auto``: the fast format only where the run replays or tunes shipped solutions on a GPU and
every task has a fast one; KernelBench's format for models' candidates, off the CUDA backend, and where a task lacks
a fast solution."""

import argparse

import pytest

from kbench_apps import run_format as rf
from kbench_apps.cli import build_parser
from kbench_env.tasks.suite import load_suite


@pytest.fixture
def tasks():
    return load_suite("default")


@pytest.fixture
def fast_everywhere(monkeypatch):
    """Every task has a KernelBench-format and a fast CUDA solution, whatever is shipped today."""
    monkeypatch.setattr(rf, "solution_path", lambda task, backend, fmt="kernelbench": f"{backend}/{fmt}/{task.name}")


def test_a_named_format_is_kept(tasks):
    assert rf.run_format("triton", "auto", None, "cuda", None, tasks)[0] == "triton"
    assert rf.run_format("kernelbench", "shipped", None, "cuda", None, tasks)[0] == "kernelbench"


def test_auto_is_fast_on_a_gpu_for_shipped_solutions(tasks, fast_everywhere):
    for agent, proposer in (("auto", None), ("auto", "llm"), ("shipped", None), ("evolutionary", "offline")):
        fmt, why = rf.run_format("auto", agent, proposer, "cuda", None, tasks)
        assert fmt == "fast", (agent, proposer, why)
    assert rf.run_format("auto", "auto", None, "cuda:1", "cuda", tasks)[0] == "fast"


def test_auto_keeps_kernelbench_for_models_and_off_cuda(tasks, fast_everywhere):
    assert rf.run_format("auto", "evolutionary", "llm", "cuda", None, tasks)[0] == "kernelbench"
    assert rf.run_format("auto", "refine", None, "cuda", None, tasks)[0] == "kernelbench"
    assert rf.run_format("auto", "auto", None, "cpu", None, tasks)[0] == "kernelbench"
    assert rf.run_format("auto", "auto", None, "cuda", "triton", tasks)[0] == "kernelbench"


def test_auto_keeps_kernelbench_when_a_task_lacks_a_fast_solution(tasks, monkeypatch):
    lacking = tasks[1].name
    monkeypatch.setattr(rf, "solution_path", lambda task, backend, fmt="kernelbench":
                        None if fmt == "fast" and task.name == lacking else f"{backend}/{fmt}/{task.name}")
    fmt, why = rf.run_format("auto", "auto", None, "cuda", None, tasks)
    assert fmt == "kernelbench" and lacking in why


def test_kbench_run_defaults_to_auto_and_eval_to_kernelbench():
    p = build_parser()
    assert p.parse_args(["run"]).format == "auto"
    assert p.parse_args(["eval", "--task", "level1/relu", "--solution", "x.py"]).format == "kernelbench"
    with pytest.raises(SystemExit):
        p.parse_args(["eval", "--task", "level1/relu", "--solution", "x.py", "--format", "auto"])



def test_the_default_suite_on_cuda_is_fast_with_the_shipped_solutions(tasks):
    """The main job on a GPU: every default task with a CUDA solution has a fast one too (the shipped files)."""
    assert rf.run_format("auto", "auto", None, "cuda", None, tasks)[0] == "fast"

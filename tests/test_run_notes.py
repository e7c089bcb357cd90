"""``kbench run``'s record of a task that got fewer attempts than its budget: the agent says why (its
``run_episode`` returns it), the ``task_done`` JSONL record keeps it as ``stopped_early`` and the table's note
shows it. The evolutionary agent runs here on a stand-in evaluator: what is tested is when the search stops, not
the kernels."""

from __future__ import annotations

import json

from rich.console import Console

from kbench_agents.evolutionary import EvolutionaryAgent, OfflineProposer
from kbench_apps.runlog import RunLog
from kbench_apps.runner import _run_task, print_table
from kbench_env.pipeline.result import EvalResult
from kbench_env.tasks.suite import resolve_task

# Two settings of one tunable: the start and one mutation, then nothing new is left.
SMALL_SPACE = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
src = """
constexpr int BLOCK = 64;  // kbench-tune: 32 64
"""
class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


class _Evaluator:
    """Answers every candidate as correct, a little faster for each new source."""

    backend_name, device, rules, format = "cpu", "cpu", "strict", "kernelbench"

    def __init__(self):
        self.calls = 0

    def evaluate_iter(self, items, max_workers=None):
        for i, (task, source) in enumerate(items):
            self.calls += 1
            yield i, EvalResult(task=task.name, backend="cpu", device="cpu", stage="timed", compiled=True,
                                correct=True, speedup=1.0 + self.calls / 10, reward=1.0,
                                source_hash=str(hash(source)))


class _Env:
    def __init__(self):
        self.evaluator = _Evaluator()
        self.unwrapped = self
        self.task = None

    def reset(self, seed=None, options=None):
        self.task = options["task"]
        return "the task prompt", {}


def _run(tmp_path, budget: int) -> tuple[dict, str]:
    task = resolve_task("level1/relu")
    agent = EvolutionaryAgent(OfflineProposer("cpu", solutions={task.name: SMALL_SPACE}), budget=budget,
                              batch_size=1)
    log = RunLog(tmp_path / f"run{budget}.jsonl", fresh=True)
    log.append(_run_task(_Env(), agent, task, [], log, budget, 0, True, lambda *a: None))
    (done,) = [json.loads(line) for line in log.path.read_text().splitlines()
               if json.loads(line)["kind"] == "task_done"]
    console = Console(record=True, width=240)
    print_table(console, log, agent.name, [task.name])
    return done, console.export_text()


def test_an_exhausted_tuning_space_is_said_in_the_record_and_the_table(tmp_path):
    done, table = _run(tmp_path, budget=6)
    assert done["attempts"] == 2 and done["budget"] == 6 and done["correct"]
    assert done["stopped_early"] == ("stopped after 2 of 6 attempts: tuning space exhausted: every kbench-tune "
                                     "setting reachable was tried"), done
    assert "stopped after 2 of 6 attempts: tuning space exhausted" in table, table


def test_a_spent_budget_has_no_note(tmp_path):
    done, table = _run(tmp_path, budget=2)
    assert done["attempts"] == 2 and done["stopped_early"] is None, done
    assert "stopped" not in table, table


def test_the_run_table_is_whole_when_piped(tmp_path):
    """Written to a file (not a terminal), the run table is laid out wide: its note is on one line, uncut (at
    rich's default 80 columns it was wrapped over several rows)."""
    import io

    from kbench_apps.cli_output import console as make_console

    task = resolve_task("level1/relu")
    agent = EvolutionaryAgent(OfflineProposer("cpu", solutions={task.name: SMALL_SPACE}), budget=6, batch_size=1)
    log = RunLog(tmp_path / "piped.jsonl", fresh=True)
    log.append(_run_task(_Env(), agent, task, [], log, 6, 0, True, lambda *a: None))
    out = io.StringIO()
    print_table(make_console(out), log, agent.name, [task.name])
    text = out.getvalue()
    assert any("stopped after 2 of 6 attempts: tuning space exhausted: every kbench-tune setting reachable was tried"
               in line for line in text.splitlines()), text

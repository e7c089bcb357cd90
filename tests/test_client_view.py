"""What a user of kbench meets (issue 35, items 3-8), each checked where it failed: robust-kbench backward tasks
reachable from ``kbench eval``; ``reset(options={"task": ...})`` resolving names within the env's suite; held-out
configurations of other input shapes on both devices (plain KernelBench files, robust-kbench folders whose lists
vary only settings the inputs do not see) and a verdict-only observation of them; ``rules="kernelbench"`` paying
a token kernel no speed credit; ``kbench eval --timeout``."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from kbench_env.env.env import KBenchEnv
from kbench_env.pipeline.feedback import policy_feedback
from kbench_env.pipeline.result import ConfigResult, EvalResult
from kbench_env.pipeline.reward import MIN_COVERAGE, get_reward_fn, tiered
from kbench_env.tasks.loaders import robust_kbench as rk
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.suite import load_suite, resolve_task
from kbench_env.tasks.task import TaskError
from tests import candidates
from tests.conftest import ROOT
from tests.test_robust_kbench import write_relu
from tests.test_robust_kbench_cpu import LINEAR, write

KB_FILE = ROOT / "tests/data/kernelbench/19_ReLU.py"


def kbench(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "kbench_apps", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "KBENCH_SPARE_WORKER": "0"})


# ---------------------------------------------------------------------- 3: robust-kbench backward from the CLI


def test_robust_kbench_backward_is_reachable_from_kbench_eval(tmp_path):
    tasks = tmp_path / "tasks"
    folder = write_relu(tasks / "relu")
    bad = tmp_path / "bad.py"
    bad.write_text("this is not python (")  # answered by the screen: no build, the task is what is looked at
    for task, extra in ((str(folder / "backward"), ()), ("robust-kbench/relu/backward", ("--suite", str(tasks))),
                        ("relu/backward", ("--suite", str(tasks)))):
        p = kbench("eval", "--task", task, *extra, "--solution", str(bad), "--device", "cpu", "--json")
        assert p.returncode == 1 and p.stdout, p.stderr
        assert json.loads(p.stdout)["task"] == "robust-kbench/relu/backward", task
    listed = kbench("tasks", "--suite", str(tasks), "--json")
    assert "robust-kbench/relu/backward" in [json.loads(ln)["name"] for ln in listed.stdout.splitlines()]
    # a folder holding both forms no longer stands for the forward one silently: the error names both
    p = kbench("eval", "--task", str(folder), "--solution", str(bad), "--device", "cpu")
    assert p.returncode == 2 and f"{folder}/forward" in p.stderr and f"{folder}/backward" in p.stderr, p.stderr
    assert resolve_task(str(folder / "forward")).name == "robust-kbench/relu/forward"


# ---------------------------------------------------------------------- 4: reset names resolve within the suite


def test_reset_resolves_a_task_name_within_the_envs_suite(tmp_path, evaluator):
    level2 = tmp_path / "KernelBench" / "level2"
    level2.mkdir(parents=True)
    shutil.copy(KB_FILE, level2 / "76_Gemm_Add_ReLU.py")
    env = KBenchEnv(suite=str(level2), evaluator=evaluator)
    try:
        for name in ("level2/76_Gemm_Add_ReLU", "76_Gemm_Add_ReLU"):
            _, info = env.reset(options={"task": name})
            assert info["task"] == "level2/76_Gemm_Add_ReLU"
        # a name outside the suite is accepted when it names a task (documented: suite first, then anywhere)
        assert env.reset(options={"task": "level1/relu"})[1]["task"] == "level1/relu"
        with pytest.raises(TaskError, match=r"no task named 'level2/nope' in the env's suite"):
            env.reset(options={"task": "level2/nope"})
    finally:
        env.close()
    fixed = KBenchEnv(task="76_Gemm_Add_ReLU", suite=str(level2), evaluator=evaluator)
    assert fixed.reset()[1]["task"] == "level2/76_Gemm_Add_ReLU"
    fixed.close()


# ---------------------------------------------------------------------- 6: held-out shapes that differ, hidden


def _distinct(task, device: str) -> bool:
    cfgs = task.configs_for(device)
    shown = {tuple(task.input_shapes(c)) for c in cfgs if not c.held_out}
    return bool(shown) and any(tuple(task.input_shapes(c)) not in shown for c in cfgs if c.held_out)


def test_a_kernelbench_file_shows_its_own_sizes_on_a_gpu_and_holds_out_other_shapes():
    """On a GPU the file's own sizes (which the prompt's reference code spells) are shown, not held out; the
    held-out configuration is derived with other (odd) shapes, as on the CPU."""
    t = load_task(KB_FILE)
    (shown,) = t.shown_configs("cuda")
    assert shown.name == "original" and shown.sizes == {}
    assert _distinct(t, "cuda") and _distinct(t, "cpu")
    assert [c.name for c in t.configs_for("cuda") if c.held_out] == ["original-odd"]


#: robust-kbench's lists that vary only what the inputs do not see (a layer's out_features, as four of its
#: kernelbench tasks vary out_channels; layernorm varies init_method): small enough for the CPU ...
ONLY_OUT_FEATURES = {"multi_init_configs": [{"out_features": 64}, {"out_features": 96}],
                     "multi_input_configs": [{"batch_size": 8}], "multi_shared_configs": [{"in_features": 32}]}
# ... and sized for a GPU only
ONLY_OUT_FEATURES_BIG = {"multi_init_configs": [{"out_features": 4096}, {"out_features": 2048}],
                         "multi_input_configs": [{"batch_size": 1024}], "multi_shared_configs": [{}]}


@pytest.mark.parametrize("config", [ONLY_OUT_FEATURES, ONLY_OUT_FEATURES_BIG], ids=["cpu-sized", "gpu-sized"])
def test_robust_kbench_holds_out_other_input_shapes_on_both_devices(tmp_path, config):
    (task,) = rk.load_robust_tasks(write(tmp_path / "tasks" / "linear", LINEAR, config=config))
    for device in ("cpu", "cuda"):
        assert _distinct(task, device), (device, [(c.name, c.held_out, c.devices) for c in task.configs])


def test_compat_robust_counts_input_shapes_not_settings(tmp_path):
    from bench.compat_robust import config_stats

    (task,) = rk.load_robust_tasks(write(tmp_path / "tasks" / "linear", LINEAR, config=ONLY_OUT_FEATURES))
    assert config_stats([task])["distinct_held_out"] == 1 and config_stats([task])["distinct_held_out_cuda"] == 1
    task.configs = task.configs[:2]  # robust-kbench's own two (kbench's derived ones come after)
    assert config_stats([task])["distinct_held_out"] == 0  # they differ in a setting, not in an input shape


def test_a_held_out_failure_is_a_verdict_without_error_figures():
    shown = ConfigResult(name="small", held_out=False, dtype="float32", inputs=["float32[16, 64]"], correct=True,
                         norm_err=1e-7)
    held = ConfigResult(name="odd", held_out=True, dtype="float32", inputs=["float32[15, 63]"], correct=False,
                        norm_err=0.4375, max_err=3.25)
    r = EvalResult(task="t", backend="cpu", device="cpu", stage="ran", configs=[shown, held], held_out_count=1,
                   error="configuration 'odd' (held out) with inputs float32[15, 63]: values differ",
                   error_stage="correctness")
    text = policy_feedback(r)
    assert "held-out configuration 1 of 1: wrong values" in text, text
    for figure in ("4.38e-01", "3.25e+00", "0.4375", "3.25"):
        assert figure not in text, text


# ---------------------------------------------------------------------- 7: kernelbench rules and coverage


def _correct(speedup: float, coverage: float | None, rules: str = "kernelbench") -> EvalResult:
    return EvalResult(task="t", backend="cpu", device="cpu", stage="timed", compiled=True, correct=True,
                      speedup=speedup, kernel_coverage=coverage, rules=rules)


def test_kernelbench_rules_pay_no_speed_for_a_token_kernel():
    token = _correct(1.008, 0.176)  # the token kernel: PyTorch does the work, 17.6 % coverage
    assert tiered(token) < 1.0 and tiered(token) == pytest.approx(1 + math.log10(0.176))
    honest_slower = _correct(0.5, 1.0)
    assert tiered(token) < tiered(honest_slower)  # an honest kernel at half PyTorch's speed earns more
    for preset in ("speedup", "kevin"):
        assert get_reward_fn(preset)(token) < get_reward_fn(preset)(_correct(1.008, 1.0))
    # covered enough, or strict rules (forward runs only own kernels), or not measured: paid as measured
    for r in (_correct(1.5, MIN_COVERAGE), _correct(1.5, 0.176, rules="strict"), _correct(1.5, None)):
        assert tiered(r) == pytest.approx(1 + math.log10(1.5))


def test_a_token_kernel_under_kernelbench_rules_is_paid_below_parity(kernelbench_evaluator):
    from tests.test_rules import ALL_TORCH, CONV, INIT, KERNEL, ONE_ELEMENT

    r = kernelbench_evaluator.evaluate(CONV, KERNEL + INIT + ONE_ELEMENT + ALL_TORCH, seed=7)
    assert r.correct and not r.integrity_flags and r.kernel_coverage < MIN_COVERAGE, r.feedback()
    # credited at most its coverage as a speedup: tiered's 1 + log10(coverage), floored at 0.05
    assert r.reward < 1.0 and r.reward <= 1 + max(-0.95, math.log10(max(r.kernel_coverage, 1e-9))) + 1e-9, r.feedback()


# ---------------------------------------------------------------------- 8: kbench eval --timeout


def test_kbench_eval_timeout_is_stated_and_settable(tmp_path):
    helptext = kbench("eval", "--help").stdout
    assert "--timeout" in helptext and "default 60 s" in helptext and "--build-timeout" in helptext
    hang = tmp_path / "hang.py"
    hang.write_text(candidates.INFINITE_LOOP)
    p = kbench("eval", "--task", "level1/relu", "--solution", str(hang), "--device", "cpu", "--timeout", "2",
               "--json")
    r = json.loads(p.stdout)
    assert p.returncode == 1 and "timed out after 2 s" in r["error"], p.stdout + p.stderr
    at_import = tmp_path / "hang_at_import.py"
    at_import.write_text(candidates.HANG_AT_IMPORT)
    p = kbench("eval", "--task", "level1/relu", "--solution", str(at_import), "--device", "cpu",
               "--build-timeout", "3", "--json")
    r = json.loads(p.stdout)
    assert p.returncode == 1 and "timed out after 3 s" in r["error"], p.stdout + p.stderr
    refused = kbench("eval", "--task", "level1/relu", "--solution", str(hang), "--timeout", "0")
    assert refused.returncode == 2 and "--timeout must be a positive number" in refused.stderr

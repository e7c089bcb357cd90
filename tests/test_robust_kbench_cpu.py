"""robust-kbench tasks sized for a GPU get CPU configurations (kbench_env/tasks/loaders/robust_kbench/cpu_configs.py), names stay unique
across a whole tree, and the compatibility sweep's honest candidate (bench/compat_robust.py) is correct on the
CPU: on task folders written here in robust-kbench's format (GPU-sized settings, sizes left to the functions'
defaults, a shape constraint that a common scaling breaks, a size fixed in the file)."""

from __future__ import annotations

import json

import pytest
import torch

from kbench_env.tasks.loaders import robust_kbench as rk
from kbench_env.tasks.loaders.robust_kbench.cpu_configs import derive_cpu_settings
from kbench_env.tasks.loaders.kernelbench import CPU_ELEMENT_BUDGET

from bench.compat_robust import build_references, honest_candidate

# robust-kbench's form: super(Model, self), an AutogradFunction with backward_fn, sizes for an H100.
LINEAR = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class AutogradFunction(torch.autograd.Function):
    backward_fn = None

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight, bias)
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, bias = ctx.saved_tensors
        return AutogradFunction.backward_fn(grad_output, x, weight, bias)


def forward_fn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A linear layer, y = x W^T + b."""
    return F.linear(x, weight, bias)


class Model(nn.Module):
    def __init__(self, in_features: int = 4096, out_features: int = 4096):
        super(Model, self).__init__()
        layer = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(layer.weight.data.clone())
        self.bias = nn.Parameter(layer.bias.data.clone())

    def forward(self, x, fn=forward_fn):
        return fn(x, self.weight, self.bias)


def get_inputs(batch_size: int = 1024, in_features: int = 4096):
    return [torch.randn(batch_size, in_features, requires_grad=True)]


input_names = ["x"]
'''

# multi_* lists of empty settings, as robust-kbench's kernelbench/level_1 tasks have: the sizes are the defaults
LINEAR_CONFIG = {"single_input_configs": [{"batch_size": 2048}], "single_init_configs": [{}],
                 "single_shared_configs": [{}], "multi_input_configs": [{}], "multi_init_configs": [{}],
                 "multi_shared_configs": [{}]}

# A common scaling breaks hidden == heads * head_dim (the first scaled configuration does not even build).
HEADS = '''
import torch
import torch.nn as nn


def forward_fn(x: torch.Tensor, w: torch.Tensor, heads: int) -> torch.Tensor:
    """Per-head scaled copies of x."""
    b, h = x.shape
    return (x.view(b, heads, h // heads) * w.view(1, heads, 1)).view(b, h)


class Model(nn.Module):
    def __init__(self, hidden: int = 1024, heads: int = 16, head_dim: int = 64):
        super(Model, self).__init__()
        assert hidden == heads * head_dim, "hidden must be heads * head_dim"
        self.heads = heads
        self.w = nn.Parameter(torch.randn(heads))

    def forward(self, x, fn=forward_fn):
        return fn(x, self.w, self.heads)


def get_inputs(batch_size: int = 4096, hidden: int = 1024):
    return [torch.randn(batch_size, hidden)]
'''

# The image size is fixed in the file (as robust-kbench's resnet_block has 224 x 224): the settings cannot bring
# the task within CPU_ELEMENT_BUDGET, only within the CPU limit.
FIXED = '''
import torch
import torch.nn as nn


def forward_fn(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Per-channel scaling of an image batch."""
    return x * scale.view(1, -1, 1, 1)


class Model(nn.Module):
    def __init__(self, channels: int = 64):
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.randn(channels))

    def forward(self, x, fn=forward_fn):
        return fn(x, self.scale)


def get_inputs(batch_size: int = 32, channels: int = 64):
    return [torch.randn(batch_size, channels, 200, 200)]
'''


def write(folder, forward, backward=None, config=None):
    folder.mkdir(parents=True)
    (folder / "func_forward.py").write_text(forward)
    if backward:
        (folder / "func_backward.py").write_text(backward)
    for form in ("forward", "backward"):
        if config is not None:
            (folder / f"config_{form}.json").write_text(json.dumps(config))
    return folder


def _numel(task, cfg):
    inputs, out = task.reference(cfg, seed=0, init_seed=0, upcast=False)
    outs = out if isinstance(out, tuple) else (out,)
    return sum(t.numel() for t in (*inputs, *outs))


def test_gpu_sized_tasks_get_a_shown_and_a_held_out_cpu_configuration(tmp_path):
    fwd, bwd = rk.load_robust_tasks(write(tmp_path / "tasks" / "linear", LINEAR, LINEAR, LINEAR_CONFIG))
    for task in (fwd, bwd):
        gpu = [c for c in task.configs if "cuda" in c.devices]
        assert gpu and gpu[0].sizes.get("in_features", 4096) == 4096  # robust-kbench's own, for the GPU
        cpu = task.configs_for("cpu")
        assert [c.held_out for c in cpu] == [False, True]
        shown, held = cpu
        assert shown.sizes != held.sizes  # a kernel specialised to the shown shapes fails the held-out one
        for cfg in cpu:  # sizes the configuration left to the defaults were scaled too
            assert cfg.sizes["in_features"] < 4096 and cfg.sizes["out_features"] < 4096
        assert _numel(task, shown) <= CPU_ELEMENT_BUDGET
        assert any(v % 2 for v in held.sizes.values() if type(v) is int and v > 8)  # odd sizes held out
    grads = bwd.reference(bwd.configs_for("cpu")[1], seed=1, init_seed=2, upcast=False)[1]
    assert len(grads) == 3  # dx, dweight, dbias on the held-out sizes


def test_a_shape_constraint_is_kept_by_halving_settings_one_at_a_time(tmp_path):
    (task,) = rk.load_robust_tasks(write(tmp_path / "heads", HEADS))
    cpu = task.configs_for("cpu")
    assert cpu and not cpu[0].held_out
    s = cpu[0].sizes
    assert s["hidden"] == s["heads"] * s["head_dim"]
    (x,), out = task.reference(cpu[0], seed=0, init_seed=0, upcast=False)
    assert out.shape == x.shape and _numel(task, cpu[0]) <= CPU_ELEMENT_BUDGET
    # held out: odd sizes break the constraint everywhere but in the batch size, which alone is made odd
    assert [c.held_out for c in cpu] == [False, True]
    held = cpu[1].sizes
    assert held["hidden"] == held["heads"] * held["head_dim"] and held["batch_size"] == s["batch_size"] - 1


def test_sizes_fixed_in_the_file_are_allowed_up_to_the_cpu_limit(tmp_path):
    (task,) = rk.load_robust_tasks(write(tmp_path / "fixed", FIXED))
    cpu = task.configs_for("cpu")
    assert cpu, "a task whose settings cannot reach the budget still gets a CPU configuration"
    n = _numel(task, cpu[0])
    assert CPU_ELEMENT_BUDGET < n <= rk.CPU_ELEMENTS


def test_a_task_with_one_cpu_configuration_gets_an_odd_held_out_one(tmp_path):
    small = dict(LINEAR_CONFIG, multi_init_configs=[{"in_features": 32, "out_features": 16}],
                 multi_input_configs=[{"batch_size": 8, "in_features": 32}])
    (task,) = rk.load_robust_tasks(write(tmp_path / "small", LINEAR, config=small))
    # near the GPU's shown configuration too (the same one): held out there as well
    assert [(c.held_out, c.devices) for c in task.configs] == [(False, ("cpu", "cuda")), (True, ("cpu", "cuda"))]
    shown, held = task.configs
    assert (shown.sizes["in_features"], held.sizes["in_features"]) == (32, 31)
    assert (shown.sizes["out_features"], held.sizes["out_features"]) == (16, 15)
    assert held.sizes["batch_size"] == 8  # below 16: a size like a kernel size or a stride, left alone
    _, out = task.reference(held, seed=0, init_seed=0, upcast=False)
    assert out.shape == (8, 15)


def test_derivation_reports_nothing_when_no_small_configuration_runs():
    class Rk:  # the reference fails on every size below the original: no configuration is made up
        class Model:
            def __init__(self, n: int = 4096):
                pass

        @staticmethod
        def get_inputs(batch: int = 4096):
            return []

    def probe(i, j, devices, forward=True):
        from kbench_env.tasks.task import TaskError

        if i["n"] != 4096:
            raise TaskError("only n=4096 works")
        return {"numel": 1 << 30}

    assert derive_cpu_settings(Rk, {}, {}, probe) == []


def test_a_held_out_configuration_is_found_when_every_size_is_small_and_tied():
    class Rk:  # channels must stay a multiple of 4 (groups); everything scales down to 4
        class Model:
            def __init__(self, channels: int = 64):
                pass

        @staticmethod
        def get_inputs(batch_size: int = 64, width: int = 64):
            return []

    def probe(i, j, devices, forward=True):
        from kbench_env.tasks.task import TaskError

        if i["channels"] % 4:
            raise TaskError("channels must be a multiple of 4")
        return {"numel": i["channels"] * j["batch_size"] * j["width"]}

    (small, held) = derive_cpu_settings(Rk, {}, {}, probe, budget=256)
    assert (small[0], small[1], small[3]) == ({"channels": 4}, {"batch_size": 4, "width": 4}, False)
    assert held[3] and held[0]["channels"] == 4 and (held[0], held[1]) != (small[0], small[1])
    assert sorted(held[1].values()) == [3, 4]  # one size made odd, the constraint kept


def test_names_are_unique_across_a_tree_with_a_nested_tasks_folder(tmp_path):
    root = tmp_path / "tasks"
    write(root / "linear", LINEAR, config=LINEAR_CONFIG)
    write(root / "group" / "tasks" / "linear", LINEAR, config=LINEAR_CONFIG)
    tasks, skipped = rk.load_robust_tree(root)
    names = [t.name for t in tasks]
    assert not skipped and len(names) == len(set(names)) == 2, names
    assert names == ["robust-kbench/group/tasks/linear/forward", "robust-kbench/linear/forward"]


@pytest.fixture()
def honest_tasks(tmp_path):
    fwd, bwd = rk.load_robust_tasks(write(tmp_path / "tasks" / "linear", LINEAR, LINEAR, LINEAR_CONFIG))
    (heads,) = rk.load_robust_tasks(write(tmp_path / "tasks" / "heads", HEADS))
    return [fwd, bwd, heads]


def test_the_sweep_builds_references_on_every_cpu_configuration(honest_tasks):
    for task in honest_tasks:
        refs = build_references(task, seed=1)
        assert len(refs) == len(task.configs_for("cpu")) >= 1
        assert all(r["ok"] and not r["nonfinite"] for r in refs), refs


def test_the_sweeps_honest_candidate_is_correct_and_runs_its_own_kernel(honest_tasks, evaluator):
    for task in honest_tasks:
        r = evaluator.evaluate(task, honest_candidate(task), seed=3)
        assert r.error is None, r.feedback()
        assert len(r.configs) == len(task.configs_for("cpu")) and all(c.correct for c in r.configs), r.feedback()
        flags = [f.split(":", 1)[0] for f in r.integrity_flags]
        assert flags == ["pytorch_compute_in_forward"], flags  # strict rules: its PyTorch work is seen; its kernel ran


DROPOUT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def forward_fn(x: torch.Tensor, p: float) -> torch.Tensor:
    """Dropout that is always on (as robust-kbench's kernelbench/level_2/task_83 has it)."""
    return F.dropout(x, p=p, training=True)


class Model(nn.Module):
    def __init__(self, p: float = 0.2):
        super(Model, self).__init__()
        self.p = p

    def forward(self, x, fn=forward_fn):
        return fn(x, self.p)


def get_inputs(batch_size: int = 16, dim: int = 64):
    return [torch.randn(batch_size, dim)]
'''


def test_a_reference_that_draws_random_numbers_is_reported_and_skipped(tmp_path):
    from kbench_env.tasks.task import TaskError

    root = tmp_path / "tasks"
    write(root / "dropout", DROPOUT)
    write(root / "heads", HEADS)
    with pytest.raises(TaskError, match="dropout/func_forward.py: the reference is not deterministic"):
        rk.load_robust_tasks(root / "dropout")
    tasks, skipped = rk.load_robust_tree(root)
    assert [t.name for t in tasks] == ["robust-kbench/heads/forward"]
    assert [p.name for p, _ in skipped] == ["dropout"] and "not deterministic" in skipped[0][1]
    # model.eval() switches dropout off where the file follows self.training: that one is deterministic
    write(root / "eval_dropout", DROPOUT.replace("training=True", "training=False"))
    assert rk.load_robust_tasks(root / "eval_dropout")

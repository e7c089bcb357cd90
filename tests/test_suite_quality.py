"""Quality gate for every task of the suite: it runs, is deterministic, and degenerate outputs cannot pass.

The output tests follow robust-kbench's (outputs not all near zero; vary across seeds; vary along every axis;
change when inputs change); the degenerate candidates (zeros, a constant, the reshaped first input, and a 1%
subsample of the input for reductions and losses) must each fail the task's own correctness check.
"""

from __future__ import annotations

import pytest
import torch

from kbench_env.measure.compare import compare_outputs, flatten_outputs
from kbench_env.tasks.suite import load_suite
from kbench_env.tasks.task import DTYPES, _call

TASKS = load_suite("all")


def _small_config(task):
    cpu = task.configs_for("cpu")
    assert cpu, f"{task.name}: no configuration runs on the CPU"
    return cpu[0]


def _tensor_leaves(out):
    return [o for o in flatten_outputs(out) if isinstance(o, torch.Tensor)]


@pytest.fixture(scope="module", params=TASKS, ids=[t.name for t in TASKS])
def task(request):
    return request.param


def test_configs_are_declared(task):
    assert len(task.configs) >= 3, f"{task.name}: at least 3 configurations"
    assert any(c.held_out for c in task.configs), f"{task.name}: at least one held-out configuration"
    assert task.shown_configs("cpu"), f"{task.name}: at least one shown CPU configuration"
    shapes = {tuple(task.input_shapes(c)) for c in task.configs}
    assert len(shapes) >= 3, f"{task.name}: configurations must differ in shape"


def test_reference_runs_and_is_deterministic(task):
    """(How long it takes is measured by bench/reference_cost.py, not asserted here.)"""
    cfg = _small_config(task)
    _, out1 = task.reference(cfg, seed=1, init_seed=7, upcast=False)
    _, out2 = task.reference(cfg, seed=1, init_seed=7, upcast=False)
    for a, b in zip(flatten_outputs(out1), flatten_outputs(out2)):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), f"{task.name}: not deterministic for a seed"


def test_outputs_are_informative(task):
    cfg = _small_config(task)
    dtype = DTYPES[cfg.dtype]
    _, ref = task.reference(cfg, seed=1, init_seed=7)
    _, other_inputs = task.reference(cfg, seed=2, init_seed=7)
    _, other_all = task.reference(cfg, seed=3, init_seed=8)
    leaves = _tensor_leaves(ref)
    assert leaves, f"{task.name}: no tensor output"
    for leaf in leaves:
        leaf = leaf.double()
        assert not torch.allclose(leaf, torch.zeros_like(leaf), atol=1e-5), f"{task.name}: output all near zero"
        for d in range(leaf.dim()):
            if leaf.shape[d] > 1:
                first = leaf.select(d, 0).unsqueeze(d)
                assert (leaf - first).abs().max() > 1e-6 * leaf.abs().max(), f"{task.name}: constant along axis {d}"
    assert compare_outputs(other_inputs, ref, dtype, task.tolerance)[0], f"{task.name}: output ignores the inputs"
    assert compare_outputs(other_all, ref, dtype, task.tolerance)[0], f"{task.name}: output does not vary across seeds"


def _degenerates(task, cfg, inputs, ref):
    leaves = flatten_outputs(ref)
    # A constant a cheating kernel could know without computing: the output's mean for *other* inputs.
    other = flatten_outputs(task.reference(cfg, seed=2, init_seed=7)[1])

    def like(fn):
        outs = [fn(o) if isinstance(o, torch.Tensor) else o for o in leaves]
        return outs if len(outs) > 1 else outs[0]

    def constants():
        outs = []
        for o, alt in zip(leaves, other):
            if isinstance(o, torch.Tensor):
                m = alt.double().mean().item()
                o = torch.full_like(o, m if o.is_floating_point() else round(m))
            outs.append(o)
        return outs if len(outs) > 1 else outs[0]

    yield "zeros", like(torch.zeros_like)
    yield "constant", constants()
    first = next(x for x in inputs if isinstance(x, torch.Tensor))

    def reshaped_first(o):
        flat = first.flatten().to(o.dtype)
        reps = -(-o.numel() // max(flat.numel(), 1))
        return flat.repeat(reps)[: o.numel()].reshape(o.shape)

    yield "first input", like(reshaped_first)
    if {"reduction", "loss"} & set(task.tags):
        # Estimate from 1% of the elements along the largest axis of every input (each kept element stands for 100).
        def subsample(x):
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 200:
                return x
            d = max(range(x.dim()), key=lambda i: x.shape[i])
            n = x.shape[d]
            idx = (torch.arange(n) // 100) * 100
            return x.index_select(d, idx)

        mod, init_inputs, _ = task.instantiate(cfg, seed=1)
        model = task.make_model(mod, init_inputs, 7, DTYPES[cfg.dtype], "cpu")
        yield "1% subsample", _call(model, [subsample(x) for x in inputs], task.backward)


def test_degenerate_outputs_fail(task):
    for cfg in task.configs_for("cpu"):
        dtype = DTYPES[cfg.dtype]
        inputs, ref = task.reference(cfg, seed=1, init_seed=7)
        for label, out in _degenerates(task, cfg, inputs, ref):
            mismatch, _ = compare_outputs(out, ref, dtype, task.tolerance)
            assert mismatch is not None, f"{task.name}/{cfg.name}: a {label} output passes the correctness check"

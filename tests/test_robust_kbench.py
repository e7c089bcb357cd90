"""robust-kbench folders and submissions (kbench_env/tasks/loaders/robust_kbench/), on a small task written here in that format."""

from __future__ import annotations

import ast
import json
import math
import types

import pytest
import torch
import torch.nn.functional as F

from kbench_env.tasks.loaders import robust_kbench as rk
from kbench_env.tasks.loaders.robust_kbench import read as rkr
from kbench_env.tasks.loaders.robust_kbench import submission as rks
from kbench_env.measure.compare import compare_outputs, flatten_outputs
from kbench_env.tasks.suite import load_suite, task_from_path
from kbench_env.tasks.task import TaskError

# A robust-kbench task folder: func_forward.py, func_backward.py, config_forward.json, config_backward.json.
# The model holds an unused nn.Linear next to the parameters it uses (as robust-kbench's linear tasks do), so
# the backward form must leave out the gradients that autograd does not produce.

FUNC_FORWARD = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def forward_fn(x: torch.Tensor, weights: torch.Tensor, biases: torch.Tensor) -> torch.Tensor:
    """A linear layer followed by an exact GELU: y = gelu(x @ W^T + b).

    Args:
        x (torch.Tensor): (batch_size, num_input_features)
        weights (torch.Tensor): (num_output_features, num_input_features)
        biases (torch.Tensor): (num_output_features,)

    Returns:
        torch.Tensor: (batch_size, num_output_features)
    """
    return F.gelu(F.linear(x, weights, biases))


class Model(nn.Module):
    def __init__(self, num_input_features: int = 32, num_output_features: int = 16, init_scale: float = 1.0):
        super().__init__()
        layer = nn.Linear(num_input_features, num_output_features)
        self.unused = nn.Linear(2, 2)
        self.weights = nn.Parameter(layer.weight.data.clone() * init_scale)
        self.biases = nn.Parameter(layer.bias.data.clone() + 0.1)

    def forward(self, x, fn=forward_fn):
        return fn(x, self.weights, self.biases)


def get_inputs(batch_size: int = 8, num_input_features: int = 32):
    x = torch.randn(batch_size, num_input_features, requires_grad=True)
    return [x]


input_names = ["x"]
'''

FUNC_BACKWARD = FUNC_FORWARD.replace(
    "def forward_fn(",
    '''class AutogradFunction(torch.autograd.Function):
    backward_fn = None

    @staticmethod
    def forward(ctx, x, weights, biases):
        ctx.save_for_backward(x, weights, biases)
        return F.gelu(F.linear(x, weights, biases))

    @staticmethod
    def backward(ctx, grad_output):
        x, weights, biases = ctx.saved_tensors
        grad_x, grad_w, grad_b = AutogradFunction.backward_fn(grad_output, x, weights, biases)
        return grad_x, grad_w, grad_b


def forward_fn(''',
    1,
)

CONFIG = {
    "single_init_configs": [{"num_output_features": 16}],
    "single_input_configs": [{"batch_size": 8}],
    "single_shared_configs": [{"num_input_features": 32}],
    "multi_init_configs": [{"num_output_features": 16}, {"num_output_features": 24, "init_scale": 0.5}],
    "multi_input_configs": [{"batch_size": 8}, {"batch_size": 5}, {"batch_size": 3}],
    "multi_shared_configs": [{"num_input_features": 32}, {"num_input_features": 20}],
}
N_MULTI = 2 * 3 * 2

FORWARD_CU = r'''
#include <torch/extension.h>

__global__ void linear_gelu_kernel(const float* x, const float* w, const float* b, float* y, int n, int k, int m) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n || col >= m) return;
  float acc = b[col];
  for (int i = 0; i < k; ++i) acc += x[row * k + i] * w[col * k + i];
  y[row * m + col] = 0.5f * acc * (1.f + erff(acc * 0.70710678f));
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weights, torch::Tensor biases) {
  auto y = torch::empty({x.size(0), weights.size(0)}, x.options());
  dim3 block(16, 16), grid((weights.size(0) + 15) / 16, (x.size(0) + 15) / 16);
  linear_gelu_kernel<<<grid, block>>>(x.data_ptr<float>(), weights.data_ptr<float>(), biases.data_ptr<float>(),
                                      y.data_ptr<float>(), x.size(0), x.size(1), weights.size(0));
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "Linear + GELU forward (CUDA)");
}
'''

BACKWARD_CU = r'''
#include <torch/extension.h>
#include <vector>

std::vector<torch::Tensor> backward(torch::Tensor grad_output, torch::Tensor x, torch::Tensor weights,
                                    torch::Tensor biases) {
  auto z = torch::addmm(biases, x, weights.t());
  auto g = grad_output * (0.5 * (1 + torch::erf(z * M_SQRT1_2)) + z * torch::exp(-0.5 * z * z) * 0.3989422804014327);
  return {g.mm(weights), g.t().mm(x), g.sum(0)};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("backward", &backward, "Linear + GELU backward"); }
'''


def write_folder(root, name="linear_gelu", backward=True, config=CONFIG):
    folder = root / name
    folder.mkdir()
    (folder / "func_forward.py").write_text(FUNC_FORWARD)
    (folder / "config_forward.json").write_text(json.dumps(config, indent=2))
    if backward:
        (folder / "func_backward.py").write_text(FUNC_BACKWARD)
        (folder / "config_backward.json").write_text(json.dumps(config, indent=2))
    return folder


@pytest.fixture()
def folder(tmp_path):
    return write_folder(tmp_path)


@pytest.fixture()
def tasks(folder):
    return rk.load_robust_tasks(folder)


def rk_module(folder, form):
    mod = types.ModuleType("rk_task")
    exec(compile((folder / f"func_{form}.py").read_text(), f"func_{form}.py", "exec"), mod.__dict__)
    return mod


# ---------------------------------------------------------------------- loading


def test_folder_yields_forward_and_backward_tasks(folder, tasks):
    assert [t.name for t in tasks] == ["robust-kbench/linear_gelu/forward", "robust-kbench/linear_gelu/backward"]
    fwd, bwd = tasks
    assert (fwd.backward, bwd.backward) == (False, True)
    assert fwd.level == bwd.level == "robust"
    assert "robust-kbench" in fwd.tags and "backward" in bwd.tags
    assert fwd.description.startswith("A linear layer followed by an exact GELU")
    assert rk.load_robust_task(folder).name == fwd.name
    ast.parse(fwd.source)
    assert FUNC_FORWARD.strip() in fwd.source and FUNC_BACKWARD.strip() in bwd.source  # unchanged


def test_configs_are_the_cartesian_product(folder, tasks):
    for t in tasks:
        assert len(t.configs) == N_MULTI
        assert len({c.name for c in t.configs}) == N_MULTI
        assert [c.held_out for c in t.configs] == [False] + [True] * (N_MULTI - 1)
        assert all(c.devices == ("cpu", "cuda") for c in t.configs)  # small: the CPU too
        shapes = {tuple(t.input_shapes(c)) for c in t.configs}
        # batch x in-features; out-features changes the parameters, and grad_out's shape in the backward form
        assert len(shapes) == (N_MULTI if t.backward else 2 * 3)
    pairs = rkr.read_configs(folder, "forward")
    assert len(pairs) == N_MULTI
    assert pairs[0] == ({"num_output_features": 16, "num_input_features": 32}, {"batch_size": 8, "num_input_features": 32})
    assert len(rkr.read_configs(folder, "forward", multi=False)) == 1
    single = rk.load_robust_tasks(folder, multi=False)[0].configs  # the file's one, and an odd one held out for
    assert [(c.held_out, c.devices) for c in single] == [(False, ("cpu", "cuda")), (True, ("cpu", "cuda"))]  # both
    assert single[1].sizes["num_input_features"] == 31  # robust_kbench/cpu_configs.derive_held_out


def test_values_lists_and_defaults(tmp_path):
    folder = write_folder(tmp_path, "lists", backward=False, config={"batch_size": [4, 6], "num_input_features": [8, 12, 16]})
    (task,) = rk.load_robust_tasks(folder)
    assert len(task.configs) == 6
    # settings missing from the file keep the functions' defaults (num_output_features=16)
    _, out = task.reference(task.configs[0], seed=0, init_seed=0, upcast=False)
    assert out.shape == (4, 16)


def test_future_imports_and_clashing_names(tmp_path, monkeypatch):
    folder = write_folder(tmp_path, "future", backward=False, config={"batch_size": [4, 6], "get_inputs": 1})
    src = (folder / "func_forward.py").read_text()
    src = '"""A robust-kbench file with its own docstring."""\nfrom __future__ import annotations\n' + src
    src = src.replace("num_input_features: int = 32):", "num_input_features: int = 32, get_inputs=1):")
    (folder / "func_forward.py").write_text(src)
    (task,) = rk.load_robust_tasks(folder)
    _, out = task.reference(task.configs[1], seed=0, init_seed=0)
    assert out.shape == (6, 16)
    assert "rk_get_inputs = 1" in task.source  # a setting named like a function of the file gets its own name
    cu_src = rks.submission_to_source(FORWARD_CU, task)
    assert cu_src.index("from __future__ import annotations") < cu_src.index("import torch")
    ext = types.SimpleNamespace(forward=lambda x, w, b: F.gelu(F.linear(x, w, b)))
    assert _run_candidate(cu_src, task, task.configs[1], monkeypatch, ext)[1] is None


def test_large_configurations_are_for_the_gpu(tmp_path):
    config = {"multi_init_configs": [{}], "multi_input_configs": [{"batch_size": 4}, {"batch_size": 65536}],
              "multi_shared_configs": [{"num_input_features": 32}]}
    folder = write_folder(tmp_path, "big", backward=False, config=config)
    (task,) = rk.load_robust_tasks(folder)
    assert [c.devices for c in task.configs] == [("cpu", "cuda"), ("cuda",), ("cpu",)]  # + a held-out odd one


def test_reference_matches_robust_kbench_forward(folder, tasks):
    fwd = tasks[0]
    mod = rk_module(folder, "forward")
    for cfg, (init, inp) in zip(fwd.configs, rkr.read_configs(folder, "forward")):
        inputs, out = fwd.reference(cfg, seed=3, init_seed=11, upcast=False)
        torch.manual_seed(3)
        x = mod.get_inputs(**inp)
        torch.manual_seed(11)
        model = mod.Model(**init)
        with torch.no_grad():
            expect = model(*x, fn=mod.forward_fn)
        assert torch.equal(inputs[0], x[0].detach())
        assert torch.equal(out, expect)
        _, up = fwd.reference(cfg, seed=3, init_seed=11)  # float64 reference
        assert up.dtype == torch.float64 and compare_outputs(out, up, torch.float32)[0] is None


def _python_backward(grad_output, x, weights, biases):
    z = F.linear(x, weights, biases)
    dgelu = 0.5 * (1 + torch.erf(z / math.sqrt(2))) + z * torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    g = grad_output * dgelu
    return g @ weights, g.t() @ x, g.sum(0)


def test_backward_reference_returns_robust_kbench_gradients(folder, tasks):
    bwd = tasks[1]
    mod = rk_module(folder, "backward")
    mod.AutogradFunction.backward_fn = _python_backward
    for cfg, (init, inp) in list(zip(bwd.configs, rkr.read_configs(folder, "backward")))[:4]:
        inputs, grads = bwd.reference(cfg, seed=5, init_seed=2, upcast=False)
        assert isinstance(grads, tuple) and len(grads) == 3  # dx, dweights, dbiases; the unused layer has none
        x, grad_out = inputs
        assert grad_out.shape == (inp["batch_size"], init["num_output_features"])
        # robust-kbench's check_backward_correctness, with the backward written in Python
        torch.manual_seed(5)
        xs = mod.get_inputs(**inp)
        torch.manual_seed(2)
        model = mod.Model(**init)
        out = model(*xs, fn=mod.AutogradFunction.apply)
        out.backward(grad_out)
        expect = [xs[0].grad] + [p.grad for _, p in model.named_parameters() if p.grad is not None]
        for got, want in zip(grads, expect):
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        _, up = bwd.reference(cfg, seed=5, init_seed=2)
        assert all(g.dtype == torch.float64 for g in up)
        assert compare_outputs(grads, up, torch.float32)[0] is None


def test_suite_loads_both_forms_of_a_folder(tmp_path, folder):
    names = [t.name for t in load_suite(str(folder))]
    assert names == ["robust-kbench/linear_gelu/forward", "robust-kbench/linear_gelu/backward"]
    names = [t.name for t in load_suite(str(tmp_path))]  # a folder of robust-kbench task folders
    assert names == ["robust-kbench/linear_gelu/forward", "robust-kbench/linear_gelu/backward"]
    assert task_from_path(folder).name == "robust-kbench/linear_gelu/forward"


def test_not_a_robust_kbench_folder(tmp_path):
    with pytest.raises(TaskError):
        rk.load_robust_tasks(tmp_path)


# ---------------------------------------------------------------------- submissions


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]


def _method_args(tree, cls, method):
    """The arguments of ``cls.method`` for the last top-level class of that name (the adapter's Model)."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    for f in classes[-1].body:
        if isinstance(f, ast.FunctionDef) and f.name == method:
            return [a.arg for a in f.args.args]
    raise AssertionError(f"{cls}.{method} not found")


@pytest.mark.parametrize("form", ["forward", "backward"])
def test_submission_source_parses_and_names_the_functions(tasks, form):
    task = tasks[0] if form == "forward" else tasks[1]
    cu = FORWARD_CU if form == "forward" else BACKWARD_CU
    assert rks.exported_functions(cu) == [form]
    src = rks.submission_to_source(cu, task)
    tree = ast.parse(src)
    (call,) = _calls(tree, "load_inline")
    kw = {k.arg: k.value for k in call.keywords}
    assert "cuda_sources" in kw and ast.literal_eval(kw["functions"]) is None  # the .cu binds its own functions
    assert f"_ext.{form}" in src and cu in src  # the kernel source, unchanged
    ref_tree = ast.parse(task.source)
    assert _method_args(tree, "ModelNew", "__init__") == _method_args(ref_tree, "Model", "__init__")
    assert _method_args(tree, "ModelNew", "forward") == _method_args(ref_tree, "Model", "forward")
    with pytest.raises(ValueError):
        rks.submission_to_source(BACKWARD_CU if form == "forward" else FORWARD_CU, task)
    from kbench_env.backends import get_backend
    from kbench_env.pipeline.screen import screen

    screen(src, get_backend("cuda"))  # an action the cuda backend accepts


def test_submission_without_pybind_declares_its_function(tasks):
    cu = FORWARD_CU[: FORWARD_CU.index("PYBIND11_MODULE")]
    src = rks.submission_to_source(cu, tasks[0])
    (call,) = _calls(ast.parse(src), "load_inline")
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("functions", "cpp_sources")}
    assert kw["functions"] == ["forward"]
    assert kw["cpp_sources"] == "torch::Tensor forward(torch::Tensor x, torch::Tensor weights, torch::Tensor biases);"


def _run_candidate(src, task, cfg, monkeypatch, ext):
    """Run a generated ModelNew on the CPU, with load_inline stubbed by Python functions (no GPU here)."""
    import torch.utils.cpp_extension as cpp

    seen = {}

    def fake_load_inline(**kwargs):
        seen.update(kwargs)
        return ext

    monkeypatch.setattr(cpp, "load_inline", fake_load_inline)
    mod = types.ModuleType("candidate")
    exec(compile(src, "candidate.py", "exec"), mod.__dict__)
    inputs, ref = task.reference(cfg, seed=1, init_seed=7)
    m, init_inputs, _ = task.instantiate(cfg, seed=1)
    torch.manual_seed(7)  # as kbench's worker does before ModelNew(*init_inputs)
    model = mod.ModelNew(*init_inputs).eval()
    out = model(*inputs)
    return seen, compare_outputs(out, ref, torch.float32)[0]


def test_converted_submission_runs_like_robust_kbench(tasks, monkeypatch):
    fwd, bwd = tasks
    cfg = fwd.configs[1]
    good = types.SimpleNamespace(forward=lambda x, w, b: F.gelu(F.linear(x, w, b)))
    seen, mismatch = _run_candidate(rks.submission_to_source(FORWARD_CU, fwd), fwd, cfg, monkeypatch, good)
    assert mismatch is None and seen["cuda_sources"] == FORWARD_CU
    bad = types.SimpleNamespace(forward=lambda x, w, b: F.linear(x, w, b))
    assert _run_candidate(rks.submission_to_source(FORWARD_CU, fwd), fwd, cfg, monkeypatch, bad)[1] is not None

    cfg = bwd.configs[2]
    good = types.SimpleNamespace(backward=_python_backward)
    seen, mismatch = _run_candidate(rks.submission_to_source(BACKWARD_CU, bwd), bwd, cfg, monkeypatch, good)
    assert mismatch is None and seen["cuda_sources"] == BACKWARD_CU

    def wrong(grad_output, x, weights, biases):  # forgets the GELU derivative
        return grad_output @ weights, grad_output.t() @ x, grad_output.sum(0)

    bad = types.SimpleNamespace(backward=wrong)
    assert _run_candidate(rks.submission_to_source(BACKWARD_CU, bwd), bwd, cfg, monkeypatch, bad)[1] is not None


def test_gradients_cover_inputs_and_used_parameters(tasks):
    bwd = tasks[1]
    _, grads = bwd.reference(bwd.configs[0], seed=0, init_seed=0)
    shapes = [tuple(g.shape) for g in flatten_outputs(grads)]
    assert shapes == [(8, 32), (16, 32), (16,)]


# ---------------------------------------------------------------------- robust-kbench's own file forms (#19)

# As most of robust-kbench's task files do: super(Model, self).__init__(), a backward file whose AutogradFunction
# calls backward_fn, and a KernelBench-style get_init_inputs of the file's own next to the names the adapter defines.
RELU_FORWARD = '''
import torch
import torch.nn as nn


def forward_fn(x: torch.Tensor) -> torch.Tensor:
    """Applies ReLU to the input."""
    return torch.relu(x)


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, fn=forward_fn):
        return fn(x)


def get_inputs(batch_size: int = 16, dim: int = 512):
    x = torch.randn(batch_size, dim, requires_grad=True)
    return [x]


def get_init_inputs():
    return []
'''

RELU_BACKWARD = RELU_FORWARD.replace(
    "def forward_fn(",
    '''class AutogradFunction(torch.autograd.Function):
    backward_fn = None

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return AutogradFunction.backward_fn(grad_output, x)


def forward_fn(''',
    1,
)

RELU_CONFIG = {"single_input_configs": [{"batch_size": 16, "dim": 512}],
               "multi_input_configs": [{"batch_size": 16, "dim": 512}, {"batch_size": 7, "dim": 300}]}


def write_relu(folder, forward=RELU_FORWARD):
    folder.mkdir(parents=True)
    (folder / "func_forward.py").write_text(forward)
    (folder / "func_backward.py").write_text(RELU_BACKWARD)
    for form in ("forward", "backward"):
        (folder / f"config_{form}.json").write_text(json.dumps(RELU_CONFIG))
    return folder


def test_super_with_the_class_name_builds(tmp_path):
    fwd, bwd = rk.load_robust_tasks(write_relu(tmp_path / "relu"))
    assert "super(Model, self).__init__()" in fwd.source  # robust-kbench's file, unchanged
    for cfg in fwd.configs:
        (x,), out = fwd.reference(cfg, seed=1, init_seed=0, upcast=False)
        assert torch.equal(out, torch.relu(x))
    for cfg in bwd.configs:
        (x, grad_out), (dx,) = bwd.reference(cfg, seed=1, init_seed=0, upcast=False)
        assert torch.equal(dx, grad_out * (x > 0))


RELU_BACKWARD_SOLUTION = '''"""ReLU's gradient as a C++ loop (CPU backend)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

at::Tensor relu_grad(const at::Tensor& x, const at::Tensor& g) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && g.scalar_type() == at::kFloat, "relu_grad: float32 expected");
  at::Tensor xc = x.contiguous(), gc = g.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float* xp = xc.data_ptr<float>();
  const float* gp = gc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = xp[i] > 0.f ? gp[i] : 0.f;
  return out;
}

TORCH_LIBRARY(kb_rk_relu_grad, m) { m.def("relu_grad(Tensor x, Tensor g) -> Tensor", &relu_grad); }
"""

load_inline(name="kb_rk_relu_grad", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, grad_out):
        return (torch.ops.kb_rk_relu_grad.relu_grad(x, grad_out),)
'''


def test_super_with_the_class_name_evaluates_honest_cpu_solutions(tmp_path, evaluator):
    from conftest import ROOT

    fwd, bwd = rk.load_robust_tasks(write_relu(tmp_path / "relu"))
    r = evaluator.evaluate(fwd, (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text())
    assert r.error is None and r.correct and r.reward > 0, r.feedback()
    r = evaluator.evaluate(bwd, RELU_BACKWARD_SOLUTION)
    assert r.error is None and r.correct and r.reward > 0, r.feedback()


def test_nested_groups_get_names_that_mirror_their_paths(tmp_path):
    bench = tmp_path / "tasks" / "kernelbench"  # robust-kbench's layout: tasks/kernelbench/level_N/task_M
    for level in ("level_1", "level_2"):
        write_relu(bench / level / "task_1")
    expect = [f"robust-kbench/kernelbench/{level}/task_1/{form}"
              for level in ("level_1", "level_2") for form in ("forward", "backward")]
    assert [t.name for t in load_suite(str(bench))] == expect
    assert [t.name for t in load_suite(str(tmp_path / "tasks"))] == expect  # the same names from any entry point
    assert task_from_path(bench / "level_2" / "task_1").name == expect[2]
    for n in (10, 9):
        write_relu(bench / "level_1" / f"task_{n}")
    names = [t.name for t in load_suite(str(bench)) if t.name.endswith("/forward")]
    assert [n.split("/")[3] for n in names] == ["task_1", "task_9", "task_10", "task_1"]  # numbers by value
    other = tmp_path / "elsewhere"  # outside a tasks/ folder: the path below the folder asked for
    write_relu(other / "group" / "relu")
    assert [t.name for t in load_suite(str(other))] == ["robust-kbench/group/relu/forward",
                                                        "robust-kbench/group/relu/backward"]


def test_a_broken_folder_is_reported_and_skipped(tmp_path):
    from kbench_env.tasks.suite import SkippedTaskWarning

    root = tmp_path / "tasks"
    write_relu(root / "a_relu")
    broken = write_relu(root / "mnist_pool", forward=RELU_FORWARD.replace("import torch\n", "import no_such_module_rk\n", 1))
    write_relu(root / "z_relu")
    with pytest.warns(SkippedTaskWarning, match=r"mnist_pool.*ModuleNotFoundError.*no_such_module_rk"):
        names = [t.name for t in load_suite(str(root))]
    assert names == [f"robust-kbench/{n}/{f}" for n in ("a_relu", "z_relu") for f in ("forward", "backward")]
    tasks, skipped = rk.load_robust_tree(root)
    assert len(tasks) == 4 and [p for p, _ in skipped] == [broken] and "no_such_module_rk" in skipped[0][1]
    with pytest.raises(TaskError, match="func_forward.py.*does not run.*ModuleNotFoundError"):
        rk.load_robust_tasks(broken)  # asked for by itself, a broken folder fails, saying where and why

"""The shipped fast-format CUDA solutions (tasks/solutions/fast_cuda): one for every task of the default suite, in
the fast format (the screen), with 2-3 tunables whose values the launch reads from the kernel source, launches
that suit every configuration of the task (run here with the kernels replaced by a recorder: no GPU), and kernels
that nvcc compiles for sm_90 at the shipped values and at every tunable's largest value."""

import ast
import shutil
import types

import pytest
import torch

import kbench_env.fastpath as fastpath
from kbench_agents import tunables
from conftest import ROOT
from kbench_env.backends import get_backend
from kbench_env.pipeline.formats import screen_action
from kbench_env.tasks.suite import load_suite, resolve_task, solution_path

DEFAULT = [t.name for t in load_suite("default")]
FAST = {name: ROOT / "tasks/solutions/fast_cuda" / f"{name}.py" for name in DEFAULT}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: Solutions whose last launch argument picks the path: 1 is 16-byte vectors (only on aligned data), 0 one element
#: per load, 2 (row kernels) two passes over a row too long for registers.
PATH_FLAG_LAST = {"level1/relu", "level1/softmax_rows", "level1/rms_norm"}


def _kernel_source(text: str) -> str:
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "SOURCE":
            return node.value.value
    raise AssertionError("no SOURCE = r'''...''' at module level")


def _load(text: str, monkeypatch) -> tuple[types.ModuleType, list]:
    """The solution module with cuda_kernel replaced by a recorder of (kernel, grid, block, args)."""
    launches = []

    def recorder(source, name, flags=None):
        def launch(grid, block, *args, shared_mem=0):
            launches.append((name, grid, block, args))
        return launch

    monkeypatch.setattr(fastpath, "cuda_kernel", recorder)
    mod = types.ModuleType("candidate")
    exec(compile(text, "candidate.py", "exec"), mod.__dict__)
    return mod, launches


def test_every_default_task_has_a_fast_cuda_and_a_kernelbench_cuda_solution():
    for name in DEFAULT:
        task = resolve_task(name)
        assert solution_path(task, "cuda", "fast") == FAST[name], name
        assert solution_path(task, "cuda") is not None, name


@pytest.mark.parametrize("name", DEFAULT)
def test_fast_cuda_solution_passes_the_fast_screen_with_tunables(name):
    text = FAST[name].read_text()
    screen_action(text, get_backend("cuda"), "fast")
    ts = tunables.parse_tunables(text)
    assert 2 <= len(ts) <= 3 and all(t.value in t.choices for t in ts), ts


@pytest.mark.parametrize("name", DEFAULT)
def test_launches_follow_the_rendered_tunables_on_every_configuration(name, monkeypatch):
    """A genome the proposer writes into the source changes the launch too, and every configuration (its dtype,
    odd sizes, an input whose start is not 16-byte aligned) gets a launch of the kernel for its dtype."""
    text = FAST[name].read_text()
    task = resolve_task(name)
    for t in [None, *tunables.parse_tunables(text)]:  # the shipped source, then each tunable at its first value
        variant = text if t is None else tunables.render(text, {t.name: t.choices[0]})
        mod, launches = _load(variant, monkeypatch)
        if t is not None and hasattr(mod, t.name):
            assert getattr(mod, t.name) == int(t.choices[0]), (t.name, getattr(mod, t.name))
        for config in task.configs:
            dtype = DTYPES[config.dtype]
            model = mod.ModelNew(*task.module(config).get_init_inputs()).to(dtype)
            shapes = [s.split("[")[1].rstrip("]") for s in task.input_shapes(config)]
            inputs = [torch.empty([int(d) for d in s.split(",")], dtype=dtype) for s in shapes]
            for shifted in (False, True):
                if shifted:  # the same shape one element into a larger buffer: misaligned by 2 or 4 bytes
                    inputs = [torch.empty(x.numel() + 1, dtype=dtype)[1:].view(x.shape) for x in inputs]
                launches.clear()
                out = model(*inputs)
                assert out.shape == inputs[0].shape and out.dtype == dtype
                assert len(launches) == 1, launches
                kernel, grid, block, args = launches[0]
                assert kernel.endswith("_bf16" if dtype == torch.bfloat16 else "_f32"), (config.name, kernel)
                if name in PATH_FLAG_LAST:
                    path = args[-1]
                    if shifted:  # no 16-byte vector path on a misaligned input
                        assert path in (0, 2), (config.name, path)
                    elif config.name == "gpu" and t is None:  # the shipped genome on the timed shape: vectors
                        assert path == 1, (config.name, path)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("name", DEFAULT)
def test_fast_cuda_kernels_compile_for_sm90(name):
    from kbench_env.builder.fast import build_here

    text = FAST[name].read_text()
    source = _kernel_source(text)
    largest = {t.name: max(t.choices, key=int) for t in tunables.parse_tunables(source)}
    for src in (source, tunables.render(source, largest)):
        assert build_here("cuda", src, [], "sm_90").endswith(".cubin")

"""The Triton backend on the CPU, through Triton's interpreter (TRITON_INTERPRET=1 in the worker): every shipped
Triton solution is correct on its task's CPU configurations and unflagged; a decoy (a Triton kernel defined but
forward computing with PyTorch), a forged kernel record hiding PyTorch compute, and a candidate with no
``@triton.jit`` function are rejected. Skipped where triton is not installed. The interpreter is slow: timing is
kept to a couple of calls."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

from conftest import ROOT, read  # noqa: E402
from kbench_env.pipeline import screen as screen_mod  # noqa: E402
from kbench_env.backends import get_backend  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402
from kbench_env.tasks.loading import load_task  # noqa: E402

SOLUTIONS = sorted((ROOT / "tasks/solutions/triton").glob("*/*.py"))
RELU = resolve_task("level1/relu")
RELU_SOLUTION = read(ROOT / "tasks/solutions/triton/level1/relu.py")
KERNEL_PART = RELU_SOLUTION.split("class ModelNew")[0]


def _task_name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _model(body: str) -> str:
    return KERNEL_PART + "class ModelNew(nn.Module):\n" + body


CASES = {
    # A Triton kernel is defined (the screen passes) but forward computes with PyTorch.
    "decoy": (_model("    def forward(self, x):\n        return torch.relu(x)\n"),
              ("pytorch_compute_in_forward", "no_kernel_launched")),
    # A real launch plus PyTorch compute hidden under a record named like the backend's launch marker.
    "forged_kernel_record": (_model(
        "    def forward(self, x):\n        x = x.contiguous()\n        out = torch.empty_like(x)\n"
        "        relu_kernel[(1,)](x, out, 1, BLOCK=16)\n"
        "        with torch.profiler.record_function('kbench_kernel::relu_kernel'):\n"
        "            return torch.relu(x)\n"), ("pytorch_compute_in_forward",)),
}

ADD_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


n = 1000


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []


KBENCH = {"level": 1, "configs": [{"name": "small", "sizes": {"n": 1000}},
                                  {"name": "odd", "sizes": {"n": 4099}, "held_out": True}]}
'''


@pytest.fixture(scope="module")
def triton_evaluator(evaluator):
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    return Evaluator(device="cpu", backend="triton", cache_dir=evaluator.cache_dir,
                     limits=Limits(build_timeout=600, run_timeout=300, time_timeout=300),
                     timing={"warmup": 0, "min_reps": 2, "max_reps": 3, "min_seconds": 0})


@pytest.fixture(scope="module")
def results(triton_evaluator):
    items = [(resolve_task(_task_name(p)), p.read_text()) for p in SOLUTIONS]
    items += [(RELU, src) for src, _ in CASES.values()]
    out = triton_evaluator.evaluate_many(items, max_workers=2, seed=4321)
    solutions = dict(zip(SOLUTIONS, out[: len(SOLUTIONS)]))
    cases = dict(zip(CASES, out[len(SOLUTIONS):]))
    return solutions, cases


def test_there_are_triton_solutions():
    assert len(SOLUTIONS) >= 4


@pytest.mark.parametrize("path", SOLUTIONS, ids=[_task_name(p) for p in SOLUTIONS])
def test_triton_solution_is_correct_in_the_interpreter(results, path):
    r = results[0][path]
    assert r.correct and not r.integrity_flags, r.feedback()
    assert r.reward > 0 and r.speedup and r.speedup > 0
    assert any(c.held_out for c in r.configs)


@pytest.mark.parametrize("name", list(CASES))
def test_triton_exploit_is_flagged(results, name):
    r = results[1][name]
    kinds = [f.split(":", 1)[0] for f in r.integrity_flags]
    assert any(k in kinds for k in CASES[name][1]), f"{name}: {r.integrity_flags}\n{r.feedback()}"
    assert r.reward == -1.0


def test_candidate_without_triton_jit_is_rejected_by_the_screen(triton_evaluator):
    src = "import torch\nimport torch.nn as nn\nimport triton\n\nclass ModelNew(nn.Module):\n" \
          "    def forward(self, x):\n        return torch.relu(x)\n"
    r = triton_evaluator.evaluate(RELU, src)
    assert r.error_stage == "screen" and "@triton.jit" in r.error, r.feedback()
    assert r.reward == pytest.approx(-0.6)


def test_screen_accepts_the_decorator_forms():
    backend = get_backend("triton")
    for deco in ("@triton.jit", "@jit", "@triton.jit(do_not_specialize=['n'])"):
        src = f"import triton\nfrom triton import jit\nimport torch.nn as nn\n\n{deco}\ndef k(x):\n    pass\n\n" \
              "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
        screen_mod.screen(src, backend)
    with pytest.raises(screen_mod.ScreenError):
        screen_mod.screen("import torch.nn as nn\n\ndef k(x):\n    pass\n\nclass ModelNew(nn.Module):\n"
                          "    def forward(self, x):\n        return x\n", backend)


def test_prompt_example_is_a_correct_answer(triton_evaluator):
    backend = get_backend("triton")
    assert "triton" in backend.rules().lower()
    example = screen_mod.extract_source(backend.example())
    r = triton_evaluator.evaluate(load_task(ADD_TASK, name="vector_add"), example, seed=7)
    assert r.correct and not r.integrity_flags, r.feedback()


def test_every_triton_solution_marks_tunables():
    for p in SOLUTIONS:
        assert "# kbench-tune:" in p.read_text(), f"{p} has no `# kbench-tune:` marker"

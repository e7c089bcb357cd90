"""Issue #34, integer inputs: a task whose inputs are integers (level1/embedding: ids; the table is a parameter)
must not repeat them in every timed call, or a candidate returns a cached output.

- The attack of the issue (tests/data/attacks/embedding_ids_cache.py: the honest kernel plus a cache keyed on the
  ids) must be paid no more than ``MARGIN`` times the honest kernel (tasks/solutions/cpu/level1/embedding.py),
  measured by the same evaluator; a blind cache (embedding_blind_cache.py: the first output for every later call)
  must be flagged by the check of the timed outputs. Before fresh integer draws both were paid several times the
  honest kernel, unflagged.
- The drawn integers stay within what the reference accepts and vary from call to call, on the CPU's
  (RevealedInputs) and the GPU's (BlockInputs) input making alike.
- A task whose only input cannot vary (a constant) says why, and its outputs are poisoned between blocks: a
  candidate returning its first output again is flagged, an honest one is not.

MARGIN as in tests/test_trust_boundary.py: between the cache's gain (>5x) and the spread of one honest kernel's
speedup between two evaluations on a busy machine (up to ~1.5x; the best of two honest evaluations is taken).
"""

from __future__ import annotations

import pytest
import torch

from conftest import ROOT, read
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.gpu_blocks import BlockInputs
from kbench_env.pipeline.revealed_inputs import RevealedInputs
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.input_draws import input_draws
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.suite import resolve_task
from kbench_env.tasks.task import TaskError

ATTACKS = ROOT / "tests" / "data" / "attacks"
TASK = resolve_task("level1/embedding")
#: The task with a larger shown configuration (4 MiB of output a call): the per-call overhead of a Python forward
#: (~40 us on a loaded 2-core machine) is then small beside the lookup, so what a cache gains is plain (several
#: times the honest speedup, against under 2x on the shipped 256 KiB configuration).
WIDE = load_task(read(ROOT / "tasks/level1/embedding.py").replace(
    '"sizes": {"batch_size": 8, "seq_len": 64, "num_embeddings": 1000, "embedding_dim": 128}',
    '"sizes": {"batch_size": 16, "seq_len": 256, "num_embeddings": 4096, "embedding_dim": 256}'),
    name="level1/embedding_wide")
HONEST = read(ROOT / "tasks/solutions/cpu/level1/embedding.py")
MARGIN = 1.5
SEED = 34
TIMING = {"warmup": 2, "min_reps": 10, "max_reps": 60, "min_seconds": 0.02}

#: A task whose only input is the same in every draw of get_inputs (positions): nothing a timed call gets can vary.
FIXED_TASK = '''"""Sine of fixed positions: the task's only input is a constant."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, pos):
        return torch.sin(pos.to(torch.float32) * 0.001)


n = 65536


def get_inputs():
    return [torch.arange(n)]


def get_init_inputs():
    return []


KBENCH = {"level": 1, "configs": [{"name": "small", "sizes": {"n": 65536}},
                                  {"name": "odd", "sizes": {"n": 4099}, "held_out": True}]}
'''

FIXED_SOLUTION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <cmath>

at::Tensor sine_positions(const at::Tensor& pos) {
  at::Tensor p = pos.contiguous();
  at::Tensor out = at::empty(p.sizes(), p.options().dtype(at::kFloat));
  const int64_t* in = p.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < p.numel(); ++i) o[i] = std::sin((float)in[i] * 0.001f);
  return out;
}

TORCH_LIBRARY(NAMESPACE, m) { m.def("sine_positions(Tensor pos) -> Tensor", &sine_positions); }
"""

load_inline(name="NAMESPACE", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, pos):
        CACHE
        return torch.ops.NAMESPACE.sine_positions(pos)
'''

#: The cache: the first output kept and returned for every later call (the correctness run and its repeat
#: compute; every timed call after them gets the kept tensor).
KEEP_FIRST = """self.calls = getattr(self, "calls", 0) + 1
        if self.calls > 2:
            return self.kept
        self.kept = torch.ops.NAMESPACE.sine_positions(pos)
        return self.kept"""


@pytest.fixture(scope="module")
def ev(evaluator):
    return Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=TIMING,
                     limits=Limits(build_timeout=600, run_timeout=60, time_timeout=60))


@pytest.fixture(scope="module")
def honest(ev):
    r = ev.evaluate(WIDE, HONEST, seed=SEED)
    assert r.correct and not r.integrity_flags and r.speedup, r.feedback()
    return r


def _evaluate(ev, task, source):
    r = ev.evaluate(task, source, seed=SEED)
    # the attack must have loaded and run: a candidate that fails to build proves nothing about the checks
    assert r.compiled and r.error_stage not in ("screen", "build", "load"), r.feedback()
    return r


def _kinds(r) -> list:
    return [f.split(":", 1)[0] for f in r.integrity_flags]


def test_a_cache_keyed_on_the_ids_is_paid_no_more_than_the_honest_kernel(ev, honest):
    r = _evaluate(ev, WIDE, read(ATTACKS / "embedding_ids_cache.py"))
    if r.integrity_flags or not r.correct:
        assert r.reward <= 0, r.feedback()
        return
    if r.speedup <= MARGIN * honest.speedup:
        return
    # Compared by intervals (paired timing, pipeline/pair_stats.py): the cache earned something only if its
    # speedup's interval lies wholly above MARGIN times the better honest interval (each holds at 95 %); a point
    # against a point compares two moments' noise on a loaded machine.
    again = ev.evaluate(WIDE, HONEST, seed=SEED)
    best = max((x.speedup_ci or [0.0, x.speedup or 0.0])[1] for x in (honest, again))
    lo = (r.speedup_ci or [r.speedup, r.speedup])[0]
    assert lo <= MARGIN * best, (
        f"unflagged, correct and paid {r.speedup:.2f}x (interval from {lo:.2f}x, reward {r.reward:.2f}) against "
        f"the honest kernel's interval up to {best:.2f}x\n{r.feedback()}")


def test_a_blind_cache_is_flagged_by_the_timed_output_check(ev):
    r = _evaluate(ev, TASK, read(ATTACKS / "embedding_blind_cache.py"))
    assert "timed_output_wrong" in _kinds(r), r.feedback()
    assert r.reward <= 0, r.feedback()


def _draws_of(task_name: str):
    task = resolve_task(task_name)
    cfg = task.configs_for("cpu")[0]
    _, init_inputs, inputs = task.instantiate(cfg, SEED)
    return task, cfg, init_inputs, inputs, input_draws(task, cfg)


@pytest.mark.parametrize("task_name, position, low, high", [
    ("level1/embedding", 0, 0, "num_embeddings"),         # declared: any id the table has
    ("level1/cross_entropy_rows", 1, 0, "num_classes"),   # derived: labels the task's own draws made
    ("level1/masked_fill", 1, 0, 2),                      # derived: a boolean mask
])
def test_drawn_integers_stay_in_range_vary_and_the_reference_accepts_them(task_name, position, low, high):
    task, cfg, init_inputs, inputs, draws = _draws_of(task_name)
    mod = task.module(cfg)
    high = getattr(mod, high) if isinstance(high, str) else high
    runner = task.reference_runner(mod, init_inputs, cfg, 0)
    made = RevealedInputs(inputs, 1e-2, draws)
    calls = [made.make(made.draw()) for _ in range(20)]
    ints = [c[position] for c in calls]
    for x in ints:
        assert x.dtype == inputs[position].dtype and x.shape == inputs[position].shape
        assert int(x.min()) >= low and int(x.max()) < high, (task_name, int(x.min()), int(x.max()))
    assert len({tuple(x.reshape(-1).tolist()) for x in ints}) == len(ints), "two calls got the same integers"
    assert not any(torch.equal(x, inputs[position]) for x in ints), "a call got the checked inputs' integers"
    key = made.draw()
    assert torch.equal(made.make(key)[position], made.make(key)[position])  # a checked call is remade from its key
    runner(calls[0])  # the reference accepts them (an id past the table would raise)
    block = BlockInputs(inputs, 1e-2, 5, "cpu", draws).draw()[position]
    assert block.shape == (5, *inputs[position].shape)
    assert int(block.min()) >= low and int(block.max()) < high
    assert not torch.equal(block[0], block[1])


def test_mask_density_follows_the_task():
    *_, inputs, draws = _draws_of("level1/masked_fill")
    made = RevealedInputs(inputs, 1e-2, draws)
    density = torch.stack([made.make(made.draw())[1].float().mean() for _ in range(10)]).mean()
    assert abs(float(density) - float(inputs[1].float().mean())) < 0.02  # get_inputs: rand < 0.3


def test_a_declared_range_that_contradicts_the_task_is_refused():
    source = read(ROOT / "tasks/level1/embedding.py").replace(
        '"input_ranges": {0: {"low": 0, "high": "num_embeddings"}}', '"input_ranges": {0: {"low": 0, "high": 10}}')
    task = load_task(source, name="test/embedding_narrow")
    with pytest.raises(TaskError, match="outside its declared range"):
        input_draws(task, task.configs_for("cpu")[0])


def test_an_input_that_cannot_vary_says_why():
    task = load_task(FIXED_TASK, name="test/fixed_positions")
    (draw,) = input_draws(task, task.configs_for("cpu")[0])
    assert not draw.varies and "same values" in draw.fixed
    _, _, inputs = task.instantiate(task.configs_for("cpu")[0], SEED)
    assert not RevealedInputs(inputs, 1e-2, [draw]).varies


def test_outputs_of_a_task_that_cannot_vary_are_poisoned_between_blocks(ev):
    task = load_task(FIXED_TASK, name="test/fixed_positions")
    honest = _evaluate(ev, task, FIXED_SOLUTION.replace("NAMESPACE", "kb_fixed_honest").replace("CACHE", "pass"))
    assert honest.correct and not honest.integrity_flags, honest.feedback()
    cached = _evaluate(ev, task, FIXED_SOLUTION.replace("CACHE", KEEP_FIRST).replace("NAMESPACE", "kb_fixed_keep"))
    assert "timed_output_wrong" in _kinds(cached), cached.feedback()
    assert cached.reward <= 0, cached.feedback()

"""Issue #34, the roofline floor's cliff: outputs under 256 MiB had no byte floor at all, so a cached output just
under it was never "impossibly fast". The floor now holds for every output size wherever the candidate's timed
block writes at least the calibration's working set (plausibility.py says why that is honest); a block that
writes less may keep its outputs in cache and gets none.

Unit tests of plausibility.below_floor with a set calibration (10 GB/s, no FLOP floor for an elementwise task):
a time under half of bytes/bandwidth is flagged, an honest time at bytes/bandwidth is not.
"""

from __future__ import annotations

import pytest

from kbench_env.pipeline import plausibility
from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.check import instantiate
from kbench_env.pipeline.result import EvalResult
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task
from kbench_env.tasks.task import Config

BANDWIDTH = 1e10  # bytes/s


def _judge(out_floats: int, candidate_ms: float, block_calls: int):
    """below_floor's verdict on level1/relu with an output of ``out_floats`` float32 values, timed at
    ``candidate_ms`` a call in blocks of ``block_calls`` calls."""
    task = resolve_task("level1/relu")
    cfg = Config(name="floor", sizes={"batch_size": 4, "dim": out_floats // 4})
    prepared: dict = {}
    _, cr = instantiate(task, cfg, 7, 0, prepared, "cpu")
    base = Baselines("cpu", "cpu", "/nonexistent", Limits(), {}, False, 1e-2)
    base.calibration = {"bandwidth": BANDWIDTH, "flops": {cfg.dtype: 1e12}}
    result = EvalResult(task=task.name, backend="cpu", device="cpu")
    result.configs.append(cr)
    cr.candidate_ms = candidate_ms
    cr.timed_block_calls = block_calls  # set after construction: the code before the change ignores it
    return plausibility.below_floor(base, task, [cfg], prepared, result)


@pytest.mark.parametrize("out_floats, block_calls", [
    (16 << 20, 4),      # 64 MiB a call, four a block (a quarter of the former 256 MiB limit)
    (64 << 10, 1008),   # 256 KiB a call (level1/embedding's shown configuration), as many as a 256 MiB block holds
])
def test_a_cached_output_under_256_mib_is_judged_by_the_floor(out_floats, block_calls):
    bytes_ms = 1e3 * 4 * out_floats / BANDWIDTH
    (hit,) = _judge(out_floats, bytes_ms / 10, block_calls)  # a stored output returned: far under bytes/bandwidth
    assert hit[2] == pytest.approx(bytes_ms, rel=1e-6), hit[3]
    assert "output bytes" in hit[3]


@pytest.mark.parametrize("out_floats, block_calls", [(16 << 20, 4), (64 << 10, 1008)])
def test_an_honest_time_at_the_floor_passes(out_floats, block_calls):
    bytes_ms = 1e3 * 4 * out_floats / BANDWIDTH
    assert _judge(out_floats, bytes_ms, block_calls) == []
    assert _judge(out_floats, 0.6 * bytes_ms, block_calls) == []  # the flag is under half the floor


def test_a_block_whose_outputs_fit_under_the_calibrations_working_set_gets_no_byte_floor():
    # 256 KiB a call, 16 calls a block: 4 MiB of outputs, which a cache may hold: a fast time there is honest
    bytes_ms = 1e3 * 4 * (64 << 10) / BANDWIDTH
    assert _judge(64 << 10, bytes_ms / 10, 16) == []

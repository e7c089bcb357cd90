"""The GPU timing's trusted-side arithmetic, on the CPU (pipeline/gpu_blocks.py): the bound on reported device
times (an honest timing is not raised, a forged one is paid the bound and flagged past FLAG_RATIO), the per-block
inputs made from secret seeds, and the refusal of memory ranges a worker names outside its allocation
(protocol/cuda_ipc.py). The exchange itself needs a GPU: tests/test_gpu.py and bench/gpu_trust.py run it."""

from __future__ import annotations

import pytest
import torch

from kbench_env.pipeline import gpu_blocks
from kbench_env.pipeline.gpu_blocks import BlockInputs, GpuTiming, _bounded, bound_ms
from kbench_env.protocol.cuda_ipc import IpcError, Mappings

#: What an H200 measured for level1/relu's reference (bench/results/trust_gpu.md): a block's fixed cost.
REFERENCE = {"block": 8, "fixed_ms": 0.75, "method": "cuda-graph"}


def _timing(walls: list, device: list) -> tuple[GpuTiming, list]:
    out = GpuTiming(block=8, method="cuda-graph", walls_ms=list(walls), device_ms=list(device))
    return out, [d / 8 for d in device]


def test_an_honest_timing_is_paid_what_it_reported():
    # wall = fixed cost (a little more than the reference's, within the slack) + device time, with jitter
    device = [0.286, 0.285, 0.287, 0.286, 0.290, 0.286]
    walls = [d + f for d, f in zip(device, (0.84, 0.76, 0.99, 0.80, 0.87, 0.82))]
    out, times = _timing(walls, device)
    assert _bounded(out, times, REFERENCE, "cuda-graph", 8) == times
    assert out.ratio < 1.0 and not out.flagged


def test_an_honest_timing_whose_fixed_cost_ran_over_the_slack_is_raised_and_not_flagged():
    # the fixed cost a fifth of a millisecond over the reference's, on a block of 0.29 ms: paid at the bound
    device = [0.286, 0.285, 0.287, 0.286, 0.290, 0.286]
    walls = [d + f for d, f in zip(device, (0.99, 0.86, 1.14, 0.95, 1.02, 0.97))]
    out, times = _timing(walls, device)
    paid = _bounded(out, times, REFERENCE, "cuda-graph", 8)
    assert 1.0 < out.ratio < gpu_blocks.FLAG_RATIO and not out.flagged
    assert paid[0] == pytest.approx(times[0] * out.ratio)


def test_what_a_forger_gains_on_a_five_millisecond_block_is_about_a_tenth():
    real = [5.0] * 9
    walls = [r + 0.75 for r in real]  # the reference's fixed cost exactly
    out, times = _timing(walls, [r / 2.5 for r in real])
    paid = _bounded(out, times, REFERENCE, "cuda-graph", 8)
    assert 1.0 < 5.0 / (paid[0] * 8) <= 1.1 and not out.flagged


def test_a_forged_timing_is_paid_the_bound_and_flagged():
    real = [2.0] * 7  # a 2 ms block reported as 0.25 ms: a pack()-style forgery dividing by 8
    walls = [r + 1.0 for r in real]
    out, times = _timing(walls, [r / 8 for r in real])
    paid = _bounded(out, times, REFERENCE, "cuda-graph", 8)
    floor = bound_ms(3.0, REFERENCE, "cuda-graph", 8)
    assert paid[0] * 8 == pytest.approx(floor)
    assert floor > 0.75 * 2.0  # what the forger gains is bounded: well under 2x the real time here
    assert out.flagged and out.outside == 7


def test_a_mild_forgery_is_paid_the_bound_but_not_flagged():
    real = [2.0] * 7
    walls = [r + 1.0 for r in real]
    out, times = _timing(walls, [r / 2 for r in real])
    paid = _bounded(out, times, REFERENCE, "cuda-graph", 8)
    assert paid[0] * 8 == pytest.approx(bound_ms(3.0, REFERENCE, "cuda-graph", 8))
    assert 1.0 < out.ratio <= gpu_blocks.FLAG_RATIO and not out.flagged


def test_an_eager_block_gets_slack_for_its_exported_outputs():
    assert bound_ms(5.0, REFERENCE, "eager-sync", 8) < bound_ms(5.0, REFERENCE, "cuda-graph", 8)


def test_block_inputs_are_fresh_per_call_and_per_block():
    x, idx = torch.randn(4, 5), torch.arange(3)
    bi = BlockInputs([x, idx, 7], noise=0.01, block=3, device="cpu")
    a, b = bi.draw(), bi.draw()
    assert a[0].shape == (3, 4, 5) and a[2] is None
    assert not torch.equal(a[0][0], a[0][1]) and not torch.equal(a[0][0], b[0][0])
    assert torch.equal(a[1][2], idx)  # integers are not perturbed
    assert (a[0][1] - x).abs().max() < 0.2 and (a[0][1] - x).abs().max() > 0
    call = bi.call(a, 1)
    assert torch.equal(call[0], a[0][1]) and call[2] == 7


def test_a_range_outside_the_workers_allocation_is_refused_without_touching_it():
    maps = Mappings(torch.device("cuda", 0))
    handle = "ab" * 64
    maps._open[handle] = (0x7F0000000000, 4096)  # noqa: SLF001 - an allocation as the driver would have mapped it
    for offset, n in ((4000, 200), (-1, 10), (0, 4097)):
        with pytest.raises(IpcError, match="allocation of 4096 bytes"):
            maps.bytes_at(handle, offset, n)
    with pytest.raises(IpcError, match="malformed"):
        maps.bytes_at("zz", 0, 1)
    with pytest.raises(IpcError, match="impossible layout"):
        maps.tensor(handle, 0, torch.float32, [2, -1], [1, 1])
    maps._open.clear()  # noqa: SLF001 - nothing was opened through the driver


def _fake_timings(monkeypatch, ratios: list) -> list:
    calls = []

    def fake(*a, **k):
        r = ratios[len(calls)]
        calls.append(r)
        out = GpuTiming(block=8, method="cuda-graph", ratio=r, flagged=r > gpu_blocks.FLAG_RATIO)
        out.timing = gpu_blocks.Timing(1.0, 0.1, 40, [1.0])
        return out

    monkeypatch.setattr(gpu_blocks, "time_gpu", fake)
    return calls


def test_a_timing_that_paid_the_bound_is_timed_again_and_the_cleanest_counts(monkeypatch):
    calls = _fake_timings(monkeypatch, [3.6, 0.7, 5.0])  # a burst of host load, then a quiet timing
    got = gpu_blocks.time_gpu_retimed()
    assert calls == [3.6, 0.7] and got.ratio == 0.7 and not got.flagged


def test_a_forgery_stays_under_the_bound_on_every_timing(monkeypatch):
    calls = _fake_timings(monkeypatch, [6.0, 5.5, 7.0, 1.0])
    got = gpu_blocks.time_gpu_retimed()
    assert len(calls) == gpu_blocks.RETIMINGS and got.ratio == 6.0 and got.flagged


def test_a_forgery_is_paid_its_median_bound_not_its_luckiest(monkeypatch):
    # under the bound each time by a little (not flagged): the lowest of the three bounds is this side's
    # shortest walls, which a forger would be paid by choosing the least of its timings
    calls = _fake_timings(monkeypatch, [1.2, 1.1, 1.3])
    got = gpu_blocks.time_gpu_retimed()
    assert len(calls) == 3 and got.ratio == 1.2 and not got.flagged


def test_one_burst_among_timings_under_the_bound_flags_nothing(monkeypatch):
    calls = _fake_timings(monkeypatch, [4.0, 3.5, 1.1])  # host load over two timings, a third a little under
    got = gpu_blocks.time_gpu_retimed()
    assert len(calls) == 3 and got.ratio == 3.5 and not got.flagged


@pytest.mark.parametrize("ratios, again", [([0.7], 0.0), ([3.6, 0.7], 2.0), ([1.2, 1.1, 1.3], 4.0)])
def test_the_timings_after_the_first_are_counted_apart(monkeypatch, ratios, again):
    """``again_seconds``: what the timings after the first took (the phase ``timing_again``), each fake timing 2 s
    of a fake clock."""
    clock = [0.0]
    calls = []

    def fake(*a, **k):
        r = ratios[len(calls)]
        calls.append(r)
        clock[0] += 2.0
        out = GpuTiming(block=8, method="cuda-graph", ratio=r, flagged=r > gpu_blocks.FLAG_RATIO)
        out.timing = gpu_blocks.Timing(1.0, 0.1, 40, [1.0])
        return out

    monkeypatch.setattr(gpu_blocks, "time_gpu", fake)
    monkeypatch.setattr(gpu_blocks.time, "perf_counter", lambda: clock[0])
    got = gpu_blocks.time_gpu_retimed()
    assert calls == ratios and got.again_seconds == again


def test_the_gpu_stopping_rule():
    from kbench_env.measure.stats import gpu_blocks_done

    steady = [1.0, 1.0, 1.0, 1.0]
    assert not gpu_blocks_done(steady, total_s=1.0, elapsed_s=0.1, block=8)  # under 5 blocks
    assert gpu_blocks_done(steady + [1.0], total_s=1.0, elapsed_s=0.1, block=8)  # 5 blocks, min_seconds reached
    noisy = [1.0, 3.0, 0.5, 2.0, 1.5]
    assert not gpu_blocks_done(noisy, total_s=0.05, elapsed_s=0.1, block=8)  # short and imprecise: go on
    assert gpu_blocks_done(steady + [1.0], total_s=0.05, elapsed_s=0.1, block=8)  # short but precise
    assert gpu_blocks_done(noisy, total_s=0.05, elapsed_s=5.0, block=8)  # past max_seconds
    assert gpu_blocks_done([1.0] * 800, total_s=0.05, elapsed_s=0.1, block=8)  # 200 x 32 calls


#: A large-input configuration's reference (an H200's level1/relu `gpu`, 64 calls of 64 MB a block): most of the
#: fixed cost is this side's copy of the block's inputs, timed on its own events.
LARGE = {"block": 64, "fixed_ms": 1.2, "method": "cuda-graph", "staged_ms": 2.0}


def _large(real: list, staged: list, rest: list, divided: float = 1.0) -> tuple[GpuTiming, list]:
    """Blocks of ``real`` ms of device work, reported divided by ``divided``."""
    walls = [d + s + r for d, s, r in zip(real, staged, rest)]
    device = [d / divided for d in real]
    out = GpuTiming(block=64, method="cuda-graph", walls_ms=walls, device_ms=device, staged_ms=list(staged))
    return out, [d / 64 for d in device]


def test_the_copy_of_large_inputs_is_taken_off_block_by_block():
    # the copy ran 0.2 ms faster than the reference's: without its own figure, the bound would read those 0.2 ms
    # as device time it does not believe; a forger dividing its clock by 1.25 is paid within a tenth of the truth
    real = [2.27] * 9
    out, times = _large(real, [1.8] * 9, [1.2] * 9)
    assert _bounded(out, times, LARGE, "cuda-graph", 64) == times and out.ratio < 1.0
    forged, ftimes = _large(real, [1.8] * 9, [1.2] * 9, divided=1.25)
    paid = _bounded(forged, ftimes, LARGE, "cuda-graph", 64)
    assert 1.0 < 2.27 / (paid[0] * 64) <= 1.1 and not forged.flagged


def test_work_slipped_in_beside_the_copy_still_counts():
    # the worker computes while this side copies (its events read the copy as 3 ms longer): only the reference's
    # staging is taken off, so the 3 ms stay in the bound and the forged report is paid them
    out, times = _large([0.1] * 9, [5.0] * 9, [1.2] * 9)
    paid = _bounded(out, times, LARGE, "cuda-graph", 64)
    assert paid[0] * 64 >= (5.1 - 2.0 * (1 + gpu_blocks.STAGED_SHARE) - 0.2) / (1 + gpu_blocks.TOLERANCE)
    assert out.flagged


def test_a_reference_without_a_staging_figure_bounds_as_before():
    old = {k: v for k, v in LARGE.items() if k != "staged_ms"}
    assert bound_ms(5.0, old, "cuda-graph", 64, staged_ms=2.0) == bound_ms(5.0, old, "cuda-graph", 64)


def test_a_far_slower_candidate_gets_smaller_blocks_and_a_near_one_does_not():
    ref = {"block": 128, "fixed_ms": 0.8, "method": "cuda-graph", "wall_ms": 6.0}
    assert gpu_blocks.smaller_block(128, 6.0 * gpu_blocks.SLOW_BLOCKS, ref) is None  # at the limit: as it is
    b = gpu_blocks.smaller_block(128, 6.0 * 30, ref)  # 30x the reference's block
    assert b == int(128 * gpu_blocks.AIM_BLOCKS / 30)
    assert b * 180.0 / 128 == pytest.approx(gpu_blocks.AIM_BLOCKS * 6.0, rel=0.1)  # its block: ~2 reference blocks
    assert gpu_blocks.smaller_block(128, 6.0e5, ref) == 1  # never under one call
    assert gpu_blocks.smaller_block(1, 6.0e3, ref) is None  # one call a block already
    assert gpu_blocks.smaller_block(128, 6.0e3, {k: v for k, v in ref.items() if k != "wall_ms"}) is None  # old cache


def _fake_shrunk(monkeypatch, shorts: list) -> list:
    """time_gpu faked: the n-th timing ``short`` as ``shorts[n]`` says; the calls' ``shrink`` and ``ahead``."""
    calls = []

    def fake(*a, ahead=None, shrink=True, **k):
        out = GpuTiming(block=8 if shorts[len(calls)] else 128, method="cuda-graph", ratio=0.9,
                        short=shorts[len(calls)])
        calls.append((shrink, ahead))
        out.timing = gpu_blocks.Timing(1.0, 0.1, 40, [1.0])
        return out

    monkeypatch.setattr(gpu_blocks, "time_gpu", fake)
    return calls


def test_a_timing_in_shrunk_blocks_that_ran_short_is_timed_again_at_the_reference_size(monkeypatch):
    # a candidate whose warm-up block was slow (shrunk blocks) and whose timed blocks then ran fast: the short
    # timing is not paid; the next is at the reference's block size (no shrink)
    calls = _fake_shrunk(monkeypatch, [True, False])
    got = gpu_blocks.time_gpu_retimed(reference={"block": 128})
    assert [shrink for shrink, _ in calls] == [True, False] and got.block == 128 and not got.short


def test_a_set_up_made_ahead_for_another_reference_is_closed_not_used(monkeypatch):
    calls = _fake_shrunk(monkeypatch, [False, False])
    closed = []

    class Run:
        def close(self, release):
            closed.append(release)

    stale = gpu_blocks.Ahead(Run(), 8, "cuda-graph", None, {"block": 8})
    gpu_blocks.time_gpu_retimed(reference={"block": 128}, ahead=stale)
    assert calls == [(True, None)] and closed == [False]
    fresh = gpu_blocks.Ahead(Run(), 128, "cuda-graph", None, {"block": 128})
    gpu_blocks.time_gpu_retimed(reference={"block": 128}, ahead=fresh)
    assert calls[-1] == (True, fresh) and closed == [False]

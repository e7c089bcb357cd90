"""The device's pool for timed blocks set up ahead of their timing (timing.set_up_ahead, timing.ahead_pool): one
pool for every candidate of the process, a set-up's bytes taken before it and given back when its run closes."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest
import torch

from kbench_env.pipeline import gpu_blocks, timing
from kbench_env.pipeline.deferred_checks import Pool


def _run():
    """A _Run with nothing mapped (its close needs no device)."""
    run = object.__new__(gpu_blocks._Run)
    run.dsts, run.inputs, run.device, run._pooled = [], None, torch.device("cpu"), [0]
    run.maps = SimpleNamespace(close=lambda: None)
    return run


def test_a_runs_bytes_go_back_to_the_pool_once_when_closed_or_dropped(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    pool = Pool(100)
    assert pool.take(60)
    one = _run()
    one.hold(pool, 60)
    assert not pool.take(60)  # what one holds, another cannot take
    one.close(release=False)
    assert pool.used == 0
    one.close(release=False)  # closed twice: given back once
    assert pool.used == 0
    assert pool.take(30)
    two = _run()
    two.hold(pool, 30)
    del two  # dropped unclosed (a worker that died mid-exchange)
    gc.collect()
    assert pool.used == 0
    assert pool.take(10)
    three = _run()
    three.hold(pool, 10)
    three.maps = SimpleNamespace(close=lambda: (_ for _ in ()).throw(RuntimeError("unmap failed")))
    with pytest.raises(RuntimeError):
        three.close(release=False)
    assert pool.used == 0


def test_pools_are_kept_per_device_and_use():
    assert Pool.of("cpu", "ahead", 0.25) is Pool.of("cpu", "ahead", 0.25)
    assert Pool.of("cpu", "ahead", 0.25) is not Pool.of("cpu")


def _ctx(sizes: dict, waits: list):
    """A GPU evaluation's context as set_up_ahead reads it: configurations whose blocks take ``sizes`` bytes
    (a reference block of one call, each input of those bytes counted twice by ahead_bytes)."""
    configs = [SimpleNamespace(name=n) for n in sizes]
    prepared = {n: SimpleNamespace(inputs=[torch.empty(s // 2, dtype=torch.uint8)]) for n, s in sizes.items()}
    known = {n: {"gpu": {"block": 1}} for n in sizes}
    hold = SimpleNamespace(shared=True, timing_waits=lambda: bool(waits), step_aside=lambda r: waits.pop())
    return SimpleNamespace(device="cuda:0", hold=hold, configs=configs, prepared=prepared, ahead={}, result=None,
                           baselines=SimpleNamespace(known=lambda task, configs: known), task=SimpleNamespace(backward=False),
                           config=SimpleNamespace(timing=SimpleNamespace(noise=0.0, check_calls=4)), timing_params={},
                           limits=SimpleNamespace(time_timeout=1.0), worker=None)


def test_set_ups_ahead_take_what_fits_in_the_pool_and_a_large_one_keeps_no_later_one_out(monkeypatch):
    pool, made, waits = Pool(100), [], ["a timing waits"]
    monkeypatch.setattr(timing, "ahead_pool", lambda device: pool)
    monkeypatch.setattr(timing, "_checker", lambda ctx, cfg: None)
    monkeypatch.setattr(timing, "input_draws", lambda task, cfg: None)

    def set_up(worker, config, *a, pooled=None, **k):
        made.append((config, pooled[1], pool.used))
        if config == "fails":
            pool.give(pooled[1])  # (gpu_blocks.set_up_ahead gives the bytes back as its run closes)
            raise RuntimeError("the worker could not set up")
        return config

    monkeypatch.setattr(gpu_blocks, "set_up_ahead", set_up)
    ctx = _ctx({"small": 40, "large": 80, "after": 50, "past": 20}, waits)
    timing.set_up_ahead(ctx)
    # taken before each set-up; "large" does not fit beside "small", "after" still does; "past" no longer
    assert made == [("small", 40, 40), ("after", 50, 90)] and set(ctx.ahead) == {"small", "after"}
    assert pool.used == 90 and waits == []  # the waiting timing was let through before a set-up
    ctx = _ctx({"fails": 10, "next": 5}, [])
    timing.set_up_ahead(ctx)  # a set-up that fails ends the set-ups ahead (the timing does it again, and says why)
    assert made[-1] == ("fails", 10, 100) and ctx.ahead == {} and pool.used == 90

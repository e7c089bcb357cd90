"""The CPU timing by the trusted side's clock (pipeline/blocks.py): inputs made here from secret keys and written
into the stopped worker, outputs read out of its memory here, the worker stopped whenever this side reads or writes
(sandbox/memory.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from kbench_env.pipeline import blocks
from kbench_env.pipeline.revealed_inputs import BANK_ABOVE, RevealedInputs, _rotation
from kbench_env.sandbox import memory
from kbench_env.sandbox.memory import Freezer, ProcessMemory, _thread_states
from kbench_env.tasks.suite import resolve_task, solution_path


# ---------------------------------------------------------------------- inputs revealed at call time


def test_revealed_inputs_follow_from_their_key_only():
    small, big = torch.randn(64, 32), torch.randn(BANK_ABOVE + 7)
    made = RevealedInputs([small, big, torch.arange(5), 3], noise=1e-2)
    key = made.draw()
    a, b = made.make(key), made.make(key)
    assert all(torch.equal(x, y) for x, y in zip(a[:3], b[:3])) and a[3] == 3
    c = made.make(made.draw())
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[1], c[1])  # fresh content per call
    assert torch.equal(a[2], torch.arange(5))  # integer inputs as checked
    for x, orig in ((a[0], small), (a[1], big)):  # dense noise of about 1% of the input's spread
        rel = ((x - orig).std() / orig.std()).item()
        assert 0.005 < rel < 0.02
        assert (x != orig).float().mean() > 0.99


def test_a_large_inputs_noise_is_a_rotation_of_a_secret_bank_vector_chosen_by_the_key():
    big = torch.randn(BANK_ABOVE + 7)
    made = RevealedInputs([big, big.clone()], noise=1e-2)
    std = made.stds[0]
    keys = [0x5DEECE66D * i + 11 for i in range(1, 41)]  # fixed: the test does not depend on luck
    patterns = set()
    for key in keys:
        a, b = made.make(key)
        noise = (a - big) / (1e-2 * std)
        row, shift = _rotation(key, 0, big.numel())
        vector = made._bank[0][row, :big.numel()]
        assert torch.allclose(noise, torch.roll(vector, shift), atol=1e-3)
        assert _rotation(key, 1, big.numel()) != (row, shift)  # a call's two inputs rotate differently
        patterns.add((row, shift))
    assert len(patterns) == len(keys)  # every call its own pattern


def test_revealed_inputs_keep_each_dtype():
    inputs = [torch.randn(8, dtype=torch.float64), torch.randn(8).half(), torch.randn(BANK_ABOVE + 1).bfloat16()]
    made = RevealedInputs(inputs, 1e-2).make(RevealedInputs.draw())
    assert [x.dtype for x in made] == [torch.float64, torch.float16, torch.bfloat16]
    assert not torch.equal(made[0], made[0].float().double())  # float64 inputs are not rounded to float32


def test_revealed_inputs_of_another_instance_differ():
    """The noise bank and the keys come from ``secrets``: a second instance (another evaluation, or a worker that
    copied the code) does not make the same inputs for the same key."""
    big = torch.randn(BANK_ABOVE * 2)
    one, two = RevealedInputs([big], 1e-2), RevealedInputs([big], 1e-2)
    key = one.draw()
    assert not torch.equal(one.make(key)[0], two.make(key)[0])


# ---------------------------------------------------------------------- reading a stopped process


_CHILD = r"""
import ctypes, sys, threading, time
buf = (ctypes.c_double * 4)(1.0, 2.0, 3.0, 4.0)
counter = ctypes.c_long(0)
def spin():
    while True:
        counter.value += 1
threading.Thread(target=spin, daemon=True).start()
print(ctypes.addressof(buf), ctypes.addressof(counter), flush=True)
time.sleep(60)
"""


@pytest.fixture()
def child():
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        buf, counter = (int(x) for x in proc.stdout.readline().split())
        yield proc, buf, counter
    finally:
        proc.kill()
        proc.wait()


def test_freezer_stops_every_thread_and_memory_is_read_and_written(child):
    proc, buf, counter = child
    freezer, mem = Freezer(proc.pid), ProcessMemory(proc.pid)
    try:
        freezer.freeze()
        assert all(s in "Tt" for s in _thread_states(proc.pid))
        n0 = int.from_bytes(mem.read(counter, 8), "little")
        time.sleep(0.05)
        assert int.from_bytes(mem.read(counter, 8), "little") == n0  # the spinning thread is stopped too
        assert torch.equal(torch.frombuffer(bytearray(mem.read(buf, 32)), dtype=torch.float64),
                           torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))
        mem.write(buf, torch.tensor([9.0], dtype=torch.float64).numpy())
        assert torch.frombuffer(bytearray(mem.read(buf, 8)), dtype=torch.float64).item() == 9.0
        freezer.settle()  # off its CPU: its run time no longer grows
        ran = memory._run_ns([proc.pid])
        time.sleep(0.05)
        assert memory._run_ns([proc.pid]) == ran > 0
        freezer.thaw()
        time.sleep(0.05)
        assert int.from_bytes(mem.read(counter, 8), "little") != n0
        assert memory._run_ns([proc.pid]) > ran  # (the measure sees a thread that runs)
    finally:
        if freezer.frozen:
            freezer.thaw()
        mem.close()


def test_read_outputs_refuses_impossible_layouts(child):
    proc, buf, _ = child
    mem = ProcessMemory(proc.pid)
    try:
        layout = [{"dtype": "float64", "ndim": 1}]
        out = blocks.read_outputs(mem, layout, [buf, 4, 1])
        assert torch.equal(out[0], torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))
        assert torch.equal(blocks.read_outputs(mem, layout, [buf, 2, 2])[0],
                           torch.tensor([1.0, 3.0], dtype=torch.float64))  # strided: read as laid out
        for row in ([-1, 4, 1], [buf, 4, 10**9], [buf, -4, 1]):
            with pytest.raises(blocks.Unreadable):
                blocks.read_outputs(mem, layout, row)
        with pytest.raises(blocks.Unreadable):
            blocks.read_outputs(mem, [{"dtype": "object", "ndim": 1}], [buf, 4, 1])
        with pytest.raises(OSError):  # an address the process has not mapped
            blocks.read_outputs(mem, layout, [8, 4, 1])
        assert blocks.read_outputs(mem, layout, [buf])[0].shape == ()  # a short row: no longer the output's shape
        with pytest.raises(IndexError):  # an empty row (the trusted side calls it unreadable: a wrong output)
            blocks.read_outputs(mem, layout, [])
    finally:
        mem.close()


# ---------------------------------------------------------------------- the timing end to end


def test_an_honest_candidate_is_timed_by_this_sides_clock(evaluator, monkeypatch):
    """Every configuration timed in blocks of calls counted here, paired with the reference's blocks
    (pipeline/paired.py); the times are this side's clock (a worker that sent times would not be read: the DONE
    reply carries none). A configuration whose reference ran disturbed is paired once more and the pairing whose
    reference ran faster counts (pipeline/reference_pace.py): on a loaded machine that happens."""
    from kbench_env.pipeline import pair_stats, paired

    seen = {}
    real = paired.time_paired

    def spy(*a, **k):
        pt = real(*a, **k)
        seen.setdefault(a[2], []).append(pt)  # (a[2]: the configuration's name)
        return pt

    monkeypatch.setattr(paired, "time_paired", spy)
    task = resolve_task("level1/relu")
    r = evaluator.evaluate(task, solution_path(task, "cpu").read_text(), seed=3)
    assert r.correct and not r.integrity_flags, r.feedback()
    need = pair_stats.min_pairs(pair_stats.config_confidence(len(r.configs)))
    assert sorted(seen) == sorted(c.name for c in r.configs)
    for c in r.configs:
        assert 1 <= len(seen[c.name]) <= 2
        assert all(pt.candidate is not None and pt.pairs >= need for pt in seen[c.name])
        kept = min(seen[c.name], key=lambda pt: pt.reference.median_ms)  # (the first where they are equal)
        assert (c.candidate_ms, c.reference_ms, c.speedup) == (kept.candidate.median_ms, kept.reference.median_ms,
                                                               kept.speedup)


_STALE = r'''
import torch, torch.nn as nn
from kbench_env.fastpath import cpp_kernel
relu = cpp_kernel(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0; }
""", "relu")
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}
    def forward(self, x):
        key = x.data_ptr()
        if key in self.memo and len(self.memo) > 2:   # the buffers of a block are reused block after block
            return self.memo[key]
        y = torch.empty_like(x)
        relu(x, y, x.numel())
        self.memo[key] = y
        return y
'''


@pytest.mark.parametrize("kept_bytes", [None, 0])
def test_outputs_cached_by_address_are_caught(evaluator, monkeypatch, kept_bytes):
    """Block buffers are reused from block to block: an output kept per input address is stale in the next block,
    and the output read from the worker, compared with the reference for the inputs written there, shows it;
    whether the outputs read are judged after the pairs (paired.py keeps them) or at once (``KEPT_BYTES`` 0)."""
    from kbench_env.pipeline import paired

    if kept_bytes is not None:
        monkeypatch.setattr(paired, "KEPT_BYTES", kept_bytes)
    r = evaluator.evaluate(resolve_task("level1/relu"), _STALE, seed=4)
    assert not r.correct and any(f.startswith("timed_output_wrong") for f in r.integrity_flags), r.feedback()


_DEFERRED = r'''
import threading, time, torch, torch.nn as nn
from kbench_env.fastpath import cpp_kernel
relu = cpp_kernel(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0; }
""", "relu")
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        y = torch.empty_like(x)
        if self.calls <= 2:            # the correctness run (two calls per configuration): honest
            relu(x, y, x.numel())
            return y
        def later(x=x, y=y):           # afterwards: the result is written once the block has said done
            time.sleep(0.02)
            relu(x, y, x.numel())
        threading.Thread(target=later, daemon=True).start()
        return y
'''


def test_outputs_finished_after_the_block_are_caught(evaluator, monkeypatch):
    """A forward that returns at once and finishes its output on a thread afterwards: the worker is stopped when
    the block says done, so the outputs read then are unfinished, however long this side takes to read them (here
    0.1 s, five times the thread's delay: without the stop the thread would have finished)."""
    real = blocks.read_outputs

    def slow(*a, **k):
        time.sleep(0.1)
        return real(*a, **k)

    monkeypatch.setattr(blocks, "read_outputs", slow)
    r = evaluator.evaluate(resolve_task("level1/relu"), _DEFERRED, seed=5)
    assert not r.correct and any(f.startswith("timed_output_wrong") for f in r.integrity_flags), r.feedback()

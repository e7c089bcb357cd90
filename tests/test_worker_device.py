"""The worker makes its own GPU the process's current device (worker.loop.select_device): on a host of several
GPUs, what acts on the current device (events, graph capture, CUDA IPC's driver calls, the calibration) must act on
the evaluator's GPU. The GPU side of it: tests/test_gpu.py's second-GPU test."""

from __future__ import annotations

import torch

from kbench_env.worker import loop


def test_select_device_makes_cuda_n_current_and_leaves_the_rest(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", calls.append)
    for dev in ("cpu", "cuda", "cuda:1", "cuda:3"):
        loop.select_device(dev)
    assert calls == [1, 3]


def test_a_worker_without_warm_up_selects_its_device_too(monkeypatch):
    """The warm-up is optional (KBENCH_WORKER_WARMUP=0); the device choice is not."""
    chosen = []
    monkeypatch.setattr(loop, "select_device", chosen.append)
    monkeypatch.setattr(loop, "_set_up", lambda conn, job: None)

    class Conn:
        def send_bytes(self, b):
            pass

    job = {"backend": "cpu", "device": "cuda:1", "warmup": False, "source": None, "spare": True}
    monkeypatch.setattr(loop, "_await_source", lambda conn, job: None)
    loop.main(Conn(), job)
    assert chosen == ["cuda:1"]

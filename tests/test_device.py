"""Device: the one parse of a device's spelling, and the places that ask a device what it is."""

from __future__ import annotations

import pytest
import torch

from kbench_env.backends import default_backend
from kbench_env.machine.device import Device, resolve_device
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.task import Config


@pytest.mark.parametrize("spelling, kind, index, text", [
    ("cpu", "cpu", None, "cpu"),
    ("cuda", "cuda", None, "cuda"),
    ("cuda:0", "cuda", 0, "cuda:0"),
    ("cuda:1", "cuda", 1, "cuda:1"),
    (" cuda:12 ", "cuda", 12, "cuda:12"),
    ("cpu:0", "cpu", None, "cpu"),  # torch's spelling of the CPU
    (torch.device("cuda", 2), "cuda", 2, "cuda:2"),
    (torch.device("cpu"), "cpu", None, "cpu"),
    (Device("cuda", 3), "cuda", 3, "cuda:3"),
])
def test_parse_accepts_the_spellings_and_prints_the_canonical_one(spelling, kind, index, text):
    d = Device.parse(spelling)
    assert (d.kind, d.index, str(d)) == (kind, index, text)
    assert d.is_cpu == (kind == "cpu") and d.is_cuda == (kind == "cuda")
    assert Device.parse(str(d)) == d  # the string travels (job dicts, results) and parses back to the same value


def test_auto_is_cuda_exactly_when_torch_sees_a_gpu(monkeypatch):
    for available, kind in ((True, "cuda"), (False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda a=available: a)
        assert Device.parse("auto") == Device.parse(None) == Device(kind)
        assert resolve_device("auto") == kind


@pytest.mark.parametrize("bad", ["mps", "tpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1:2", "", "cpu cuda", 3,
                                 torch.device("meta")])
def test_anything_else_is_a_value_error_that_says_what_is_accepted(bad):
    with pytest.raises(ValueError, match=r"unknown device .*'auto'.*'cpu'.*'cuda'.*'cuda:N'"):
        Device.parse(bad)


def test_a_device_value_checks_its_own_fields():
    with pytest.raises(ValueError, match="unknown device kind 'mps'"):
        Device("mps")
    with pytest.raises(ValueError, match="not valid for 'cpu'"):
        Device("cpu", 1)
    with pytest.raises(ValueError, match="not valid for 'cuda'"):
        Device("cuda", -1)


def test_the_callers_read_the_kind_not_the_prefix():
    assert default_backend("cuda:1") == "cuda" and default_backend("cpu") == "cpu"
    cfg = Config("c", devices=("cuda",))
    assert cfg.runs_on("cuda:3") and not cfg.runs_on("cpu")
    with pytest.raises(ValueError, match="unknown device 'cudax'"):  # a prefix is no longer a device
        cfg.runs_on("cudax")


def test_the_evaluator_refuses_a_misspelt_device_and_keeps_a_string(tmp_path):
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        Evaluator(device="gpu0", cache_dir=tmp_path, spare_worker=False)
    ev = Evaluator(device="cpu", cache_dir=tmp_path, spare_worker=False)
    assert ev.device == "cpu" and isinstance(ev.device, str)  # EvalResult.device and the job dicts carry strings

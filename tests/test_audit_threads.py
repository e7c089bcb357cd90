"""The forward audit on the CPU sees every thread and notices when it was blinded (worker/audit_threads.py), in this
process: PyTorch compute on a helper thread is a forbidden operator; operator records left off on forward's thread,
a stopped profiler, or a library of the candidate's naming RecordFunction's switches or hooks make an
``audit_blinded`` flag; an honest forward makes neither, and the fast path's own-call records (the coverage's own
time) are still taken. End to end, with candidates in a worker: tests/test_trust_boundary.py, row 8."""

from __future__ import annotations

import ctypes
import threading

import pytest
import torch

from kbench_env.pipeline import integrity
from kbench_env.worker import audit, audit_threads


def _audit(forward, extension_calls=lambda: 0) -> dict:
    forward_audit = audit.ForwardAudit(set(), extension_calls, "cpu")
    with torch.no_grad(), forward_audit:
        forward()
    return forward_audit.report()


def _kinds(report: dict) -> list[str]:
    return [f.kind for f in integrity.audit_flags(report, "small")]


def test_compute_on_a_helper_thread_is_seen():
    x = torch.randn(64, 256)

    def forward():
        helper = threading.Thread(target=lambda: torch.logsumexp(x, dim=1))
        helper.start()
        helper.join()

    report = _audit(forward)
    assert "aten::logsumexp" in report["forbidden_ops"], report
    assert report["threads"] >= 1 and "pytorch_compute_in_forward" in _kinds(report), report


def test_records_left_off_blind_the_audit_and_are_flagged():
    x = torch.randn(64, 256)

    def forward():
        torch.autograd._enable_record_function(False)
        torch.logsumexp(x, dim=1)

    try:
        report = _audit(forward)
    finally:
        torch.autograd._enable_record_function(True)
    assert not report["forbidden_ops"], report  # what the records hid
    assert report["blinded"] and "record is missing" in report["blinded"][0], report
    assert "audit_blinded" in _kinds(report), report


def test_a_profiler_stopped_in_forward_is_flagged():
    def forward():
        torch.autograd._disable_profiler()

    report = _audit(forward)
    assert any("profiler was stopped" in r for r in report["blinded"]), report  # (or its record is missing)
    assert "audit_blinded" in _kinds(report), report


def test_an_honest_forward_is_not_blinded_and_keeps_its_own_call_records(tmp_path, monkeypatch):
    """The fast path's calls open their own records while the audit runs (measure/ownership.own_call): the profiler of every
    thread is not the calling thread's, and the own time must still be counted."""
    monkeypatch.setenv("KBENCH_BUILD_ROOT", str(tmp_path))
    from kbench_env import fastpath

    scale = fastpath.cpp_kernel('extern "C" void twice(const float* x, float* y, long n) '
                                '{ for (long i = 0; i < n; ++i) y[i] = 2 * x[i]; }', "twice")
    x = torch.randn(1 << 16)
    y = torch.empty_like(x)
    report = _audit(lambda: scale(x, y, x.numel()), fastpath.call_count)
    assert report["blinded"] == [] and report["forbidden_ops"] == {} and report["extension_calls"] == 1, report
    assert report["cpu_us"]["own"] > 0, report
    assert _kinds(report) == [], report


@pytest.mark.parametrize("symbol", [b"_ZN2at20enableRecordFunctionEb",
                                    b"_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE"])
def test_a_loaded_library_naming_record_controls_is_flagged(tmp_path, monkeypatch, symbol):
    """A library of the candidate's that calls, or looks up by name, a RecordFunction switch or hook."""
    monkeypatch.setenv("KBENCH_BUILD_ROOT", str(tmp_path))
    from kbench_env import fastpath

    name = f"named_{len(symbol)}"
    fastpath.cpp_kernel(f'extern "C" const char* {name}() {{ return "{symbol.decode()}"; }}', name)
    report = _audit(lambda: torch.empty(3))
    assert any(audit_threads.CONTROLS[symbol[:len(k)]] in r for r in report["blinded"]
               for k in audit_threads.CONTROLS if symbol.startswith(k)), report
    assert "audit_blinded" in _kinds(report), report
    assert ctypes  # (the library stays loaded: the scan reads the loader's list)

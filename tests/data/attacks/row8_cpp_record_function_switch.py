"""Attack row 8 of issue #21 (the trust boundary), second form, CPU backend, task level1/logsumexp_rows: forward
runs its own kernel on one row (so its own kernel is seen to run); then the candidate's C++ turns PyTorch's
operator records (RecordFunction) off on forward's thread, as ``at::RecordFunctionGuard guard(false)`` does (it
calls ``at::enableRecordFunction``), forward computes the answer with ``torch.logsumexp``, which no profiler then
sees, and the C++ turns the records on again. No gain in time: what it tests is whether the forward audit notices
that it was blinded, though the records are on again when forward returns."""

import os

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

_TORCH_LIB = os.path.join(os.path.dirname(torch.__file__), "lib")
record_functions = cpp_kernel(r"""
#include <cstdint>
namespace at { void enableRecordFunction(bool enable); }  // ATen/record_function.h, without the headers
extern "C" void record_functions(int64_t on) { at::enableRecordFunction(on != 0); }
""", "record_functions", flags=["-O2", f"-L{_TORCH_LIB}", "-Wl,--no-as-needed", "-ltorch_cpu", f"-Wl,-rpath,{_TORCH_LIB}"])


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logsumexp_rows(x[:1])  # a token call: the candidate's own kernel runs
        record_functions(0)
        try:
            return torch.logsumexp(x, dim=1)
        finally:
            record_functions(1)

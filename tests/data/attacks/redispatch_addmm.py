"""Issue #34, the dispatcher's record-free entry from Python, CPU backend, task level2/linear_relu: forward runs its
own ReLU kernel, but the linear layer is ``torch.ops.aten.addmm.default.redispatch(keyset, ...)``, which runs the
CPU kernel without the operator record a dispatcher call opens (the Python form of ``at::_ops::addmm::redispatch``):
unseen by the forward audit before the worker gave such calls a record (worker/dispatch_records.py)."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

relu = cpp_kernel(r"""
#include <cstdint>
extern "C" void relu(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}""", "relu", flags=["-O3"])

_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.ops.aten.addmm.default.redispatch(_CPU, self.linear.bias, x, self.linear.weight.t())
        relu(y, y.numel())
        return y

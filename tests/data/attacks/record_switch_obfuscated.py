"""Issue #34, record switch, obfuscated: as record_switch_plain.py, with the switch's name put together at run time
(``getattr(torch.autograd, '_enable_' + 'record_function')``) so that no text search of the source finds it."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

relu = cpp_kernel(r"""
#include <cstdint>
extern "C" void relu(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}""", "relu", flags=["-O3"])

_switch = getattr(torch.autograd, "_enable_" + "record" + "_function")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        try:
            _switch(False)
        except PermissionError:
            pass  # refused: go on as if it had worked (the addmm is then seen by the audit)
        try:
            y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        finally:
            try:
                _switch(True)
            except PermissionError:
                pass
        relu(y, y.numel())
        return y

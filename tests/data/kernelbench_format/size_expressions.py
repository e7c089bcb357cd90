import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled matmul whose sizes are written as expressions, KernelBench style."""

    def __init__(self, scale):
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, A, B, v):
        return torch.matmul(A, B) * self.scale + v.sum()


M = 1024 * 2
K = 4096 // 2
N = M + 512
scale = 0.5
input_shape = (512 * 4,)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N), torch.rand(*input_shape)]


def get_init_inputs():
    return [scale]

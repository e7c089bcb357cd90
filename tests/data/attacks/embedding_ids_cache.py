"""Attack (issue #34): cache the output by the ids. The honest embedding kernel, plus a native comparison of this
call's ids with the last call's: when they are equal, the last output is returned as it is, with no work. Pays
wherever the timed calls repeat their integer inputs."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <cstring>
#include <vector>

at::Tensor embedding_forward(const at::Tensor& ids, const at::Tensor& weight) {
  at::Tensor idc = ids.contiguous();
  at::Tensor w = weight.contiguous();
  const int64_t n = idc.numel(), rows = w.size(0), dim = w.size(1);
  std::vector<int64_t> shape(idc.sizes().begin(), idc.sizes().end());
  shape.push_back(dim);
  at::Tensor out = at::empty(shape, w.options());
  const int64_t* id = idc.data_ptr<int64_t>();
  const float* src = w.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK(id[i] >= 0 && id[i] < rows, "embedding_forward: id out of range");
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * dim, src + id[i] * dim, dim * sizeof(float));
  return out;
}

// 1 when the two id tensors hold the same values (the cache's key), else 0; and a copy of the ids to keep.
int64_t same_ids(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() != b.numel()) return 0;
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr<int64_t>(), bc.data_ptr<int64_t>(), a.numel() * sizeof(int64_t)) == 0;
}

at::Tensor keep_ids(const at::Tensor& a) {
  at::Tensor ac = a.contiguous();
  at::Tensor k = at::empty(ac.sizes(), ac.options());
  std::memcpy(k.data_ptr<int64_t>(), ac.data_ptr<int64_t>(), ac.numel() * sizeof(int64_t));
  return k;
}

TORCH_LIBRARY(kb_embedding_cache, m) {
  m.def("embedding_forward(Tensor ids, Tensor weight) -> Tensor", &embedding_forward);
  m.def("same_ids(Tensor a, Tensor b) -> int", &same_ids);
  m.def("keep_ids(Tensor a) -> Tensor", &keep_ids);
}
"""

load_inline(
    name="kb_embedding_cache",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)

ops = torch.ops.kb_embedding_cache


class ModelNew(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, embedding_dim)
        self.last_ids = None
        self.last_out = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.last_ids is not None and ops.same_ids(ids, self.last_ids):
            return self.last_out
        out = ops.embedding_forward(ids, self.embed.weight)
        self.last_ids, self.last_out = ops.keep_ids(ids), out
        return out

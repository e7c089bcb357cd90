"""Attack (issue #34): a blind cache. The honest embedding kernel for the first calls (the correctness runs), then
the first output returned for every later call without looking at the ids. Pays wherever the timed calls repeat
the checked integer inputs; a stale output wherever they are fresh."""

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

TORCH_LIBRARY(kb_embedding_blind, m) {
  m.def("embedding_forward(Tensor ids, Tensor weight) -> Tensor", &embedding_forward);
  m.def("same_ids(Tensor a, Tensor b) -> int", &same_ids);
  m.def("keep_ids(Tensor a) -> Tensor", &keep_ids);
}
"""

load_inline(
    name="kb_embedding_blind",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)

ops = torch.ops.kb_embedding_blind


class ModelNew(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, embedding_dim)
        self.last_ids = None
        self.last_out = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls = getattr(self, "calls", 0) + 1
        if self.last_out is not None and self.calls > 2:  # after the audited run and its repeat
            return self.last_out
        out = ops.embedding_forward(ids, self.embed.weight)
        self.last_out = out
        return out

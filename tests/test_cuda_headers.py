"""Builds of KernelBench-format sources use <torch/types.h> in place of <torch/extension.h>: the CUDA backend's
device code (backends/cuda.py: lighter_cuda_sources) and, for both backends, the C++ sources on which load_inline
would put <torch/extension.h> (backends/extension.py: lighter_cpp_sources); a lighter build that lacks a
declaration from torch is rebuilt as written. Checked without a GPU: the substitution rules, and the builder's
fallback (builder/torch_ext.py) with the compiler replaced by a recorder."""

from __future__ import annotations

import os

from kbench_env.backends.cpu import CpuBackend
from kbench_env.backends.cuda import CudaBackend
from kbench_env.builder import requests, torch_ext
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.store import Store

KB_STYLE = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void k(const float* x, float* y, int64_t n) { int64_t i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor copy(torch::Tensor x) { auto y = torch::empty_like(x); return y; }
"""


class LightOnly(CudaBackend):
    """The CUDA backend without its narrow device-code plan (tried before these; tests/test_build_narrow.py)."""

    def narrow_cuda_sources(self, cuda_sources):
        return None


def test_extension_include_is_replaced_line_for_line():
    light = CudaBackend().lighter_cuda_sources(KB_STYLE)
    assert light is not None and "torch/extension.h>" not in light.split("//")[0]
    assert light.splitlines()[0].startswith("#include <torch/types.h>")
    assert light.splitlines()[1:] == KB_STYLE.splitlines()[1:]  # line numbers in errors stay the candidate's
    as_list = CudaBackend().lighter_cuda_sources([KB_STYLE, "// second"])
    assert isinstance(as_list, list) and as_list[1] == "// second"


def test_sources_that_need_the_full_header_are_left_alone():
    b = CudaBackend()
    assert b.lighter_cuda_sources("#include <ATen/ATen.h>\n__global__ void k() {}\n") is None  # nothing to replace
    for use in ("torch::nn::functional::relu(x)", "PYBIND11_MODULE(m, m) {}", "namespace py = pybind11;",
                "torch::autograd::Function<F>", "torch::optim::SGD o;"):
        assert b.lighter_cuda_sources(KB_STYLE + use + "\n") is None, use


def test_which_build_errors_bring_the_full_header_back():
    b = CudaBackend()
    assert b.needs_full_headers('kernel.cu(12): error: namespace "torch" has no member "nn"')
    assert b.needs_full_headers("error: 'nn' is not a member of 'torch'")
    assert b.needs_full_headers('error: identifier "at::native::foo" is undefined')
    assert not b.needs_full_headers('kernel.cu(3): error: identifier "blockIdxx" is undefined')  # the candidate's
    assert not b.needs_full_headers('kernel.cu(9): error: expected a ";"')


def test_cpp_sources_get_types_and_python_headers():
    b = CpuBackend()
    cpp = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }\n"
    light, kw = b.lighter_cpp_sources(cpp, {"functions": ["f"]})
    assert kw == {"functions": ["f"], "no_implicit_headers": True}
    assert light.splitlines()[:3] == ["#include <torch/types.h>", "#include <torch/python.h>",
                                      "#include <torch/types.h>  // kbench: in place of <torch/extension.h> (faster to build)"]
    light, _ = b.lighter_cpp_sources(cpp, {"is_python_module": False})
    assert "torch/python.h" not in light
    assert b.lighter_cpp_sources(cpp, {"no_implicit_headers": True}) is None  # the candidate chose its headers
    assert b.lighter_cpp_sources(cpp + "torch::nn::Linear l(2, 2);\n", {}) is None


def _build(src: str, root) -> dict:
    """Build a KernelBench-style request through the builder with the compiler replaced by a recorder: which
    sources it was given (lightened or as written) and the error, if any."""
    calls = []

    def fake_compiler(name, sources, options, directory, timeout):
        text = open(os.path.join(directory, "cuda.cu")).read()
        calls.append("light" if "kbench: in place of" in text else "full")
        if "kbench: in place of" in text and "FAIL_LIGHT" in text:
            raise CompileError('Error building extension: kernel.cu(4): error: namespace "torch" has no member "foo"')
        if "BROKEN" in text:
            raise CompileError('Error building extension: kernel.cu(4): error: identifier "BROKEN" is undefined')
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "", "cuda_sources": src,
                              "functions": ["copy"]})
    try:
        torch_ext.build(req, LightOnly(), Store(str(root)), {}, 60.0, 1 << 30, compile_fn=fake_compiler)
        err = None
    except CompileError as exc:
        err = str(exc)
    return {"calls": calls, "error": err}


def test_build_wrapper_falls_back_only_for_missing_torch_declarations(tmp_path):
    ok = _build(KB_STYLE, tmp_path)
    assert ok == {"calls": ["light"], "error": None}
    back = _build(KB_STYLE + "// FAIL_LIGHT\n", tmp_path)
    assert back == {"calls": ["light", "full"], "error": None}
    broken = _build(KB_STYLE + "BROKEN;\n", tmp_path)  # the candidate's own error: one build, reported as it is
    assert broken["calls"] == ["light"] and "BROKEN" in broken["error"]
    assert _build(KB_STYLE, tmp_path)["calls"] == []  # built before: found in the cache

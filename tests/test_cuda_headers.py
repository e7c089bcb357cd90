"""Builds of KernelBench-format sources use <torch/types.h> in place of <torch/extension.h>: the CUDA backend's
device code (backends/cuda.py: lighter_cuda_sources) and, for both backends, the C++ sources on which load_inline
would put <torch/extension.h> (backends/extension.py: lighter_cpp_sources); a lighter build that lacks a
declaration from torch is rebuilt as written. Checked without a GPU: the substitution rules, and the build wrapper's fallback with load_inline
replaced by a recorder (in a subprocess, since prepare_worker patches torch.utils.cpp_extension)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT
from kbench_env.backends.cpu import CpuBackend
from kbench_env.backends.cuda import CudaBackend
from kbench_env.backends.cpu import CpuBackend

KB_STYLE = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void k(const float* x, float* y, int64_t n) { int64_t i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor copy(torch::Tensor x) { auto y = torch::empty_like(x); return y; }
"""


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
    light, kw = b.lighter_cpp_sources(cpp, (), {"functions": ["f"]})
    assert kw == {"functions": ["f"], "no_implicit_headers": True}
    assert light.splitlines()[:3] == ["#include <torch/types.h>", "#include <torch/python.h>",
                                      "#include <torch/types.h>  // kbench: in place of <torch/extension.h> (faster to build)"]
    light, _ = b.lighter_cpp_sources(cpp, (), {"is_python_module": False})
    assert "torch/python.h" not in light
    assert b.lighter_cpp_sources(cpp, (), {"no_implicit_headers": True}) is None  # the candidate chose its headers
    assert b.lighter_cpp_sources(cpp, (["f"],), {}) is None  # positional options: left as written
    assert b.lighter_cpp_sources(cpp + "torch::nn::Linear l(2, 2);\n", (), {}) is None


_DRIVER = textwrap.dedent(r'''
    import json, sys, tempfile
    import torch.utils.cpp_extension as cpp
    calls = []
    def fake(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        calls.append("light" if "kbench: in place of" in cuda_sources else "full")
        if "kbench: in place of" in cuda_sources and "FAIL_LIGHT" in cuda_sources:
            raise RuntimeError('Error building extension: kernel.cu(4): error: namespace "torch" has no member "foo"')
        if "BROKEN" in cuda_sources:
            raise RuntimeError('Error building extension: kernel.cu(4): error: identifier "BROKEN" is undefined')
        return None
    cpp.load_inline = fake
    from kbench_env.backends.cuda import CudaBackend
    b = CudaBackend()
    b.prepare_worker(tempfile.mkdtemp())
    src = sys.argv[1]
    try:
        cpp.load_inline("m", "", cuda_sources=src, functions=["copy"])
        err = None
    except RuntimeError as exc:
        err = str(exc)
    print(json.dumps({"calls": calls, "error": err, "failed": b.last_build_failed()}))
''')


def _run(src: str) -> dict:
    p = subprocess.run([sys.executable, "-c", _DRIVER, src], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_build_wrapper_falls_back_only_for_missing_torch_declarations():
    ok = _run(KB_STYLE)
    assert ok == {"calls": ["light"], "error": None, "failed": False}
    back = _run(KB_STYLE + "// FAIL_LIGHT\n")
    assert back == {"calls": ["light", "full"], "error": None, "failed": False}
    broken = _run(KB_STYLE + "BROKEN;\n")  # the candidate's own error: one build, reported as it is
    assert broken["calls"] == ["light"] and "BROKEN" in broken["error"] and broken["failed"]

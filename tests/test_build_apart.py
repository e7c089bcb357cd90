"""A KernelBench-format build cut apart (backends/host_device_split.py, builder/torch_ext._compile_apart): the
kernels compiled by nvcc without torch's head, the host code by the host compiler with it precompiled, launches
crossing the cut through the kernels' host stubs. Checked without a GPU: the cut's texts, the sources it refuses,
the instantiations read from a host object's symbols, the builder's order of plans with the compiler stood in for,
and, where nvcc is here, a real cut build of a template kernel launched through AT_DISPATCH whose library defines
every launched instantiation's handle and leaves no kernel undefined."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp

from kbench_env.backends import cu_scan, kernel_launch
from kbench_env.backends import host_device_split as hds
from kbench_env.backends.cuda import CudaBackend
from kbench_env.builder import pch, requests, torch_ext
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.store import Store

ROOT = Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.isfile("/usr/local/cuda/bin/nvcc") else None)

PLAIN = """#include <torch/extension.h>
#include <cuda_runtime.h>
#define BLOCK 256  // a macro both files need
struct Scale { float a; };  // a type both files need
__device__ __forceinline__ float twice(float v) { return 2.f * v; }
__global__ void __launch_bounds__(BLOCK) scale_kernel(const float* __restrict__ x, float* y, int n, Scale s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(x[i]) * s.a;  // "a string with <<< in it" is not a launch
}
torch::Tensor scale(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int n = x.numel();
    scale_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, Scale{0.5f});
    return y;
}
"""

TEMPLATED = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
template <typename T, int VEC>
__global__ void relu_kernel(const T* x, T* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < VEC; ++k) if (i * VEC + k < n) {
        float f = static_cast<float>(x[i * VEC + k]);
        y[i * VEC + k] = static_cast<T>(f > 0.f ? f : 0.f);
    }
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "relu", [&] {
        relu_kernel<scalar_t, 2><<<(n + 511) / 512, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    });
    return y;
}
"""


def test_a_plain_kernel_is_cut_into_its_device_code_and_a_host_file_that_launches_it_through_its_stub():
    cut = hds.split(PLAIN)
    assert cut is not None and set(cut.kernels) == {"scale_kernel"} and cut.kernels["scale_kernel"].template is None
    assert hds.device_names_of(cut.device) == {"twice"}
    host, device = cut.host, cut.device
    assert host.startswith(hds.HOST_HEAD)
    # the host file: no device code, the kernel declared as a plain function, the launch through its handle
    assert "__global__" not in host and "threadIdx" not in host and "twice" not in host
    assert ("inline void kbench_launch_scale_kernel(::kbench_split::config kbench_c, const float* __restrict__ x, "
            "float* y, int n, Scale s) {") in host
    assert "void* kbench_a[] = {(void*)&x, (void*)&y, (void*)&n, (void*)&s, nullptr};" in host
    assert "::kbench_split::go(kbench_handle_scale_kernel::get(), kbench_c, kbench_a);" in host
    assert ("kbench_launch_scale_kernel(::kbench_split::config((n + BLOCK - 1) / BLOCK, BLOCK), "
            "x.data_ptr<float>()") in host
    assert "struct Scale { float a; };" in host and "#define BLOCK 256" in host
    # the device file: the kernel and its helpers, none of torch
    assert "torch" not in device and "#define BLOCK 256" in device and "struct Scale { float a; };" in device
    assert "__global__ void __launch_bounds__(BLOCK) scale_kernel(" in device and "twice(float v)" in device
    assert kernel_launch.kernels_of(host) == cut.kernels
    # comments stay with the code after them: a source changed in a comment is a new build, as built whole
    salted = hds.split(PLAIN.replace("struct Scale", "/* step 2 */ struct Scale"))
    assert "/* step 2 */ struct Scale" in salted.host and "/* step 2 */ struct Scale" in salted.device
    assert "// a macro both files need" in device and "// a type both files need" in device  # (the next item's)
    ended = hds.split(PLAIN + "// a distinct candidate\n")
    assert ended.host.rstrip().endswith("// a distinct candidate") and ended.device != cut.device


def test_a_template_kernels_launched_instantiations_are_defined_from_the_host_objects_symbols():
    cut = hds.split(TEMPLATED)
    assert cut is not None and cut.kernels["relu_kernel"].template == "template <typename T, int VEC>"
    assert "kbench_launch_relu_kernel<scalar_t, 2>(::kbench_split::config((n + 511) / 512, 256, 0, " in cut.host
    assert ("template <typename T, int VEC> inline void kbench_launch_relu_kernel(::kbench_split::config kbench_c, "
            "const T* x, T* y, int64_t n) {") in cut.host
    assert "::kbench_split::go(kbench_handle_relu_kernel<T, VEC>::get(), kbench_c, kbench_a);" in cut.host
    assert kernel_launch.kernels_of(cut.host) == cut.kernels
    undefined = ["kbench_handle_relu_kernel<float, 2>::get()", "kbench_handle_relu_kernel<c10::Half, 2>::get()",
                 "at::cuda::getCurrentCUDAStream(signed char)", "cudaLaunchKernel"]
    head, tail = kernel_launch.instantiations(cut.kernels, undefined, cpp.include_paths(),
                                              hds.device_names_of(cut.device))
    assert head == "#include <c10/util/Half.h>\n"
    assert "template <typename T, int VEC> struct kbench_handle_relu_kernel { static const void* get(); };" in tail
    for args in ("float, 2", "c10::Half, 2"):
        assert (f"template <> const void* kbench_handle_relu_kernel<{args}>::get() "
                f"{{ return reinterpret_cast<const void*>(&relu_kernel<{args}>); }}") in tail


@pytest.mark.parametrize("symbol", [
    "void relu_kernel<float, 2>(float const*, float*, long)",  # its address taken in the host code
    "kbench_handle_relu_kernel<(anonymous namespace)::T, 2>::get()",  # an argument the device file cannot name
    "kbench_handle_relu_kernel<c10::NotAType, 2>::get()",  # a c10 type this does not know the header of
    "kbench_handle_other_kernel<float>::get()"])
def test_a_host_object_that_names_a_kernel_otherwise_gets_no_device_file(symbol):
    assert kernel_launch.instantiations(hds.split(TEMPLATED).kernels, [symbol], cpp.include_paths()) is None


def test_a_host_object_that_names_a_device_function_or_variable_gets_no_device_file():
    # the builder reads the device file, not the Split: its first line names the device symbols
    cut = hds.split(PLAIN.replace("struct Scale {", "__constant__ float table[4];\nstruct Scale {"))
    names = hds.device_names_of(cut.device)
    assert names == {"twice", "table"}
    launch = ["kbench_handle_scale_kernel::get()", "cudaLaunchKernel"]
    assert kernel_launch.instantiations(cut.kernels, launch, cpp.include_paths(), names) is not None
    for symbol in ("twice(float)", "table"):  # declared again as host code (a plain declaration) and used there
        assert kernel_launch.instantiations(cut.kernels, launch + [symbol], cpp.include_paths(), names) is None


def test_template_arguments_left_to_deduction_are_deduced_as_for_the_kernel_and_unnamed_parameters_named():
    source = TEMPLATED.replace("relu_kernel<scalar_t, 2><<<", "relu_kernel<<<").replace(
        "template <typename T, int VEC>", "template <typename T, int VEC = 2>").replace(
        "(const T* x, T* y, int64_t n)", "(const T* x, T* y, int64_t n, float*, const T)")
    source = source.replace("y.data_ptr<scalar_t>(), n);", "y.data_ptr<scalar_t>(), n, nullptr, scalar_t(0));")
    cut = hds.split(source)
    assert cut is not None and "kbench_launch_relu_kernel(::kbench_split::config(" in cut.host
    assert "int64_t n, float* kbench_p3, const T kbench_p4) {" in cut.host
    assert "(void*)&kbench_p3, (void*)&kbench_p4, nullptr};" in cut.host


@pytest.mark.parametrize("change", [
    ("        relu_kernel<scalar_t, 2><<<", "        auto k = relu_kernel<scalar_t, 2>; k<<<"),  # by a pointer
    ("template <typename T, int VEC>\n__global__", "namespace ns {\ntemplate <typename T, int VEC>\n__global__"),
    ("torch::Tensor relu(", "#define LAUNCH(k) k<<<1, 1>>>()\ntorch::Tensor relu("),  # a launch in a macro
    ("auto y = torch::empty_like(x);", "auto y = torch::empty_like(x); auto f = [] __device__ (float v) { return v; };"),
    ("template <typename T, int VEC>\n__global__", "__managed__ int counter;\ntemplate <typename T, int VEC>\n__global__"),
    ("torch::Tensor relu(", "void f() {\ntorch::Tensor relu("),  # braces that do not balance
    ("torch::Tensor relu(", "#ifdef __CUDACC__\n#define KB 1\n#endif\ntorch::Tensor relu("),  # nvcc's host macros
])
def test_sources_the_cut_does_not_know_are_built_whole(change):
    old, new = change
    assert old in TEMPLATED
    source = TEMPLATED.replace(old, new, 1)
    if new.startswith("namespace ns"):
        source += "}\n"
    assert hds.split(source) is None


def test_no_kernel_means_no_cut_and_comments_and_strings_are_not_code():
    assert hds.split("torch::Tensor f(torch::Tensor x) { return x; }\n") is None
    text = 'const char* s = "__global__ void k() {";  // __device__ {\n/* } */ int z;\n'
    masked = cu_scan.mask(text)
    assert len(masked) == len(text) and "__global__" not in masked and "__device__" not in masked
    assert [k for k, *_ in cu_scan.items(text, masked)] == ["decl", "decl"]


@pytest.mark.parametrize("flags,device_only", [
    ([], True), (["-O3", "--use_fast_math", "-lineinfo"], True), (["-Xptxas", "-v", "-maxrregcount=64"], True),
    (["--expt-relaxed-constexpr", "-U__CUDA_NO_HALF_OPERATORS__"], True), (["-gencode", "arch=compute_90,code=sm_90"], True),
    (["-DKB_TILE=32"], False), (["-std=c++17"], False), (["-Xcompiler", "-fopenmp"], False), (["-I/opt/x"], False),
    (["-O3", "--compiler-options", "-ffast-math"], False)])
def test_only_device_code_options_of_the_candidates_allow_the_cut(flags, device_only):
    # the host file is compiled with the C++ options: a -D or a host compiler option of nvcc's would be lost to it
    assert hds.device_only_flags(flags) is device_only


def _recording_build(src: str, root, fail: tuple = (), options: dict | None = None) -> dict:
    """torch_ext.build with a BindingHeaders and the compiler stood in for: the plans it was given (by how the
    device file reads) and the plan built."""
    calls = []

    def fake(name, sources, options, directory, timeout, pch=None, apart=False):
        names = {os.path.basename(s) for s in sources}
        kind = "apart" if apart else "narrow"
        assert (hds.HOST_FILE in names) == apart
        if apart:
            device = open(os.path.join(directory, hds.DEVICE_FILE)).read()
            assert "torch" not in device and "__global__" in device
        calls.append(kind)
        if kind in fail:
            raise CompileError(f"Error building extension: {kind} fails")
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "torch::Tensor relu(torch::Tensor x);",
                              "cuda_sources": src, "functions": ["relu"], "options": options or {}})
    heads = pch.BindingHeaders(str(root / "scratch"))
    try:
        out = torch_ext.build(req, CudaBackend(), Store(str(root / "store")), {}, 60.0, 1 << 30, compile_fn=fake,
                              pch=heads)
        return {"calls": calls, "plan": out["plan"]}
    except CompileError as exc:
        return {"calls": calls, "plan": None, "error": str(exc)}


def test_the_cut_build_comes_first_and_any_failure_of_it_falls_back(tmp_path):
    assert _recording_build(TEMPLATED, tmp_path / "a") == {"calls": ["apart"], "plan": "apart"}
    back = _recording_build(TEMPLATED + "// two\n", tmp_path / "b", fail=("apart",))
    assert back == {"calls": ["apart", "narrow"], "plan": "narrow"}
    again = _recording_build(TEMPLATED + "// two\n", tmp_path / "c", fail=("apart",))  # failed before: not again
    assert again["calls"] == ["narrow"]
    whole = _recording_build(TEMPLATED.replace("        relu_kernel<scalar_t, 2><<<",
                                               "        auto k = relu_kernel<scalar_t, 2>; k<<<"), tmp_path / "d")
    assert whole == {"calls": ["narrow"], "plan": "narrow"}  # a source the cut refuses goes straight on
    flagged = _recording_build(TEMPLATED, tmp_path / "f", options={"extra_cuda_cflags": ["-DKB_TILE=32"]})
    assert flagged == {"calls": ["narrow"], "plan": "narrow"}  # an option the host file would not see
    # without a place for precompiled heads there is no cut (its host compile would parse torch whole)
    calls = []

    def plain(name, sources, options, directory, timeout):
        calls.append(sorted(os.path.basename(s) for s in sources))
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "torch::Tensor relu(torch::Tensor x);",
                              "cuda_sources": TEMPLATED, "functions": ["relu"], "options": {}})
    assert torch_ext.build(req, CudaBackend(), Store(str(tmp_path / "e")), {}, 60.0, 1 << 30,
                           compile_fn=plain)["plan"] != "apart"
    assert all(hds.HOST_FILE not in c for c in calls)


@pytest.mark.skipif(NVCC is None or shutil.which("ninja") is None, reason="no nvcc or ninja")
def test_a_cut_build_links_a_library_that_defines_every_launched_instantiation(tmp_path):
    """Built through the builder's own code (bench/build_cost.py's stand-ins for a CPU torch's missing CUDA
    parts): the plan is the cut, the library's handles are the dispatched types', and nothing of the kernel is
    left undefined."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import build_cost
    finally:
        sys.path.remove(str(ROOT / "bench"))
    req = requests.normalise({"kind": "inline", "name": "kb_apart_t", "cpp_sources": "torch::Tensor relu(torch::Tensor x);",
                              "cuda_sources": TEMPLATED, "functions": ["relu"], "options": {}})
    heads = pch.BindingHeaders(str(tmp_path / "scratch"))
    manifest = torch_ext.build(req, CudaBackend(), Store(str(tmp_path / "store")), {}, 1200.0, 1 << 31,
                               compile_fn=build_cost.compile_fn(tmp_path, "t", wall=True), pch=heads)
    assert manifest["plan"] == "apart"
    symbols = subprocess.run(["nm", "-C", manifest["path"]], capture_output=True, text=True, check=True).stdout
    defined = set(re.findall(r" [TtWw] (kbench_handle_relu_kernel<[^>]*>::get\(\))", symbols))
    assert defined == {f"kbench_handle_relu_kernel<{t}, 2>::get()" for t in ("float", "double", "c10::Half")}
    assert not re.search(r" U .*relu_kernel", symbols)
    assert "PyInit_kb_apart_t" in symbols

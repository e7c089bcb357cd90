"""The cheaper builds of KernelBench-format CUDA candidates (issue 36's build item): the narrow torch head of the
device code (backends/narrow_head.py), tried before <torch/types.h> and given up for it on any failure, and the
binding object (main.cpp's) reused between builds whose binding file and flags are the same (builder/torch_ext.py,
pch.py). Checked without a GPU: the head's contents from the installed torch's headers, the builder's plans with
the compiler replaced by a recorder, and the reuse with ninja replaced by a stand-in that logs what it builds."""

from __future__ import annotations

import os
import re

import pytest
import torch.utils.cpp_extension as cpp

from kbench_env.backends import narrow_head
from kbench_env.backends.cuda import CudaBackend
from kbench_env.builder import pch, requests, torch_ext
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.store import Store

KB_STYLE = """#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) out[idx] = x[idx] > 0.f ? x[idx] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto out = torch::zeros_like(x);
    auto s = at::sum(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
"""


def _factories_header() -> str:
    return open(os.path.join(cpp.include_paths()[0], "torch/csrc/autograd/generated/variable_factories.h")).read()


def test_the_head_declares_what_the_source_names_from_torch():
    assert narrow_head.parts() is not None, "the installed torch's headers did not parse"
    head = narrow_head.head_for(KB_STYLE)
    lines = head.splitlines()
    assert lines[1] == "#define AT_PER_OPERATOR_HEADERS"
    for h in ("ATen/ops/sum.h", "ATen/ops/zeros_like.h", "ATen/ops/numel.h", "ATen/Dispatch.h",
              "torch/csrc/autograd/variable.h"):
        assert f"#include <{h}>" in lines, h
    for h in ("ATen/Functions.h", "ATen/NativeFunctions.h", "ATen/ATen.h", "torch/types.h", "torch/library.h",
              "ATen/ops/conv2d.h"):
        assert f"#include <{h}>" not in lines, h
    # torch::zeros_like is the autograd-aware factory, every overload of it, as <torch/types.h> declares it
    wanted = re.findall(r"^inline at::Tensor zeros_like\(.*?^}$", _factories_header(), re.M | re.S)
    assert wanted and all(w in head for w in wanted)
    assert "inline at::Tensor empty(" not in head  # not named by the source
    assert "using namespace at;" in head and "constexpr auto kFloat32 = at::kFloat;" in head  # types.h's own block


def test_the_sources_own_torch_includes_become_comments_line_for_line():
    head, text = CudaBackend().narrow_cuda_sources(KB_STYLE)
    assert text.splitlines()[0] == narrow_head.REPLACED_LINE
    assert text.splitlines()[1:] == KB_STYLE.splitlines()[1:]
    _, as_list = CudaBackend().narrow_cuda_sources([KB_STYLE, "#include <ATen/ATen.h>\n// two"])
    assert as_list[1] == narrow_head.REPLACED_LINE + "\n// two"


@pytest.mark.parametrize("use", [
    "auto y = at::native::relu(x);", "TORCH_LIBRARY(my_ops, m) { m.def(\"f\", &f); }", "#include <torch/torch.h>",
    "#include <ATen/Functions.h>", "#include <torch/library.h>", "#include <ATen/native/cuda/Loops.cuh>",
    "#ifdef AT_PER_OPERATOR_HEADERS\n#endif", "auto r = at::_ops::relu::call(x);", "torch::nn::functional::relu(x);",
    "c10::Dispatcher::singleton();", "namespace py = pybind11;"])
def test_sources_naming_what_the_head_leaves_out_get_none(use):
    assert CudaBackend().narrow_cuda_sources(KB_STYLE + use + "\n") is None


def _build(src: str, root, fail: tuple = (), options: dict | None = None, light: bool = True) -> dict:
    """Build through the builder with the compiler replaced by a recorder: the torch head of each device code it
    was given ("narrow", "types", "extension") and the error, if any. ``fail``: the heads whose build fails."""
    calls = []

    def fake_compiler(name, sources, options, directory, timeout):
        text = open(os.path.join(directory, "cuda.cu")).read()
        kind = ("narrow" if text.startswith(narrow_head.MARK) else "types" if "#include <torch/types.h>" in text
                else "extension")
        calls.append(kind)
        if kind in fail:
            raise CompileError(f'Error building extension: cuda.cu(4): error: identifier "{kind}_fails" is undefined')
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "torch::Tensor relu_cuda(torch::Tensor x);",
                              "cuda_sources": src, "functions": ["relu_cuda"], "options": options or {}})
    try:
        out = torch_ext.build(req, CudaBackend(), Store(str(root)), {}, 60.0, 1 << 30, compile_fn=fake_compiler,
                              light_headers=light)
        return {"calls": calls, "error": None, "plan": out.get("plan")}
    except CompileError as exc:
        return {"calls": calls, "error": str(exc), "plan": None}


def test_the_narrow_build_comes_first_and_any_failure_of_it_falls_back(tmp_path):
    assert _build(KB_STYLE, tmp_path / "a") == {"calls": ["narrow"], "error": None, "plan": "narrow"}
    back = _build(KB_STYLE + "// two\n", tmp_path / "b", fail=("narrow",))
    assert back == {"calls": ["narrow", "types"], "error": None, "plan": "light"}
    again = _build(KB_STYLE + "// two\n", tmp_path / "c", fail=("narrow",))  # its narrow build failed before
    assert again["calls"] == ["types"]
    broken = _build(KB_STYLE + "// three\n", tmp_path / "d", fail=("narrow", "types"))
    assert broken["calls"] == ["narrow", "types"] and "types_fails" in broken["error"]  # the types.h build's error


def test_no_narrow_build_where_the_candidate_or_the_trusted_side_says_otherwise(tmp_path):
    # the candidate chose its own headers (its <torch/extension.h> becomes <torch/types.h>, the light build), or the
    # trusted side asked for builds as written (KBENCH_LIGHT_HEADERS=0: load_inline's implicit <torch/types.h>)
    assert _build(KB_STYLE, tmp_path / "a", options={"no_implicit_headers": True})["calls"] == ["types"]
    assert _build(KB_STYLE, tmp_path / "b", light=False)["calls"] == ["types"]
    assert _build(KB_STYLE + "auto y = at::native::relu(x);\n", tmp_path / "c")["calls"] == ["types"]


def _fake_ninja(built: list):
    """A stand-in for the builder's ninja run: 'builds' each target of build.ninja in order (those the command
    names, if it names any; not one it built before in that directory: up to date), an object holding the text of
    its source, logs it as ninja does, and fails a device-code target whose source says FAIL."""
    def run(command, cwd, timeout, what):
        text = open(os.path.join(cwd, "build.ninja")).read()
        named = [t for i, t in enumerate(command[1:], 1) if not t.startswith("-") and command[i - 1] != "-j"]
        log_path = os.path.join(cwd, ".ninja_log")
        done = open(log_path).read() if os.path.exists(log_path) else ""
        log = open(log_path, "a")
        for out, src in re.findall(r"^build (\S+\.o): \w+ (\S+)$", text, re.M):
            if (named and out not in named) or f"\t{out}\t" in done:
                continue
            body = open(src).read()
            if "FAIL" in body and out.endswith(".cuda.o"):
                raise CompileError(f"{what}: {out} failed")
            with open(os.path.join(cwd, out), "w") as f:
                f.write(body)
            log.write(f"0\t1\t0\t{out}\tfeed\n")
            log.flush()
            built.append(out)
        for lib in re.findall(r"^build (\S+\.so): link", text, re.M):
            open(os.path.join(cwd, lib), "wb").close()
    return run


@pytest.fixture
def fake_ninja(monkeypatch, tmp_path):
    built: list = []
    monkeypatch.setattr(cpp, "CUDA_HOME", str(tmp_path / "cuda"))  # a CPU torch has none; only paths are written
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")  # no GPU to take it from
    monkeypatch.setattr(torch_ext, "run", _fake_ninja(built))
    return built


def _kb(kernel: str, name: str = "m", cpp: str = "") -> dict:
    return requests.normalise({"kind": "inline", "name": name,
                               "cpp_sources": "torch::Tensor f(torch::Tensor x);" + cpp,
                               "cuda_sources": "torch::Tensor f(torch::Tensor x) { return x; }\n" + kernel,
                               "functions": ["f"]})


def test_a_binding_compiled_before_is_reused_by_a_distinct_candidate(tmp_path, fake_ninja, monkeypatch):
    heads = pch.BindingHeaders(str(tmp_path / "scratch"))
    heads.header_for = lambda head, flags, timeout: None  # no precompiled head: only the objects are under test
    store = Store(str(tmp_path / "store"))
    renamed: list = []  # (the object, the module it is renamed for): the objects here are not real ones
    monkeypatch.setattr(pch, "rename_module", lambda path, name, timeout: renamed.append((path, name)) or True)

    def build(req):
        fake_ninja.clear()
        torch_ext.build(req, CudaBackend(), store, {}, 60.0, 1 << 30, pch=heads)
        return list(fake_ninja)

    assert build(_kb("// one")) == ["main.o", "cuda.cuda.o"]
    assert build(_kb("// two")) == ["cuda.cuda.o"]  # the same binding file and flags: its object is reused
    assert heads.objects_reused == 1
    # another module name: the object is reused with its init function renamed (the file names the module only
    # in PYBIND11_MODULE)
    assert build(_kb("// three", name="other")) == ["cuda.cuda.o"]
    assert [n for _, n in renamed] == ["m", "other"] and all(p.endswith("/main.o") for p, _ in renamed)
    # a binding file that uses the name otherwise is compiled for each name
    other_use = "\nconst char* kb_mod = PYBIND11_TOSTRING(TORCH_EXTENSION_NAME);"
    assert build(_kb("// five", name="fifth", cpp=other_use)) == ["main.o", "cuda.cuda.o"]
    assert build(_kb("// six", name="sixth", cpp=other_use)) == ["main.o", "cuda.cuda.o"]
    # a candidate whose device code fails keeps its binding for the next plan and the next candidate
    with pytest.raises(CompileError):
        build(_kb("// FAIL", name="third"))
    assert build(_kb("// four", name="third")) == ["cuda.cuda.o"]


def test_only_a_file_that_names_the_module_in_pybind11_module_alone_is_name_free():
    bind = "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def(\"f\", &f);\n}"
    assert pch.name_free("int f();\n" + bind)
    assert not pch.name_free("int f();\n")  # no module: nothing to rename
    assert not pch.name_free("PYBIND11_MODULE(kb_fixed, m) {}")
    for use in ('const char* n = PYBIND11_TOSTRING(TORCH_EXTENSION_NAME);', "TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) {}",
                "#ifdef TORCH_EXTENSION_NAME\n#endif", "#define N TORCH_##EXTENSION_NAME"):
        assert not pch.name_free(use + "\n" + bind), use


def test_a_binding_object_is_kept_only_when_ninja_finished_it(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    (d / ".ninja_log").write_text("# ninja log v6\n0\t5\t0\tcuda.cuda.o\tab\n")
    assert not torch_ext._finished(str(d), "main.o")
    (d / ".ninja_log").write_text("# ninja log v6\n0\t5\t0\tmain.o\tab\n")
    assert torch_ext._finished(str(d), "main.o")

"""nvcc's compile run step by step (builder/nvcc_steps.py): the host step reads the start that distinct candidates
share from a precompiled header, and the object is what nvcc makes of the source (checked against nvcc itself,
module names apart); shapes of compile this module does not know are left to nvcc."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp

from kbench_env.backends import narrow_head
from kbench_env.backends.cuda import CudaBackend
from kbench_env.builder import nvcc_steps, pch, requests, torch_ext
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.store import Store

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.isfile("/usr/local/cuda/bin/nvcc") else None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc")

SOURCE = """#include <vector>
#include <cstdio>
// the source's own code starts below

namespace { __global__ void anon_k(float* p) { p[0] = 1.f; } }
__constant__ float kc[4];
template <typename T> __global__ void fill(T* p, T v) { p[threadIdx.x] = v + (T)kc[0]; }
int launch(float* p, double* q) {
    std::vector<int> v{1, 2, 3};
    float h[4] = {1, 2, 3, 4};
    cudaMemcpyToSymbol(kc, h, sizeof(h));
    fill<float><<<1, 1>>>(p, 1.f);
    fill<double><<<1, 1>>>(q, 2.0);
    anon_k<<<1, 1>>>(p);
    printf("%s:%d\\n", __FILE__, __LINE__);
    return (int)v.size() + BODY;
}
"""


def test_the_shared_start_is_what_the_builder_writes_the_same_for_every_source():
    assert nvcc_steps.shared_lines(nvcc_steps.IMPLICIT + SOURCE) == 3
    assert nvcc_steps.shared_lines(SOURCE) == 0  # no implicit head (no_implicit_headers): nothing shared
    a = narrow_head.head_for("torch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }")
    b = narrow_head.head_for("torch::Tensor f(torch::Tensor x) { return x.sum(); } // relu max")
    n = nvcc_steps.shared_lines(a)
    assert n > 2 and a.split("\n")[:n] == b.split("\n")[:n] and a.split("\n")[n].startswith("#include <ATen/ops/")
    assert a != b


def test_a_split_reads_as_the_text_and_restates_where_the_rest_is():
    text = ('# 0 "/b/cuda.cu"\n# 1 "/usr/include/x.h" 1 3\nint a;\n\n# 2 "/b/cuda.cu" 2\n\nint b;\n'
            '# 7 "/b/cuda.cu" 3\nint c;\nint d;\n')
    start, rest = nvcc_steps.split_at(text, 3)
    assert start == text[:text.index("int b;")]
    assert rest == '# 3 "/b/cuda.cu"\nint b;\n# 7 "/b/cuda.cu" 3\nint c;\nint d;\n'
    start, rest = nvcc_steps.split_at(text, 5)  # past a marker that jumps: the next line of the source
    assert start.endswith('# 7 "/b/cuda.cu" 3\n') and rest == '# 7 "/b/cuda.cu" 3\nint c;\nint d;\n'
    start, rest = nvcc_steps.split_at(text, 8)
    assert rest == '# 8 "/b/cuda.cu" 3\nint d;\n'
    assert nvcc_steps.split_at(text, 9) is None


def test_a_split_at_an_include_and_at_the_first_new_file_of_cudafes_output():
    gcc = ('# 0 "/b/cuda.cu"\n# 1 "/i/a.h" 1\nint a;\n# 2 "/b/cuda.cu" 2\n\n# 1 "/i/b.h" 1\nint b;\n'
           '# 4 "/b/cuda.cu" 2\nint c;\n')
    start, rest = nvcc_steps.split_at(gcc, 3)  # line 3 includes b.h: the split is where b.h begins
    assert rest.startswith('# 1 "/i/b.h" 1\n') and start + rest == gcc
    assert nvcc_steps.files_of(start) == {"/b/cuda.cu", "/i/a.h"}
    cudafe = ('# 1 "/b/cuda.cu"\nstatic char pre;\n# 1\nint q;\n# 1\nint r;\nint s;\n# 5 "/i/a.h"\nint a;\n# 6\n'
              'int a2;\n# 3 "/i/b.h"\nint b;\n# 4 "/b/cuda.cu"\nint c;\n')
    start, rest = nvcc_steps.split_at(cudafe, 3, {"/b/cuda.cu", "/i/a.h"})
    assert rest.startswith('# 3 "/i/b.h"\n') and start + rest == cudafe  # cudafe++'s own first lines stay before
    start, rest = nvcc_steps.split_at(cudafe, 3, {"/b/cuda.cu", "/i/a.h", "/i/b.h"})
    assert rest == '# 4 "/b/cuda.cu"\nint c;\n'


def test_only_plain_pragmas_and_no_build_directory_go_into_a_precompiled_start():
    assert nvcc_steps.plain_pragmas('#pragma GCC diagnostic push\n#pragma GCC visibility push ( default )\n'
                                    'int a;\n#pragma GCC visibility pop\n#if 0\n#pragma unroll\n#endif\n')
    assert not nvcc_steps.plain_pragmas("#pragma GCC visibility push(default)\nint a;\n")
    assert not nvcc_steps.plain_pragmas("#pragma pack(1)\n")
    assert not nvcc_steps.plain_pragmas("#if defined(X)\n#pragma GCC optimize(\"O0\")\n#endif\n")
    text = '# 1 "/b/dir/cuda.cu"\nint a;\n# 4 "/b/dir/cuda.cu" 2\n'
    assert nvcc_steps.normalised(text, "/b/dir") == text.replace("/b/dir/", "<build>/")
    assert nvcc_steps.normalised(text + 'const char* f = "/b/dir/cuda.cu";\n', "/b/dir") is None


@pytest.mark.parametrize("flag", ["-rdc=true", "--relocatable-device-code=true", "-dc", "-E", "--split-compile=2"])
def test_compiles_of_another_shape_are_left_to_nvcc(tmp_path, monkeypatch, flag):
    ran = []
    monkeypatch.setattr(nvcc_steps, "run", lambda *a, **k: ran.append(a))
    argv = ["nvcc", flag, "-c", str(tmp_path / "cuda.cu"), "-o", "cuda.cuda.o"]
    assert not nvcc_steps.compile_cu(argv, str(tmp_path / "cuda.cu"), str(tmp_path), None, 60.0, "e")
    assert ran == []


def test_a_dryrun_of_an_unknown_shape_is_not_run(tmp_path, monkeypatch):
    calls = []

    def fake(command, cwd, timeout, what):
        calls.append(command)
        return '#$ PATH=/x\n#$ gcc -E a.cu -o "k/a.cpp4.ii"\n#$ cudafe++ --gen_module_id_file --module_id_file_name ' \
               '"k/a.module_id" "k/a.cpp4.ii"\n#$ nvlink x\n#$ gcc -c "k/a.cudafe1.cpp" -o a.o\n'
    monkeypatch.setattr(nvcc_steps, "run", fake)
    assert not nvcc_steps.compile_cu(["nvcc", "-c", "a.cu", "-o", "a.o"], "a.cu", str(tmp_path), None, 60.0, "e")
    assert len(calls) == 1 and "--dryrun" in calls[0]


def _symbols_and_code(obj: str) -> str:
    """The object's symbols and disassembly, module names and the name of the host compile's input left out."""
    text = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    text += subprocess.run(["objdump", "-dr", "--no-show-raw-insn", obj], capture_output=True, text=True,
                           check=True).stdout.split("\n", 3)[-1]
    text = re.sub(r"_[0-9a-f]{8}_\d+_cuda_cu_[0-9a-f]{8}", "<module>", text)
    text = re.sub(r"_GLOBAL__sub_I_[\w.\-]+", "_GLOBAL__sub_I_<input>", text)
    return re.sub(r"\d+_INTERNAL_", "N_INTERNAL_", text)  # the mangled length of a name that holds the module's


def _nvcc(directory, body: int) -> list:
    src = directory / "cuda.cu"
    src.write_text(SOURCE.replace("BODY", str(body)))
    return [NVCC, "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC", "-O3", "-std=c++17", "-c",
            str(src), "-o", "cuda.cuda.o"]


@needs_nvcc
def test_a_later_candidate_reads_the_shared_start_precompiled_and_builds_what_nvcc_builds(tmp_path, monkeypatch):
    monkeypatch.setattr(nvcc_steps, "shared_lines", lambda text: 2)  # its includes stand for the builder's head
    headers = pch.BindingHeaders(str(tmp_path / "scratch"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    argv = _nvcc(tmp_path / "a", 1)
    assert nvcc_steps.compile_cu(argv, argv[-3], str(tmp_path / "a"), headers, 600.0, "e")
    assert (headers.host_made, headers.host_reused) == (1, 0)
    argv = _nvcc(tmp_path / "b", 2)  # a distinct candidate, in a build directory of its own
    assert nvcc_steps.compile_cu(argv, argv[-3], str(tmp_path / "b"), headers, 600.0, "e")
    assert (headers.host_made, headers.host_reused) == (1, 1)
    stepped = _symbols_and_code(str(tmp_path / "b" / "cuda.cuda.o"))
    subprocess.run(argv, cwd=tmp_path / "b", check=True, capture_output=True, timeout=600)  # nvcc itself
    plain = _symbols_and_code(str(tmp_path / "b" / "cuda.cuda.o"))
    assert "fill" in plain and "cudaMemcpyToSymbol" in plain and stepped == plain


@needs_nvcc
def test_the_host_compile_reads_the_precompiled_start_and_a_failing_step_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(nvcc_steps, "shared_lines", lambda text: 2)
    headers = pch.BindingHeaders(str(tmp_path / "scratch"))
    outputs = []
    real = nvcc_steps.run

    def run(command, cwd, timeout, what):
        outputs.append(real(command, cwd, timeout, what))
        return outputs[-1]
    monkeypatch.setattr(nvcc_steps, "run", run)
    for name, body in (("a", 1), ("b", 3)):
        (tmp_path / name).mkdir()
        argv = _nvcc(tmp_path / name, body) + ["-Xcompiler", "-H"]  # GCC names the headers it reads, "!" a .gch
        assert nvcc_steps.compile_cu(argv, argv[-5], str(tmp_path / name), headers, 600.0, "e")
    assert (headers.host_made, headers.host_reused) == (1, 1)
    used = [line for out in outputs for line in out.splitlines() if line.startswith("! ")]
    # made by the first build (not in the background: it then uses it too), read by both
    assert len(used) == 2 and all(u.endswith(nvcc_steps.HOST_HEADER + ".gch") for u in used)
    (tmp_path / "c").mkdir()
    argv = _nvcc(tmp_path / "c", 0)
    (tmp_path / "c" / "cuda.cu").write_text(SOURCE.replace("BODY", "undeclared_name"))
    with pytest.raises(CompileError, match="undeclared_name"):
        nvcc_steps.compile_cu(argv, argv[-3], str(tmp_path / "c"), headers, 600.0, "e")


@needs_nvcc
def test_cudafe_runs_beside_the_device_passes_and_the_object_is_nvccs(tmp_path, monkeypatch):
    """Once this module has written the module name, cudafe++ (the host side's EDG pass over the torch head) runs
    beside cicc (the device side's): cudafe++ here waits until cicc has started, which a compile that ran them one
    after the other would never let happen (the wait ends in 120 s and the test fails). The object is still the
    one nvcc makes whole."""
    monkeypatch.setattr(nvcc_steps, "shared_lines", lambda text: 2)
    cicc_started, order = threading.Event(), []
    real = nvcc_steps.run

    def run(command, cwd, timeout, what):
        line = command[-1].splitlines()[-1]
        if "cudafe++" in line:
            order.append(("cudafe++ saw cicc started", cicc_started.wait(120)))
        elif "cicc" in line:
            cicc_started.set()
        return real(command, cwd, timeout, what)
    monkeypatch.setattr(nvcc_steps, "run", run)
    headers = pch.BindingHeaders(str(tmp_path / "scratch"))
    argv = _nvcc(tmp_path, 4)
    assert nvcc_steps.compile_cu(argv, argv[-3], str(tmp_path), headers, 600.0, "e")
    assert order == [("cudafe++ saw cicc started", True)]
    stepped = _symbols_and_code(str(tmp_path / "cuda.cuda.o"))
    subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True, timeout=600)
    assert stepped == _symbols_and_code(str(tmp_path / "cuda.cuda.o"))


def _stepped_build(tmp_path, monkeypatch, compile_cu, ninja, cpp_sources: str, **kwargs) -> None:
    """torch_ext.build of a one-function inline request with the stepped device compile and ninja stood in for
    (``compile_cu``, ``ninja``), no precompiled head."""
    monkeypatch.setattr(cpp, "CUDA_HOME", str(tmp_path / "cuda"))  # a CPU torch has none; only paths are written
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(nvcc_steps, "compile_cu", compile_cu)
    monkeypatch.setattr(torch_ext, "run", ninja)
    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": cpp_sources,
                              "cuda_sources": "torch::Tensor f(torch::Tensor x) { return x; }", "functions": ["f"]})
    heads = pch.BindingHeaders(str(tmp_path / "scratch"))
    heads.header_for = lambda head, flags, timeout: None
    torch_ext.build(req, CudaBackend(), Store(str(tmp_path / "store")), {}, 60.0, 1 << 30, pch=heads, **kwargs)


def _stepped_object(argv, source, cwd, headers, timeout, what) -> bool:
    """A stepped device compile that makes its object."""
    open(os.path.join(cwd, argv[argv.index("-o") + 1]), "w").close()
    return True


def test_the_builder_takes_a_stepped_device_compile_out_of_ninja(tmp_path, monkeypatch):
    stepped, linked = [], []
    binding_started = threading.Event()

    def compile_cu(argv, source, cwd, headers, timeout, what):
        # ninja compiles the binding meanwhile, not after: a builder running them one after the other never
        # sets the event while this waits (and the wait has a deadline)
        stepped.append((argv, binding_started.wait(30.0)))
        return _stepped_object(argv, source, cwd, headers, timeout, what)

    def ninja(command, cwd, timeout, what):
        text = open(os.path.join(cwd, "build.ninja")).read()
        targets = [t for t in command[1:] if not t.startswith("-")]
        linked.append((targets, re.findall(r"^build (\S+): (\w+)", text, re.M)))
        if "main.o" in targets:
            binding_started.set()
        for lib in re.findall(r"^build (\S+\.so): link", text, re.M):
            open(os.path.join(cwd, lib), "wb").close()
    _stepped_build(tmp_path, monkeypatch, compile_cu, ninja, "torch::Tensor f(torch::Tensor x);")
    [(argv, beside)] = stepped
    assert argv[0].endswith("nvcc") and argv[argv.index("-c") + 1].endswith("/cuda.cu") and "-MD" not in argv
    assert "-gencode=arch=compute_90,code=sm_90" in argv
    assert beside, "the binding's compile did not start while the device code compiled"
    (objects, _), (rest, last) = linked
    assert objects == ["main.o"] and rest == []  # the C++ objects alone, then the rest (the link)
    assert [t for t, rule in last if rule == "cuda_compile"] == [] and ("main.o", "compile") in last


def test_a_binding_waits_for_its_head_being_made_while_the_device_code_compiles(tmp_path, monkeypatch):
    """A cold builder's builds find the binding's head being made in the background: the binding waits for it
    beside the device code and is compiled against it, not whole; the ninja file keeps naming it for the link."""
    device_started, waits, compiles = threading.Event(), [], []
    made = tmp_path / "made" / pch.HEADER
    made.parent.mkdir()
    made.write_text("")

    def compile_cu(argv, source, cwd, headers, timeout, what):
        device_started.set()
        return _stepped_object(argv, source, cwd, headers, timeout, what)

    def wait_for(head, flags, timeout, stop=None):
        waits.append((head, device_started.wait(30.0)))
        return str(made)

    def ninja(command, cwd, timeout, what):
        text = open(os.path.join(cwd, "build.ninja")).read()
        cflags = re.search(r"^cflags = (.*)$", text, re.M).group(1)
        compiles.append(([t for t in command[1:] if not t.startswith("-")], f"-include {made}" in cflags,
                         re.search(r"^build \S+: cuda_compile", text, re.M) is not None))
        for lib in re.findall(r"^build (\S+\.so): link", text, re.M):
            open(os.path.join(cwd, lib), "wb").close()
    monkeypatch.setattr(pch.BindingHeaders, "wait_for", lambda self, *a, **k: wait_for(*a, **k))
    _stepped_build(tmp_path, monkeypatch, compile_cu, ninja, "torch::Tensor f(torch::Tensor x);")
    assert [w[0] for w in waits] == [pch.HEADS[0]] and waits[0][1]
    assert compiles == [(["main.o"], True, True), ([], True, False)]  # against the head; the link keeps it


def test_a_failed_binding_compile_fails_the_stepped_build(tmp_path, monkeypatch):
    def ninja(command, cwd, timeout, what):
        if "main.o" in command:
            raise CompileError(f"{what}: main.cpp:1: error: 'undeclared' was not declared")
    with pytest.raises(CompileError, match="'undeclared' was not declared"):
        _stepped_build(tmp_path, monkeypatch, _stepped_object, ninja, "undeclared f(torch::Tensor x);",
                       light_headers=False)

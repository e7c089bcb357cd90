"""CUTLASS include paths for CUDA builds (kbench_env/backends/cutlass.py): with $KBENCH_CUTLASS / $CUTLASS_PATH a
build gets <root>/include and <root>/tools/util/include, the worker and the builder keep the variables and may read
the checkout;
without them, a build that misses a CUTLASS header says which variable to set. Checked on a fake CUTLASS tree; the
nvcc test compiles only (no GPU needed) and is skipped where nvcc is absent."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kbench_env.sandbox.confine import environment, paths
from kbench_env.backends import cutlass
from kbench_env.backends.cuda import CudaBackend
from kbench_env.builder import requests, torch_ext
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.store import Store

CU = r"""
#include <cutlass/cutlass.h>
#include <cutlass/util/fake_helper.h>

__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= FAKE_CUTLASS_FACTOR * fake_util_one();
}
"""


@pytest.fixture()
def fake_cutlass(tmp_path):
    """A CUTLASS-shaped tree: include/cutlass/cutlass.h and tools/util/include/cutlass/util/fake_helper.h."""
    root = tmp_path / "cutlass"
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "cutlass.h").write_text("#pragma once\n#define FAKE_CUTLASS_FACTOR 2.0f\n")
    util = root / "tools" / "util" / "include" / "cutlass" / "util"
    util.mkdir(parents=True)
    (util / "fake_helper.h").write_text("#pragma once\n__host__ __device__ inline float fake_util_one() { return 1.f; }\n")
    return root


def _clear(monkeypatch):
    for var in cutlass.ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def test_include_paths_follow_the_variables(fake_cutlass, monkeypatch):
    _clear(monkeypatch)
    assert "extra_include_paths" not in CudaBackend().adjust_kwargs({})
    want = [str(fake_cutlass / "include"), str(fake_cutlass / "tools" / "util" / "include")]
    monkeypatch.setenv("KBENCH_CUTLASS", str(fake_cutlass))
    kw = CudaBackend().adjust_kwargs({"extra_include_paths": ["/mine"]})
    assert kw["extra_include_paths"] == ["/mine"] + want  # the candidate's own paths first
    monkeypatch.setenv("KBENCH_CUTLASS", str(fake_cutlass / "include"))  # robust-kbench's form: .../include
    assert CudaBackend().adjust_kwargs({})["extra_include_paths"] == want
    _clear(monkeypatch)
    monkeypatch.setenv("CUTLASS_PATH", str(fake_cutlass))  # CUTLASS's own variable
    assert CudaBackend().adjust_kwargs({})["extra_include_paths"] == want


def test_missing_cutlass_header_says_what_to_set(fake_cutlass, monkeypatch):
    _clear(monkeypatch)
    gcc = "x.cu:2:10: fatal error: cutlass/cutlass.h: No such file or directory"
    nvcc = 'x.cu(2): catastrophic error: cannot open source file "cutlass/gemm/device/gemm.h"'
    for err in (gcc, nvcc):
        assert "KBENCH_CUTLASS" in cutlass.missing_hint(err)
    assert cutlass.missing_hint("x.cu:3:1: error: expected ';'") is None
    assert cutlass.missing_hint("fatal error: foo/bar.h: No such file or directory") is None
    monkeypatch.setenv("KBENCH_CUTLASS", str(fake_cutlass))
    assert str(fake_cutlass) in cutlass.missing_hint(gcc)  # given but wrong: names the checkout it looked in


def test_worker_keeps_the_variables_and_may_read_the_checkout(fake_cutlass, monkeypatch, tmp_path):
    _clear(monkeypatch)
    monkeypatch.setenv("KBENCH_CUTLASS", str(fake_cutlass))
    assert environment.scrubbed_environment(worker=True)["KBENCH_CUTLASS"] == str(fake_cutlass)
    reads, _ = paths.allowed_paths(str(tmp_path / "s"), str(tmp_path / "b"), "cuda")
    assert os.path.realpath(fake_cutlass) in reads


def _build(tmp_path) -> dict:
    """A build of a source that includes CUTLASS, through the builder (builder/torch_ext.py) with the compiler
    replaced by one that fails like g++ unless CUTLASS's include path is given."""
    seen = {}

    def fake_compiler(name, sources, options, directory, timeout):
        seen["include"] = options.get("extra_include_paths")
        if not options.get("extra_include_paths"):
            raise CompileError("Error building extension 'm': x.cu:2:10: fatal error: cutlass/cutlass.h: "
                               "No such file or directory")
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "",
                              "cuda_sources": "#include <cutlass/cutlass.h>\n", "functions": ["f"]})
    try:
        torch_ext.build(req, CudaBackend(), Store(str(tmp_path / "builds")), {}, 60.0, 1 << 30,
                        compile_fn=fake_compiler)
        err = None
    except CompileError as exc:
        err = str(exc)
    return {"include": seen["include"], "error": err}


def test_the_build_wrapper_passes_the_paths_or_the_hint(fake_cutlass, monkeypatch, tmp_path):
    _clear(monkeypatch)
    without = _build(tmp_path)
    assert without["include"] is None and "set KBENCH_CUTLASS" in without["error"]
    assert "cutlass/cutlass.h: No such file" in without["error"]  # the compiler's own line stays
    monkeypatch.setenv("KBENCH_CUTLASS", str(fake_cutlass))
    given = _build(tmp_path)
    assert given["error"] is None and str(fake_cutlass / "include") in given["include"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_compiles_a_cu_that_includes_cutlass(fake_cutlass, monkeypatch, tmp_path):
    src = tmp_path / "uses_cutlass.cu"
    src.write_text(CU)

    def nvcc(includes):
        cmd = ["nvcc", "-c", str(src), "-o", str(tmp_path / "out.o")] + [f"-I{p}" for p in includes]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    _clear(monkeypatch)
    failed = nvcc(CudaBackend().adjust_kwargs({}).get("extra_include_paths") or [])
    assert failed.returncode != 0 and "KBENCH_CUTLASS" in cutlass.missing_hint(failed.stderr + failed.stdout)
    monkeypatch.setenv("KBENCH_CUTLASS", str(fake_cutlass))
    built = nvcc(CudaBackend().adjust_kwargs({})["extra_include_paths"])
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "out.o").stat().st_size > 0

"""Issue #34's direct ATen call and record switch, as an attacker writes them, on the CPU.

- A candidate whose C++ calls ``at::cpu::addmm`` (the kernel's entry point, past the dispatcher: no operator record
  reaches the forward audit) for level2/linear_relu: under ``rules="strict"`` flagged ``pytorch_compute_linked``
  from its library's symbols before it runs, and unpaid; under ``rules="kernelbench"`` allowed, but its kernel
  coverage no longer counts the library's GEMM as the candidate's own (the sampled time in its own library).
- A candidate that switches PyTorch's operator records off in forward, runs ``torch.addmm`` unseen and switches
  them on again, spelt plainly (the screen flags it) and obfuscated (the worker refuses the switch: it is gone from
  the worker's torch; a ``sandbox_violation`` flag); and one that runs it through the dispatcher's record-free entry
  (``torch.ops.aten.addmm.default.redispatch``), which the worker now gives a record.

The symbol check itself, on libraries built here: tests/test_attack_aten.py's unit tests below; every shipped
solution passes it (bench/false_positives.py).
"""

from __future__ import annotations

import pytest

from conftest import ROOT, read
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

ATTACKS = ROOT / "tests" / "data" / "attacks"
LINEAR_RELU = resolve_task("level2/linear_relu")
SEED = 34
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 20, "min_seconds": 0.05}


def _evaluator(cache_dir, rules: str) -> Evaluator:
    return Evaluator(device="cpu", cache_dir=cache_dir, timing=TIMING, rules=rules,
                     limits=Limits(build_timeout=600, run_timeout=60, time_timeout=60))


def _kinds(r) -> list[str]:
    return [f.split(":", 1)[0] for f in r.integrity_flags]


def test_direct_aten_call_is_flagged_and_unpaid_under_strict(evaluator):
    ev = _evaluator(evaluator.cache_dir, "strict")
    r = ev.evaluate(LINEAR_RELU, read(ATTACKS / "aten_direct_addmm.py"), seed=SEED)
    assert r.compiled, r.feedback()
    assert "pytorch_compute_linked" in _kinds(r), r.feedback()
    assert "at::cpu::addmm" in " ".join(r.integrity_flags), r.integrity_flags
    assert r.reward < 0 and r.speedup is None, r.feedback()  # flagged before it runs: never timed, never paid


def test_direct_aten_call_is_not_own_coverage_under_kernelbench(kernelbench_evaluator):
    """Allowed under the kernelbench rules, but the GEMM runs in libtorch_cpu: the samples of the timed calls'
    CPU time put almost none of it in the candidate's library, so its coverage is near 0 (it was 1.0: its own
    operator's record held the whole call). The shipped hand-written GEMM keeps most of its time as its own."""
    ev = _evaluator(kernelbench_evaluator.cache_dir, "kernelbench")
    r = ev.evaluate(LINEAR_RELU, read(ATTACKS / "aten_direct_addmm.py"), seed=SEED)
    assert r.correct and r.integrity_flags == [] and r.stage == "timed", r.feedback()
    assert r.kernel_coverage is not None and r.kernel_coverage < 0.25, r.feedback()
    honest = ev.evaluate(LINEAR_RELU, read(ROOT / "tasks/solutions/cpu/level2/linear_relu.py"), seed=SEED)
    assert honest.correct and honest.integrity_flags == [], honest.feedback()
    assert honest.kernel_coverage is not None and honest.kernel_coverage > 0.5, honest.feedback()


@pytest.mark.parametrize("name, kinds", [("record_switch_plain", ("audit_blinded", "sandbox_violation")),
                                         ("record_switch_obfuscated", ("sandbox_violation",)),
                                         ("redispatch_addmm", ("pytorch_compute_in_forward",))])
def test_record_switch_from_python_is_flagged(evaluator, name, kinds):
    ev = _evaluator(evaluator.cache_dir, "strict")
    r = ev.evaluate(LINEAR_RELU, read(ATTACKS / f"{name}.py"), seed=SEED)
    assert r.compiled, r.feedback()
    got = _kinds(r)
    assert all(k in got for k in kinds), f"{name}: flags {r.integrity_flags}, expected {list(kinds)}\n{r.feedback()}"
    assert r.reward < 0, r.feedback()


# ---------------------------------------------------------------------- the symbol check, on libraries built here

_CALLS = r"""
#include <cstdint>
#include <dlfcn.h>
namespace at {
struct Tensor;
namespace cpu { void addmm(int); void empty(int); }
namespace cuda { void getCurrentCUDAStream(int); namespace blas { void gemm(int); } }
namespace native { void copy_(int); void cpublas_gemm(int); }
namespace _ops { struct addmm { static void redispatch(int); static void call(int); };
                 struct empty_memory_format { static void redispatch(int); }; }
void enableRecordFunction(bool);
void addmm(int);  // the dispatcher's entry: its operator record shows it to the audit
}
extern "C" void cblas_sgemm(int);
extern "C" void %s(int n) {
  at::cpu::addmm(n); at::cpu::empty(n); at::cuda::getCurrentCUDAStream(n); at::cuda::blas::gemm(n);
  at::native::copy_(n); at::native::cpublas_gemm(n); at::_ops::addmm::redispatch(n); at::_ops::addmm::call(n);
  at::_ops::empty_memory_format::redispatch(n); at::addmm(n); cblas_sgemm(n);
  if (n < 0) at::enableRecordFunction(false);
  if (n < -1) dlsym(nullptr, "x");
}
"""


def _library(tmp_path, body: str, name: str = "calls") -> str:
    import subprocess

    src, lib = tmp_path / f"{name}.cpp", tmp_path / f"{name}.so"
    src.write_text(body)
    subprocess.run(["c++", "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], check=True, timeout=120)
    return str(lib)


def test_symbols_name_what_reaches_compute_past_the_dispatcher(tmp_path):
    from kbench_env.builder import symbols
    from kbench_env.pipeline import linked

    scan = symbols.scan(_library(tmp_path, _CALLS % "entry"))
    kinds = {s["name"]: linked.kind_of(s) for s in scan["suspects"]}
    assert kinds == {"at::cpu::addmm": "compute", "at::cpu::empty": None, "at::cuda::getCurrentCUDAStream": None,
                     "at::cuda::blas::gemm": "compute", "at::native::copy_": None,
                     "at::native::cpublas_gemm": "compute", "at::_ops::addmm::redispatch": "compute",
                     "at::_ops::empty_memory_format::redispatch": None, "cblas_sgemm": "compute",
                     "at::enableRecordFunction": "control", "dlsym": "lookup"}, kinds
    flags = linked.flags([("/cache/unit/calls.so", scan)])
    assert [f.kind for f in flags] == ["audit_blinded", "pytorch_compute_linked"], flags
    detail = flags[1].detail
    assert "at::cpu::addmm" in detail and "cblas_sgemm" in detail and "at::cpu::empty" not in detail


def test_an_honest_library_names_no_suspect_and_kernelbench_drops_the_compute_flag(tmp_path):
    from kbench_env.builder import symbols
    from kbench_env.pipeline import rules

    honest = _library(tmp_path, '#include <cmath>\nextern "C" void relu(float* y, long n) '
                                '{ for (long i = 0; i < n; ++i) y[i] = std::fmax(y[i], 0.0f); }', "honest")
    assert symbols.scan(honest)["suspects"] == [] and "relu" in symbols.scan(honest)["defines"]
    calls = [("calls.so", symbols.scan(_library(tmp_path, _CALLS % "entry")))]
    assert [f.kind for f in rules.linked_flags("kernelbench", calls)] == ["audit_blinded"]
    assert [f.kind for f in rules.linked_flags("strict", calls)] == ["audit_blinded", "pytorch_compute_linked"]


def test_a_library_that_is_not_elf_is_flagged_under_strict(tmp_path):
    from kbench_env.builder import symbols
    from kbench_env.pipeline import rules

    path = tmp_path / "odd.so"
    path.write_bytes(b"#!/bin/sh\n")
    scan = symbols.scan(str(path))
    assert "unreadable" in scan
    assert [f.kind for f in rules.linked_flags("strict", [(str(path), scan)])] == ["pytorch_compute_linked"]


# ---------------------------------------------------------------------- GPU coverage: whose kernel is it

_GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas"


def test_a_library_named_kernel_launched_from_own_code_is_own_only_if_its_library_defines_it():
    """The report of at::cuda::addmm called from the candidate's extension: cuBLAS's GEMM is launched inside the
    candidate's call ("own" by its launcher) but named like a library's kernel and defined in none of its
    libraries; its ReLU kernel is. A CUTLASS kernel of the candidate's own (named like a library's) stays own."""
    from kbench_env.pipeline import coverage

    report = {"device_us": [[_GEMM, "own", 900.0], ["void kb_relu_inplace(float*, long)", "own", 100.0]]}
    assert coverage.coverage(report, coverage.TORCH_KERNEL_PREFIXES) == 1.0  # no libraries known: the old rule
    own = {"kb_relu_inplace", "linear_relu"}
    assert coverage.coverage(report, coverage.TORCH_KERNEL_PREFIXES, own) == pytest.approx(0.1)
    cutlass = {"device_us": [["void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm>(cutlass_80_tensorop_s1688gemm"
                              "::Params)", "own", 500.0]]}
    assert coverage.coverage(cutlass, coverage.TORCH_KERNEL_PREFIXES, {"cutlass::Kernel2"}) == 1.0
    assert coverage.coverage(cutlass, coverage.TORCH_KERNEL_PREFIXES, {"kb_relu_inplace"}) == 0.0


def test_the_kernels_a_cuda_library_defines_are_named_as_the_profiler_names_them(tmp_path):
    import shutil
    import subprocess

    from kbench_env.builder import symbols

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    src, lib = tmp_path / "k.cu", tmp_path / "k.so"
    src.write_text("namespace cutlass { template <typename Op> __global__ void Kernel2(typename Op::Params p) {} }\n"
                   "struct MyOp { struct Params { int x; }; };\n"
                   "namespace { template <typename T> __global__ void relu(const T* x, T* y, long n) {} }\n"
                   'extern "C" __global__ void plain_kernel(float* y) {}\n'
                   "void launch(float* y) { cutlass::Kernel2<MyOp><<<1, 1>>>(MyOp::Params{1}); "
                   "relu<float><<<1, 1>>>(y, y, 1); plain_kernel<<<1, 1>>>(y); }\n")
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-arch=sm_90", str(src), "-o",
                    str(lib)], check=True, timeout=300)
    scan = symbols.scan(str(lib))
    profiled = ["void cutlass::Kernel2<MyOp>(MyOp::Params)", "void (anonymous namespace)::relu<float>(float const*, "
                "float*, long)", "plain_kernel"]
    assert all(symbols.kernel_name(k) in scan["defines"] for k in profiled), scan["defines"]
    assert scan["suspects"] == [], scan["suspects"]  # cudart linked as torch's extensions link it: no lookups


def test_a_library_the_candidate_wrote_and_loaded_itself_is_judged_as_a_build(evaluator, tmp_path):
    """The builder's symbol check, walked around: the candidate carries a library built elsewhere (here by the test,
    naming at::cpu::addmm) as bytes, writes it into its scratch directory and loads it with ctypes. The trusted
    side reads the worker's executable mappings and judges that library as a build: flagged under strict."""
    import base64
    import os
    import subprocess

    import torch

    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    src, lib = tmp_path / "prebuilt.cpp", tmp_path / "prebuilt.so"
    src.write_text("namespace c10 { struct Scalar; }\n"
                   "namespace at { struct Tensor; namespace cpu { Tensor addmm(const Tensor&, const Tensor&, "
                   "const Tensor&, const c10::Scalar&, const c10::Scalar&); } }\n"
                   'extern "C" void* kb_gemm() { return (void*)&at::cpu::addmm; }\n')
    subprocess.run(["c++", "-shared", "-fPIC", "-O1", str(src), "-o", str(lib), f"-L{lib_dir}", "-Wl,--no-as-needed",
                    "-ltorch_cpu", f"-Wl,-rpath,{lib_dir}"], check=True, timeout=120)
    source = read(ATTACKS / "prebuilt_library.py").replace("__BLOB__", base64.b64encode(lib.read_bytes()).decode())
    ev = _evaluator(evaluator.cache_dir, "strict")
    r = ev.evaluate(resolve_task("level1/relu"), source, seed=SEED)
    assert r.compiled, r.feedback()
    assert "pytorch_compute_linked" in _kinds(r) and "kb_prebuilt.so" in " ".join(r.integrity_flags), r.feedback()
    assert r.reward < 0, r.feedback()


def test_the_sampler_puts_a_busy_process_in_the_code_it_runs():
    """sandbox/samples.py from the trusted side: a child spinning in the interpreter is sampled there."""
    import os
    import subprocess
    import sys
    import time

    from kbench_env.sandbox.samples import Sampler

    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 20: pass"])
    try:
        sampler = Sampler(child.pid, period_ns=100_000)
        sampler.attach()
        if not sampler.available:
            pytest.skip(f"no perf events here: {sampler.why_not}")
        deadline = time.monotonic() + 10
        while sum(sampler.counts.values()) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
            sampler.drain()
        sampler.close()
    finally:
        child.kill()
        child.wait(timeout=10)
    top = max(sampler.counts, key=sampler.counts.get)
    assert sum(sampler.counts.values()) >= 200, sampler.counts
    assert "python" in os.path.basename(top), sampler.counts  # the interpreter (its binary or libpython)
    assert sampler.counts[top] > 0.5 * sum(sampler.counts.values()), sampler.counts

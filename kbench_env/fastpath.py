"""The fast path: kernels that need no torch headers, built in about a second and launched on torch tensors.

A documented action form for both backends (the screen accepts it like ``load_inline``)::

    from kbench_env.fastpath import cpp_kernel, cuda_kernel

    relu = cpp_kernel(r'''
    extern "C" void relu(const float* x, float* y, int64_t n) {
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }''', "relu", flags=["-O3", "-fopenmp"])          # g++ -shared: ~0.3 s instead of ~10-30 s

    add = cuda_kernel(r'''
    extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) out[i] = a[i] + b[i];
    }''', "add")                                       # nvcc -cubin: ~0.3 s instead of ~60 s

    class ModelNew(nn.Module):
        def forward(self, x):
            y = torch.empty_like(x); relu(x.contiguous(), y, x.numel()); return y

Arguments: a tensor is passed as its data pointer; a Python int as a 64-bit integer; a Python float as ``double``
(C++) or ``float`` (CUDA); ctypes or numpy scalars pass as their own type. ``cuda_kernel(...)`` returns a launcher
called as ``add(grid, block, a, b, out, n, shared_mem=0)``; it launches on torch's current stream. In kbench's worker
the trusted builder compiles them (``set_builder``; builder/fast.py), cached by a hash of source, flags and
toolchain; elsewhere they are built in this process, under the temporary directory.
"""

from __future__ import annotations

import ctypes

import torch

from kbench_env.measure.ownership import own_call

_calls = 0


def call_count() -> int:
    """Calls made into fast-path kernels in this process (the decoy check reads it)."""
    return _calls


_builder = None  # (language, source, flags, arch) -> the artifact's path; set in kbench's worker


def set_builder(build) -> None:
    """Have ``build(language, source, flags, arch)`` make the kernels (the worker: a request to the builder)."""
    global _builder
    _builder = build


def _artifact(language: str, source: str, flags: list, arch: str | None = None) -> str:
    if _builder is not None:
        return _builder(language, source, flags, arch)
    from kbench_env.builder.fast import build_here

    return build_here(language, source, flags, arch)


def _c_arg(x, float_type):
    if isinstance(x, torch.Tensor):
        return ctypes.c_void_p(x.data_ptr())
    if isinstance(x, bool):
        return ctypes.c_int(int(x))
    if isinstance(x, int):
        return ctypes.c_int64(x)
    if isinstance(x, float):
        return float_type(x)
    if hasattr(x, "dtype") and hasattr(x, "item"):  # numpy scalar: its own C type
        return {"int32": ctypes.c_int32, "int64": ctypes.c_int64, "float32": ctypes.c_float,
                "float64": ctypes.c_double, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64}[str(x.dtype)](x.item())
    return x  # a ctypes object


def cpp_kernel(source: str, name: str, flags: list | None = None):
    """Compile ``extern "C"`` C++ with the system compiler into a shared library; return the function ``name``."""
    so = _artifact("cpp", source, list(flags or ["-O3"]))
    fn = getattr(ctypes.CDLL(so), name)
    fn.restype = None

    def call(*args):
        global _calls
        _calls += 1
        with own_call(name):  # the audit's record of the candidate's own time (measure/ownership.py)
            fn(*[_c_arg(a, ctypes.c_double) for a in args])

    call.__name__ = name
    return call


class _Driver:
    """The CUDA driver API through ctypes: enough to load a cubin and launch a kernel."""

    lib = None

    @classmethod
    def get(cls):
        if cls.lib is None:
            cls.lib = ctypes.CDLL("libcuda.so.1")
        return cls.lib

    @staticmethod
    def check(code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"CUDA driver error {code} in {what}")


def cuda_kernel(source: str, name: str, flags: list | None = None):
    """Compile ``extern "C" __global__`` CUDA C++ to a cubin for this GPU with ``nvcc -cubin``; return a launcher
    ``launch(grid, block, *args, shared_mem=0)`` that runs on torch's current stream."""
    torch.cuda.init()
    major, minor = torch.cuda.get_device_capability()
    cubin = _artifact("cuda", source, list(flags or []), f"sm_{major}{minor}")
    drv = _Driver.get()
    torch.zeros(1, device="cuda")  # make torch's primary context current on this thread
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    with open(cubin, "rb") as f:
        image = f.read()
    _Driver.check(drv.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)), "cuModuleLoadData")
    _Driver.check(drv.cuModuleGetFunction(ctypes.byref(func), module, name.encode()), f"cuModuleGetFunction({name})")

    def launch(grid, block, *args, shared_mem: int = 0):
        global _calls
        _calls += 1
        g = tuple(grid) + (1,) * (3 - len(tuple(grid))) if isinstance(grid, (tuple, list)) else (int(grid), 1, 1)
        b = tuple(block) + (1,) * (3 - len(tuple(block))) if isinstance(block, (tuple, list)) else (int(block), 1, 1)
        cargs = [_c_arg(a, ctypes.c_float) for a in args]
        params = (ctypes.c_void_p * len(cargs))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in cargs])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        with own_call(name):
            _Driver.check(drv.cuLaunchKernel(func, *[ctypes.c_uint(v) for v in g], *[ctypes.c_uint(v) for v in b],
                                             ctypes.c_uint(shared_mem), stream, params, None),
                          f"cuLaunchKernel({name})")

    launch.__name__ = name
    launch._module = module  # keep the module alive with the launcher
    return launch

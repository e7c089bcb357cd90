"""The builder's cheap path for load_inline builds (builder/torch_ext.py, builder/pch.py): the light plan's device
code keeps load_inline's implicit torch header (so a .cu that relies on it builds the first time, not after a failed
light build), and the binding file's torch head is precompiled once and reused by later builds with the same flags
(checked with real g++ builds of the CPU backend: the later build's command line names the header, and it builds
even when the header's text is made uncompilable, which only its .gch can explain)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kbench_env.backends.cpu import CpuBackend
from kbench_env.backends.cuda import CudaBackend
from kbench_env.builder import pch, requests, torch_ext
from kbench_env.builder.store import Store

DEVICE_CODE = """__global__ void k(const float* x, float* y, int64_t n) { int64_t i = threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor copy(torch::Tensor x) { auto y = torch::empty_like(x); return y; }
"""


class LightOnly(CudaBackend):
    """The CUDA backend without its narrow device-code plan (tried before these; tests/test_build_narrow.py)."""

    def narrow_cuda_sources(self, cuda_sources):
        return None


def test_light_plan_device_code_keeps_the_implicit_header(tmp_path):
    built = []

    def recorder(name, sources, options, directory, timeout):
        built.append({os.path.basename(s): open(s).read() for s in sources})
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "torch::Tensor copy(torch::Tensor x);",
                              "cuda_sources": DEVICE_CODE, "functions": ["copy"]})
    torch_ext.build(req, LightOnly(), Store(str(tmp_path)), {}, 60.0, 1 << 30, compile_fn=recorder)
    assert len(built) == 1
    assert built[0]["main.cpp"].startswith(pch.HEADS[0])  # the light binding file
    assert built[0]["cuda.cu"].startswith("#include <torch/types.h>\n")  # as load_inline gives the device code


def test_a_candidates_own_no_implicit_headers_is_kept(tmp_path):
    built = []

    def recorder(name, sources, options, directory, timeout):
        built.append({os.path.basename(s): open(s).read() for s in sources})
        open(os.path.join(directory, name + ".so"), "wb").close()

    req = requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "#include <torch/types.h>\n",
                              "cuda_sources": DEVICE_CODE, "functions": ["copy"],
                              "options": {"no_implicit_headers": True}})
    torch_ext.build(req, LightOnly(), Store(str(tmp_path)), {}, 60.0, 1 << 30, compile_fn=recorder)
    assert [b["cuda.cu"] for b in built] == [DEVICE_CODE]


def test_only_builder_written_heads_are_precompiled():
    assert pch.head_of("#include <torch/types.h>\n#include <torch/python.h>\nint f();") == pch.HEADS[0]
    assert pch.head_of("#include <torch/extension.h>\nint f();") == "#include <torch/extension.h>\n"
    assert pch.head_of("#include <vector>\n#include <torch/extension.h>\n") is None
    assert pch.head_of("int f();") is None


def test_no_header_is_made_past_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(pch, "MAX_HEADERS", 0)
    headers = pch.BindingHeaders(str(tmp_path))
    assert headers.header_for(pch.HEADS[1], ("c++", "-std=c++20", ""), 60.0) is None
    assert headers.made == 0 and not any(p.suffix == ".gch" for p in tmp_path.rglob("*"))


def test_a_background_head_is_used_once_made(tmp_path):
    headers = pch.BindingHeaders(str(tmp_path), background=True)
    flags = ("c++", "-std=c++20", "")
    assert headers.header_for("#include <vector>\n", flags, 60.0) is None  # the build goes on without it
    headers.wait(120)
    header = headers.header_for("#include <vector>\n", flags, 60.0)
    assert (headers.made, headers.reused) == (1, 1) and os.path.isfile(header + ".gch")
    assert open(header).read() == "#include <vector>\n"


def test_a_build_waits_for_the_head_being_made_rather_than_compiling_whole(tmp_path):
    headers = pch.BindingHeaders(str(tmp_path), background=True)
    flags = ("c++", "-std=c++20", "")
    assert headers.header_for("#include <vector>\n", flags, 60.0) is None  # being made now, in the background
    header = headers.wait_for("#include <vector>\n", flags, 120.0)
    assert header is not None and os.path.isfile(header + ".gch")
    assert (headers.made, headers.reused, headers.waited) == (1, 1, 1)
    assert headers.wait_for("#include <map>\n", flags, 120.0) is None  # nobody makes that one: no wait


def test_a_wait_for_a_head_ends_when_its_stop_is_set(tmp_path, monkeypatch):
    release = threading.Event()
    headers = pch.BindingHeaders(str(tmp_path), background=True)
    monkeypatch.setattr(headers, "_make", lambda *a: release.wait(60.0))  # a make that takes as long as it is let
    flags = ("c++", "-std=c++20", "")
    assert headers.header_for("#include <vector>\n", flags, 60.0) is None
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    assert headers.wait_for("#include <vector>\n", flags, 60.0, stop) is None and stop.is_set()
    assert headers.wait_for("#include <vector>\n", flags, 0.3) is None  # and at its timeout
    release.set()
    assert headers.waited == 0


def test_a_host_compile_waits_for_its_shared_start_being_made(tmp_path):
    headers = pch.BindingHeaders(str(tmp_path), background=True)

    def command(header, output):
        return ["c++", "-x", "c++-header", "-std=c++20", header, "-o", output]
    gch = headers.host_prefix("k1", "#include <vector>\n", command, 120.0, wait=120.0)
    assert gch is not None and os.path.isfile(gch)
    assert (headers.host_made, headers.host_reused, headers.host_waited) == (1, 1, 1)
    assert headers.host_prefix("k2", "#include <map>\n", command, 120.0) is None  # no wait: made in the background
    headers.wait(120)
    assert headers.host_prefix("k2", "#include <map>\n", command, 120.0) is not None and headers.host_waited == 1


def _cpu_request(name: str, body: str) -> dict:
    return requests.normalise({"kind": "inline", "name": name, "cpp_sources": f"int64_t f(int64_t x) {{ {body} }}",
                               "functions": ["f"]})


def test_the_binding_head_is_precompiled_once_and_reused(tmp_path):
    store, headers = Store(str(tmp_path / "store")), pch.BindingHeaders(str(tmp_path / "pch"))
    first = torch_ext.build(_cpu_request("kb_pch_a", "return x + 1;"), CpuBackend(), store, {}, 600.0, 1 << 30,
                            pch=headers)
    assert (headers.made, headers.reused) == (1, 0)
    [made] = [p for p in (tmp_path / "pch").rglob(pch.HEADER + ".gch")]
    header = str(made)[:-len(".gch")]
    # Only the .gch can build the next one: the header's text now stops any compile that reads it.
    with open(header, "w") as f:
        f.write('#error "the precompiled header was not used"\n')
    second = torch_ext.build(_cpu_request("kb_pch_b", "return x * 3;"), CpuBackend(), store, {}, 600.0, 1 << 30,
                             pch=headers)
    assert (headers.made, headers.reused) == (1, 1)
    ninja = open(os.path.join(os.path.dirname(second["path"]), "build.ninja")).read()
    assert f"-include {header}" in ninja
    assert first["unit"] != second["unit"] and os.path.isfile(second["path"])


def test_the_confined_builder_precompiles_and_reuses_the_head(tmp_path):
    """Through the builder process (Landlock, limits): the first candidate's build starts the head in the
    builder's scratch directory without waiting for it; a later candidate's build names it."""
    from kbench_env.builder.client import Builder

    (tmp_path / "root").mkdir()
    builder = Builder("cpu", "cpu", str(tmp_path / "root"))
    try:
        first = builder.build({**_cpu_request("kb_pch_c", "return x - 1;"), "kind": "inline"}, 600.0)
        deadline = time.monotonic() + 600
        while not (made := list((Path(builder._scratch) / "pch").rglob(pch.HEADER + ".gch"))):
            assert time.monotonic() < deadline, "no precompiled head was made"
            time.sleep(1)  # made in the background: the first build did not wait for it
        second = builder.build({**_cpu_request("kb_pch_d", "return x * 5;"), "kind": "inline"}, 600.0)
    finally:
        builder.close()
    assert first["ok"] and second["ok"], (first.get("message"), second.get("message"))
    assert len(made) == 1
    header = str(made[0])[:-len(".gch")]
    assert f"-include {header}" not in (Path(first["path"]).parent / "build.ninja").read_text()
    assert f"-include {header}" in (Path(second["path"]).parent / "build.ninja").read_text()


def test_a_binding_object_serves_a_module_named_anew(tmp_path):
    """A distinct candidate that names its extension anew (as another policy sample does) reuses the binding object
    of the same file compiled for another name, its init function renamed (pch.name_free, rename_module): the
    library exports only the new module's init function and imports and runs under the new name."""
    import importlib.util
    import subprocess

    store, headers = Store(str(tmp_path / "store")), pch.BindingHeaders(str(tmp_path / "pch"))
    headers.header_for = lambda head, flags, timeout: None  # no precompiled head: only the object is under test
    first = torch_ext.build(_cpu_request("kb_named_a", "return x + 1;"), CpuBackend(), store, {}, 600.0, 1 << 30,
                            pch=headers)
    second = torch_ext.build(_cpu_request("kb_named_b", "return x + 1;"), CpuBackend(), store, {}, 600.0, 1 << 30,
                             pch=headers)
    assert headers.objects_reused == 1 and first["unit"] != second["unit"]
    assert "build main.o" not in (Path(second["path"]).parent / "build.ninja").read_text()
    exported = subprocess.run(["nm", "-D", "--defined-only", second["path"]], capture_output=True, text=True).stdout
    assert "PyInit_kb_named_b" in exported and "PyInit_kb_named_a" not in exported
    spec = importlib.util.spec_from_file_location("kb_named_b", second["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__name__ == "kb_named_b" and module.f(41) == 42


def test_the_confined_builder_reuses_a_binding_object_for_a_module_named_anew(tmp_path):
    """Through the builder process (Landlock, limits: nm and objcopy run there): the first build's binding object
    (compiled before the head was made) serves the next candidates' modules of other names, renamed, the head made
    or not; the library imports and runs under its own name."""
    import importlib.util

    from kbench_env.builder.client import Builder

    (tmp_path / "root").mkdir()
    builder = Builder("cpu", "cpu", str(tmp_path / "root"))
    try:
        builder.build({**_cpu_request("kb_conf_a", "return x + 2;"), "kind": "inline"}, 600.0)
        deadline = time.monotonic() + 600
        while not list((Path(builder._scratch) / "pch").rglob(pch.HEADER + ".gch")):
            assert time.monotonic() < deadline, "no precompiled head was made"
            time.sleep(1)
        with_head = builder.build({**_cpu_request("kb_conf_b", "return x + 2;"), "kind": "inline"}, 600.0)
        renamed = builder.build({**_cpu_request("kb_conf_c", "return x + 2;"), "kind": "inline"}, 600.0)
    finally:
        builder.close()
    assert with_head["ok"] and renamed["ok"], (with_head.get("message"), renamed.get("message"))
    for later in (with_head, renamed):  # reused, though the first compiled it without the head
        assert "build main.o" not in (Path(later["path"]).parent / "build.ninja").read_text()
    spec = importlib.util.spec_from_file_location("kb_conf_c", renamed["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__name__ == "kb_conf_c" and module.f(40) == 42


def test_a_binding_compiled_before_the_head_was_made_serves_the_builds_that_have_it(tmp_path):
    """The head the builder precompiles is the text the binding file starts with: an object compiled with it is the
    object compiled without it, so a build that finds the head made reuses the binding an earlier build compiled
    before it was (a trainer's first step after a cold batch compiled every binding again); an ``-include`` of
    anything else still keys an object apart."""
    import importlib.util

    store, headers = Store(str(tmp_path / "store")), pch.BindingHeaders(str(tmp_path / "pch"))
    made = headers.header_for
    headers.header_for = lambda head, flags, timeout: None  # the cold build: no head yet
    first = torch_ext.build(_cpu_request("kb_before_a", "return x + 3;"), CpuBackend(), store, {}, 600.0, 1 << 30,
                            pch=headers)
    headers.header_for = made
    second = torch_ext.build(_cpu_request("kb_before_b", "return x + 3;"), CpuBackend(), store, {}, 600.0, 1 << 30,
                             pch=headers)
    ninja = (Path(second["path"]).parent / "build.ninja").read_text()
    assert headers.made == 1 and "-include " in ninja  # the second build has the head
    assert headers.objects_reused == 1 and "build main.o" not in ninja  # and the first's binding object
    spec = importlib.util.spec_from_file_location("kb_before_b", second["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.f(39) == 42 and first["unit"] != second["unit"]

    other = tmp_path / "other.ninja"
    header = next(line for line in ninja.splitlines() if line.startswith("cflags = ")).split("-include ")[1].strip()
    other.write_text(ninja.replace(f"-include {header}", "-include /tmp/elsewhere/kb_binding.h"))
    text = "int64_t f(int64_t x);"
    plain = tmp_path / "plain.ninja"
    plain.write_text(ninja.replace(f" -include {header}", ""))
    assert pch.binding_key(str(plain), text) == pch.binding_key(
        str(Path(second["path"]).parent / "build.ninja"), text, header)
    assert pch.binding_key(str(plain), text) != pch.binding_key(str(other), text, header)

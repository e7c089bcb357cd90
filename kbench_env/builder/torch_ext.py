"""Builds of the candidate's ``torch.utils.cpp_extension`` calls (``inline`` and ``load`` requests), in the builder:
the sources written as ``load_inline`` writes them, compiled by torch's own ninja rules (the flags, include paths
and link libraries of torch's loader) under a deadline, and never imported here: the worker loads the library.

The backend adds its build policy (backends/extension.py, cuda.py): ``-O3`` where the candidate gave no ``-O``,
the GPU's architecture, CUTLASS's include paths, and light headers (<torch/types.h> in place of
<torch/extension.h>; off with KBENCH_LIGHT_HEADERS=0 on the trusted side), a build that then lacks a declaration of
torch's being built again as written. The light plan's device code keeps load_inline's implicit <torch/types.h>
(its C++ file brings its own head), and the head the builder puts on main.cpp comes precompiled where the builder
gives a place for it (pch.py); there the device code is compiled in nvcc's own steps, the host step reading what the
builder wrote the same for every source from a precompiled header (nvcc_steps.py). The candidate's own flags are
checked before any of that (flags.py).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shlex
import shutil
import threading
import time

import torch

from kbench_env.backends import host_device_split as hds
from kbench_env.backends import kernel_launch
from kbench_env.backends.extension import compiler_id
from kbench_env.builder import flags, nvcc_steps, requests
from kbench_env.builder import pch as pch_heads
from kbench_env.builder.compiler import CompileError, run
from kbench_env.builder.pch import BindingHeaders

_LIB_EXT = ".so"
#: Seconds a binding waits, once the device code is compiled, for its head still being made in the background.
HEAD_GRACE_S = 5.0
#: Seconds a cut build's host compile waits for its head being made in the background (it takes about as long as
#: compiling the host file without it).
APART_HEAD_WAIT_S = 30.0
#: Units whose narrow build failed in this process (a repeat goes straight to <torch/types.h>), at most this many.
_NARROW_FAILED: dict = {}
_NARROW_FAILED_MAX = 4096


def _call(fn, **kwargs):
    """``fn(**kwargs)`` with the arguments this torch version's private function takes."""
    accepted = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kwargs.items() if k in accepted})


def compile_with_ninja(name: str, sources: list, options: dict, directory: str, timeout: float,
                       pch: BindingHeaders | None = None, apart: bool = False) -> None:
    """Write torch's build.ninja for ``sources`` (paths in ``directory``) and run ninja there; with ``pch``, the
    head the builder put on main.cpp comes precompiled (builder/pch.py); ``apart``: the sources are a cut build's
    (backends/host_device_split.py), its host file compiled first (_compile_apart)."""
    import torch.utils.cpp_extension as cpp

    deadline = time.monotonic() + timeout
    with_cuda = options.get("with_cuda")
    if with_cuda is None:
        with_cuda = any(s.endswith((".cu", ".cuh")) for s in sources)
    ldflags = _call(cpp._prepare_ldflags, extra_ldflags=list(options.get("extra_ldflags") or []),
                    with_cuda=with_cuda, with_sycl=False, verbose=False, is_standalone=False)
    ninja_file = os.path.join(directory, "build.ninja")

    def write(extra_cflags: list) -> None:
        _call(cpp._write_ninja_file_to_build_library, path=ninja_file, name=name, sources=sources,
              extra_cflags=extra_cflags, extra_cuda_cflags=list(options.get("extra_cuda_cflags") or []),
              extra_sycl_cflags=[], extra_ldflags=ldflags,
              extra_include_paths=list(options.get("extra_include_paths") or []), with_cuda=with_cuda,
              with_sycl=False, is_standalone=False)

    cflags = list(options.get("extra_cflags") or [])
    write(cflags)
    head = _binding_head(sources) if pch is not None else None
    flags_ = pch_heads.ninja_flags(ninja_file) if head is not None else None
    header = pch.header_for(head, flags_, timeout) if head is not None else None
    if header is not None:
        write(cflags + ["-include", header])
    kept = (_reuse_binding(name, sources, ninja_file, directory, pch, deadline - time.monotonic(), header)
            if pch is not None else None)
    jobs = os.environ.get("MAX_JOBS", "")
    ninja = ["ninja", "-v"] + (["-j", jobs] if jobs.isdigit() else [])

    def head_made(stop) -> bool:
        """Whether the head being made in the background came (before ``stop``): the ninja file then names it."""
        made = pch.wait_for(head, flags_, deadline - time.monotonic(), stop)
        if made is not None:
            write(cflags + ["-include", made])
        return made is not None

    try:
        if apart:
            _compile_apart(name, ninja_file, directory, pch, deadline, header)
        elif pch is not None:  # the device code step by step (nvcc_steps.py), beside ninja's C++ objects
            _device_code_in_steps(name, ninja_file, directory, pch, deadline, ninja,
                                  head_made if head is not None and header is None else None)
        run(ninja, directory, deadline - time.monotonic(), f"Error building extension '{name}'")
    finally:  # a binding compiled whole is kept even when the device code failed (the next plan reuses it)
        if kept is not None and _finished(directory, "main.o"):
            pch.keep_binding_object(kept, os.path.join(directory, "main.o"))


def _device_code_in_steps(name: str, ninja_file: str, directory: str, pch: BindingHeaders, deadline: float,
                          ninja: list, head_made=None) -> None:
    """Compile the build's one ``.cu`` with nvcc step by step (builder/nvcc_steps.py: the host step against a
    precompiled shared start) and take its compile out of the ninja file; left to ninja where the steps are not
    the shape that module knows. The ninja file's C++ objects (``ninja``: its command) are compiled meanwhile, as
    ninja would compile them beside nvcc: one after the other, a build's wall is the sum of the two (a binding file
    compiled afresh, as for every new extension name, takes about half the device code's time).
    ``head_made(stop)``, where given, waits for the binding's head being made in the background (and names it in
    the ninja file) before the binding is compiled: while the device code compiles, and HEAD_GRACE_S after, so
    that the builds of a cold builder compile their bindings against it rather than whole (about as long as the
    device code, where the head makes a binding a fraction of that)."""
    with open(ninja_file) as f:
        text = f.read()
    found = re.findall(r"^build (\S+\.o): cuda_compile (\S+)\n", text, re.M)
    values = dict(re.findall(r"^(nvcc|cuda_cflags|cuda_post_cflags) = (.*)$", text, re.M))
    if len(found) != 1 or "nvcc" not in values:
        return
    out, source = found[0]
    if "$" in out + source + values.get("cuda_cflags", "") + values.get("cuda_post_cflags", ""):
        return  # ninja's escapes: left to ninja
    argv = [values["nvcc"], *shlex.split(values.get("cuda_cflags", "")), "-c", source, "-o", out,
            *shlex.split(values.get("cuda_post_cflags", ""))]  # the rule's command, less ninja's dependency file
    objects = re.findall(r"^build (\S+\.o): compile \S+", text, re.M)
    failed: list = []

    stop = threading.Event()

    def compile_objects() -> None:
        try:
            if head_made is not None and "main.o" in objects:
                head_made(stop)
            run(ninja + objects, directory, deadline - time.monotonic(), f"Error building extension '{name}'")
        except CompileError as exc:
            failed.append(exc)

    others = threading.Thread(target=compile_objects, daemon=True, name="kbench-ninja-objects") if objects else None
    if others is not None:
        others.start()
    try:
        stepped = nvcc_steps.compile_cu(argv, source, directory, pch, deadline - time.monotonic(),
                                        f"Error building extension '{name}'")
    finally:
        grace = threading.Timer(HEAD_GRACE_S, stop.set)
        grace.daemon = True
        grace.start()
        if others is not None:  # run() kills ninja at the deadline, so this ends by then
            others.join(max(0.0, deadline - time.monotonic()) + 5.0)
        grace.cancel()
        stop.set()
    if failed:
        raise failed[0]
    if stepped:
        with open(ninja_file) as f:
            text = f.read()  # (the object thread may have named the binding's head in it)
        with open(ninja_file, "w") as f:
            f.write(re.sub(r"^build \S+\.o: cuda_compile \S+\n", "", text, flags=re.M))  # an input that exists now


def _compile_apart(name: str, ninja_file: str, directory: str, pch: BindingHeaders | None, deadline: float,
                   binding_head: str | None) -> None:
    """The host file of a cut build compiled with the ninja file's C++ command (less the binding's head, with the
    host head precompiled where the builder keeps heads), and its object's undefined symbols read (binutils' nm):
    the device file is completed with the handles the host code launches (kernel_launch.instantiations) and
    the host object's compile taken out of the ninja file, which then compiles the device file and links. Raises
    CompileError where the host file does not compile or its object uses a kernel otherwise than by a launch."""
    what = f"Error building extension '{name}' (cut apart)"
    with open(ninja_file) as f:
        text = f.read()
    obj = os.path.splitext(hds.HOST_FILE)[0] + ".o"
    rule = re.compile(rf"^build {re.escape(obj)}: compile (\S+)\n", re.M)
    found = rule.findall(text)
    values = pch_heads.ninja_values(text)
    nm = shutil.which("nm")
    if len(found) != 1 or nm is None or "$" in found[0] + "".join(values.values()):
        raise CompileError(f"{what}: not the build's shape")
    cxx = shlex.split(values.get("cxx") or "c++")
    cflags = values.get("cflags", "")
    if binding_head is not None:
        cflags = pch_heads.without_head(cflags, binding_head)
    post = shlex.split(values.get("post_cflags", ""))
    include = []
    if pch is not None:  # the host head precompiled, once per builder and flags (named without the module)
        head_command = [*cxx, "-x", "c++-header", *shlex.split(pch_heads.EXTENSION_NAME.sub("", cflags))]
        key = hashlib.sha256(("\n".join(head_command + post) + "\n" + hds.HOST_HEAD).encode()).hexdigest()[:24]
        gch = pch.host_prefix(key, hds.HOST_HEAD, lambda header, out: [*head_command, header, "-o", out, *post],
                              deadline - time.monotonic(), wait=min(APART_HEAD_WAIT_S, deadline - time.monotonic()))
        if gch is not None:
            include = ["-include", gch[:-len(".gch")]]
    source = os.path.join(directory, found[0]) if not os.path.isabs(found[0]) else found[0]
    target = os.path.join(directory, obj)
    run([*cxx, *shlex.split(cflags), *include, "-c", source, "-o", target, *post], directory,
        deadline - time.monotonic(), what)
    listed = run([nm, "-u", "-C", target], directory, deadline - time.monotonic(), "nm")
    undefined = [line.split(None, 1)[1] for line in listed.splitlines() if line.split(None, 1)[:1] == ["U"]]
    with open(source) as f:
        kernels = kernel_launch.kernels_of(f.read())
    device = os.path.join(directory, hds.DEVICE_FILE)
    with open(device) as f:
        device_text = f.read()
    import torch.utils.cpp_extension as cpp  # late: the fork server imports this module

    ends = kernel_launch.instantiations(kernels, undefined, cpp.include_paths(), hds.device_names_of(device_text))
    if ends is None:
        raise CompileError(f"{what}: the host code names a kernel or a device symbol otherwise than by a launch")
    with open(device, "w") as f:
        f.write(hds.DEVICE_HEAD + ends[0] + device_text + ends[1])
    with open(ninja_file, "w") as f:
        f.write(rule.sub("", text))  # the host object is an input that exists now


def _finished(directory: str, target: str) -> bool:
    """Whether ninja finished ``target`` in ``directory`` (it logs a target once its command has succeeded)."""
    try:
        with open(os.path.join(directory, ".ninja_log")) as f:
            return any(line.rstrip("\n").split("\t")[3:4] == [target] for line in f if not line.startswith("#"))
    except OSError:
        return False


def _reuse_binding(name: str, sources: list, ninja_file: str, directory: str, pch: BindingHeaders,
                   timeout: float, head: str | None = None) -> str | None:
    """Put the binding object (main.cpp's) compiled before with the same text and flags in the build directory
    and take its compile out of the ninja file (distinct candidates of one task often share their binding file,
    and may name their modules anew: an object of a file that uses the name only to name the module is reused
    with its init function renamed, pch.name_free); returns None then, or the key to keep the object under once
    built. ``head``: the precompiled head in the ninja file's flags, not in the key (pch.binding_key)."""
    main = next((s for s in sources if os.path.basename(s) == "main.cpp"), None)
    if main is None:
        return None
    with open(main) as f:
        binding = f.read()
    key = pch_heads.binding_key(ninja_file, binding, head)
    found = pch.binding_object(key)
    if found is None:
        return key
    with open(ninja_file) as f:
        text = f.read()
    rule = re.compile(r"^build main\.o: compile [^\n]*\n", re.M)
    if len(rule.findall(text)) != 1:
        return None
    target = os.path.join(directory, "main.o")
    shutil.copyfile(found, target)
    # (a file that is not name_free has the module's name in its key: its object is this module's already)
    if pch_heads.name_free(binding) and not pch_heads.rename_module(target, name, timeout):
        os.unlink(target)
        return key  # compiled for this module, as ninja's file says
    with open(ninja_file, "w") as f:
        f.write(rule.sub("", text))  # main.o is now an input that exists, not a target
    return None


def _binding_head(sources: list) -> str | None:
    """The head the builder wrote on the build's main.cpp (pch.HEADS), or None."""
    main = next((s for s in sources if os.path.basename(s) == "main.cpp"), None)
    if main is None:
        return None
    with open(main) as f:
        return pch_heads.head_of(f.read(4096))


def inline_files(name: str, cpp_sources: list, cuda_sources, functions, options: dict,
                 cuda_implicit: bool | None = None, cuda_head: str | None = None) -> dict:
    """{file name: text} of a load_inline call, as load_inline writes them (implicit headers, bindings);
    ``cuda_implicit`` says whether the device code gets load_inline's implicit headers where it is not the same
    as for the C++ file (the light plan: its C++ file brings its own); ``cuda_head`` stands in for the implicit
    <torch/types.h> of the device code (the narrow plan: backends/narrow_head.py)."""
    cpp_sources = list(cpp_sources)
    implicit = not options.get("no_implicit_headers")
    cuda_implicit = implicit if cuda_implicit is None else cuda_implicit
    if implicit:
        cpp_sources.insert(0, "#include <torch/extension.h>")
    if functions is not None:
        names = functions if isinstance(functions, dict) else {f: f for f in functions}
        wrap = options.get("with_pytorch_error_handling", True)
        cpp_sources.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        cpp_sources += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{doc}");' if wrap else
                        f'm.def("{f}", {f}, "{doc}");' for f, doc in names.items()]
        cpp_sources.append("}")
    files = {"main.cpp": "\n".join(cpp_sources)}
    if cuda_sources:
        head = [cuda_head or "#include <torch/types.h>", *nvcc_steps.IMPLICIT.splitlines()[1:]] \
            if cuda_implicit else []
        files["cuda.cu"] = "\n".join(head + list(cuda_sources))
    return files


def _plans(req: dict, backend, light_headers: bool, apart: bool = False) -> list:
    """The builds to try in order, each (kind, sources for the key, {file: text}, options), the lightest first:
    "apart" (with ``apart``: host and device code compiled apart, backends/host_device_split.py), "narrow"
    (device code with the narrow torch head), "light" (<torch/types.h>), "written" (as written)."""
    options = backend.adjust_kwargs(dict(req["options"]))
    name = req["name"]
    if req["kind"] == "load":
        files = {f["name"]: f["text"] for f in req["files"]}
        return [("written", list(files.items()), files, options)]
    cpp, cuda, functions = req["cpp_sources"], req["cuda_sources"], req["functions"]
    plans = []
    if light_headers:
        light_cuda = backend.lighter_cuda_sources(cuda) if cuda else None
        light_cpp = backend.lighter_cpp_sources(cpp, options)
        cpp2, opt2 = light_cpp if light_cpp is not None else (cpp, options)
        implicit = not options.get("no_implicit_headers")
        narrow = backend.narrow_cuda_sources(cuda) if cuda and implicit else None
        cut = (backend.split_cuda_sources(cuda) if apart and cuda and implicit
               and hds.device_only_flags(opt2.get("extra_cuda_cflags")) else None)
        if cut is not None:
            files = inline_files(name, cpp2, None, functions, opt2)
            files[hds.HOST_FILE], files[hds.DEVICE_FILE] = cut.host, cut.device
            plans.append(("apart", sorted(files.items()), files, opt2))
        if narrow is not None:
            head, cuda_n = narrow
            files = inline_files(name, cpp2, cuda_n, functions, opt2, cuda_implicit=True, cuda_head=head)
            plans.append(("narrow", sorted(files.items()), files, opt2))
        if light_cuda is not None or light_cpp is not None:
            # The light C++ file brings its own headers; the device code keeps what load_inline would give it.
            files = inline_files(name, cpp2, light_cuda if light_cuda is not None else cuda, functions, opt2,
                                 cuda_implicit=implicit)
            plans.append(("light", sorted(files.items()), files, opt2))
    files = inline_files(name, cpp, cuda, functions, options)
    plans.append(("written", sorted(files.items()), files, options))
    return plans


def _remember_narrow_failure(unit: str) -> None:
    if len(_NARROW_FAILED) >= _NARROW_FAILED_MAX:
        _NARROW_FAILED.pop(next(iter(_NARROW_FAILED)))
    _NARROW_FAILED[unit] = True


def build_context(backend, build_env: dict) -> dict:
    """What besides the request names a build (requests.extension_unit): torch's version, the compiler, the backend
    and its build environment. The builder's own, and the trusted side's expectation of a remote builder's."""
    return {"torch": torch.__version__, "cxx": compiler_id(), "backend": backend.name, "env": build_env}


def plan_units(req: dict, backend, context: dict, light_headers: bool, apart: bool = True) -> list:
    """The units ``build`` tries for ``req`` (requests.normalise'd), in order: a remote build must come back as one
    of them (builder/ray_builds.py)."""
    return [requests.extension_unit(req["kind"], req["name"], key_sources, options, context)
            for _, key_sources, _, options in _plans(req, backend, light_headers, apart)]


def build(req: dict, backend, store, context: dict, timeout: float, max_bytes: int, light_headers: bool = True,
          compile_fn=compile_with_ninja, pch: BindingHeaders | None = None) -> dict:
    """Build an ``inline`` or ``load`` request (requests.normalise'd) in ``store``; returns the manifest with
    ``cached``. Raises BuildRefused (a flag) or CompileError (the compiler's message, with the backend's hint).
    ``pch``: where main.cpp's torch head comes precompiled from (compile_fn is then given it)."""
    flags.check_request(req["options"])
    deadline = time.monotonic() + timeout
    name = req["name"]
    plans = _plans(req, backend, light_headers, apart=pch is not None)
    for i, (kind, key_sources, files, options) in enumerate(plans):
        unit = requests.extension_unit(req["kind"], name, key_sources, options, context)
        if unit in _NARROW_FAILED:
            continue  # its narrow build failed before: straight to the next

        def make(directory, files=files, options=options):
            for fname, text in files.items():
                with open(os.path.join(directory, fname), "w") as f:
                    f.write(text)
            paths = [os.path.join(directory, f) for f in files]
            if pch is None:
                compile_fn(name, paths, options, directory, deadline - time.monotonic())
            elif kind == "apart":
                compile_fn(name, paths, options, directory, deadline - time.monotonic(), pch=pch, apart=True)
            else:
                compile_fn(name, paths, options, directory, deadline - time.monotonic(), pch=pch)
            return name + _LIB_EXT, name

        try:
            manifest, cached = store.get_or_build(unit, make, max_bytes)
            return {**manifest, "cached": cached, "python_module": options.get("is_python_module", True),
                    "plan": kind}
        except CompileError as exc:
            if kind in ("narrow", "apart"):
                # Any failure: the narrow head and the cut are the builder's choices, never a reason for the
                # candidate's build to fail, so the next build decides.
                _remember_narrow_failure(unit)
                continue
            if i + 1 < len(plans) and backend.needs_full_headers(str(exc)):
                continue  # the lighter headers lacked a declaration: built as written next
            hint = backend.build_error_hint(str(exc))
            raise CompileError(f"{exc}\n{hint}" if hint else str(exc)) from None
    raise AssertionError("unreachable: the last plan returns or raises")

"""Kernel tasks: a PyTorch reference program in the KernelBench file format plus its input configurations.

This module owns declaring and deriving input configurations, and instantiating the reference program for one
configuration (its init inputs, its inputs for a seed, its model); loading.py reads a task file into a Task. It
runs only trusted task code (the reference); it never sees candidate code.

The file format is KernelBench's: a module defining ``Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``
and module-level size constants. kbench adds one optional literal dict, ``KBENCH``, which a plain KernelBench file
does not have::

    KBENCH = {
        "level": 1,                      # 1, 2, 3 or "robust"; default from the folder name
        "tags": ["elementwise"],
        "backward": False,               # True when forward() returns gradients (robust-kbench backward form)
        "description": "one line",       # default: the module docstring's first line
        "configs": [                     # overrides of the module's size constants, one dict per configuration
            {"name": "small", "sizes": {"batch_size": 4, "dim": 1024}},
            {"name": "odd", "sizes": {"batch_size": 3, "dim": 3001}, "held_out": True},
            {"name": "large", "sizes": {"batch_size": 64, "dim": 65536}, "devices": ["cuda"]},
            {"name": "large-bf16", "sizes": {...}, "dtype": "bfloat16", "devices": ["cuda"], "held_out": True},
        ],
        "tolerance": {"float32": {"norm": 1e-4, "max": 1e-2}},  # per dtype; see compare.DEFAULT_TOLERANCES
        "tolerance_reason": "why this task needs a non-default tolerance",
        "input_ranges": {0: {"low": 0, "high": "num_embeddings"}},  # integer inputs' fresh draws (input_draws.py)
    }

A size override replaces the constant's assignment in the module before it runs, so constants derived from it
follow. ``dtype`` casts the floating-point inputs and the model's parameters. ``devices`` lists the backends'
device kinds the configuration is meant for (default: all); ``held_out`` configurations are never shown in the
prompt but decide correctness. ``input_ranges`` says, by input position, what an integer or boolean input
may hold (every timed call draws it afresh: input_draws.py); without it the range is derived from ``get_inputs``'s
own draws. A file without ``KBENCH`` (plain KernelBench) gets its own sizes (for the GPU, held
out) plus configurations derived for the CPU, on first use (kernelbench.py); its size constants may be expressions
(sizes.py).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import math
import threading
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from kbench_env.machine.device import Device
from kbench_env.tasks.sizes import apply_overrides, size_constants  # noqa: F401 - size_constants: part of this module's API
from kbench_env.tasks import pysource

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}

#: Dtype in which the reference is computed for a configuration of a given dtype (``reference_output``): higher
#: precision where the configuration's own would let the reference's rounding decide correctness.
REFERENCE_DTYPE = {
    torch.float32: torch.float64,
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float64: torch.float64,
}

_RNG_LOCK = threading.RLock()


@contextlib.contextmanager
def seeded(seed: int, cuda_index: int | None = None):
    """torch's global CPU generator forked and seeded with ``seed``, one thread at a time. Evaluations run in
    threads (``Evaluator.evaluate_many``): a thread drawing from the generator that another has just re-seeded
    would build the reference with other parameters than the candidate's worker gets, and correct kernels of
    linear, convolution and norm tasks would fail. ``cuda_index``: that GPU's default generator too (forked and
    seeded alike), for draws made on it."""
    devices = [] if cuda_index is None else [cuda_index]
    with _RNG_LOCK, torch.random.fork_rng(devices=devices):
        # the CPU generator only, as the fork: torch.manual_seed would also queue a seeding of every lazily
        # initialised accelerator (a formatted stack trace each time, ~1 ms apiece where there is none)
        torch.random.default_generator.manual_seed(seed)
        if cuda_index is not None:
            torch.cuda.default_generators[cuda_index].manual_seed(seed)
        yield


class TaskError(ValueError):
    """A task file that cannot be read or does not follow the format."""


@dataclass(frozen=True)
class Config:
    """One input configuration of a task: size overrides, dtype, visibility and target devices."""

    name: str
    sizes: dict = field(default_factory=dict)
    dtype: str = "float32"
    held_out: bool = False
    devices: tuple = ("cpu", "cuda")

    def runs_on(self, device: str) -> bool:
        return Device.parse(device).kind in self.devices

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "sizes": dict(self.sizes),
            "dtype": self.dtype,
            "held_out": self.held_out,
            "devices": list(self.devices),
        }

    @staticmethod
    def from_dict(d: dict) -> "Config":
        unknown = set(d) - {"name", "sizes", "dtype", "held_out", "devices"}
        if unknown:
            raise TaskError(f"unknown config keys {sorted(unknown)}")
        dtype = d.get("dtype", "float32")
        if dtype not in DTYPES:
            raise TaskError(f"config {d.get('name')!r}: dtype {dtype!r} is not one of {sorted(DTYPES)}")
        devices = tuple(d.get("devices", ("cpu", "cuda")))
        return Config(
            name=str(d["name"]),
            sizes=dict(d.get("sizes", {})),
            dtype=dtype,
            held_out=bool(d.get("held_out", False)),
            devices=devices,
        )


_DERIVE_LOCK = threading.Lock()


class _LazyConfigs:
    """``Task.configs``: the list given, or, when none was given (None), the task's ``derive()`` on first read
    (a plain KernelBench file's configurations cost reference runs: loading a folder must not pay them)."""

    def __get__(self, task, owner=None):
        if task is None:
            return None  # the dataclass field's default: derive when read
        configs = task.__dict__.get("_configs")
        if configs is None:
            with _DERIVE_LOCK:
                configs = task.__dict__.get("_configs")
                if configs is None:
                    configs = list(task.derive()) if task.derive is not None else []
                    task.__dict__["_configs"] = configs
        return configs

    def __set__(self, task, configs):
        task.__dict__["_configs"] = None if configs is None else list(configs)


@dataclass
class Task:
    """A reference program and its configurations. Instances are cheap; nothing is executed until asked:
    ``configs`` may be left to ``derive`` (a function returning them), called on first use."""

    name: str
    source: str
    path: str | None = None
    level: Any = None
    tags: list = field(default_factory=list)
    backward: bool = False
    description: str = ""
    configs: list = _LazyConfigs()
    tolerance: dict = field(default_factory=dict)
    tolerance_reason: str = ""
    input_ranges: dict = field(default_factory=dict)
    derive: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self):  # built modules and drawn pools stay behind (a task travels to other processes without)
        return {k: v for k, v in self.__dict__.items() if k not in ("_modules", "_draws", "_drawn_on_cpu")}

    # ------------------------------------------------------------------ configurations
    def configs_for(self, device: str) -> list[Config]:
        """The configurations that run on ``device`` ("cpu", "cuda", "cuda:1")."""
        return [c for c in self.configs if c.runs_on(device)]

    def require_configs(self, device: str) -> list[Config]:
        """``configs_for(device)``, or a TaskError saying the task has none there (the task's limit: no
        candidate is evaluated, or charged, for it)."""
        configs = self.configs_for(device)
        if not configs:
            kind = Device.parse(device).kind
            where = sorted({d for c in self.configs for d in c.devices})
            raise TaskError(f"task {self.name} has no input configuration for {device} (its configurations are for "
                            f"{', '.join(where) or 'no device'}): run it on {' or '.join(where) or 'another device'}, "
                            f"or give {self.path or 'the task file'} a KBENCH block with configurations for {kind}")
        return configs

    def shown_configs(self, device: str) -> list[Config]:
        return [c for c in self.configs_for(device) if not c.held_out]

    def config(self, name: str) -> Config:
        for c in self.configs:
            if c.name == name:
                return c
        raise KeyError(f"task {self.name} has no configuration {name!r}; it has {[c.name for c in self.configs]}")

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ instantiation
    def module(self, config: Config | None = None) -> types.ModuleType:
        """The task file executed with ``config``'s size overrides applied to its constants (cached per config)."""
        key = (config.name, json.dumps(config.sizes, sort_keys=True, default=repr)) if config else None
        cache = self.__dict__.setdefault("_modules", {})
        if key not in cache:
            cache[key] = build_module(self.source, config.sizes if config else {}, self.path or f"<task {self.name}>")
        return cache[key]

    def instantiate(self, config: Config, seed: int, device: str = "cpu", init_seed: int | None = None):
        """Return ``(module, init_inputs, inputs)`` for ``config``: inputs drawn with ``seed``, cast and moved."""
        mod = self.module(config)
        dtype = DTYPES[config.dtype]
        init_inputs = list(mod.get_init_inputs())
        where = Device.parse(device)
        # a configuration whose draw failed on the GPU once is drawn on the CPU from then on (not tried again)
        cpu_only = self.__dict__.setdefault("_drawn_on_cpu", set())
        inputs = _drawn_on(mod, seed, where) if where.is_cuda and config.name not in cpu_only else None
        if inputs is None and where.is_cuda:
            cpu_only.add(config.name)
        if inputs is None:
            with seeded(seed):
                inputs = mod.get_inputs()
        return mod, init_inputs, [cast_input(x, dtype, device) for x in inputs]

    def make_model(self, mod: types.ModuleType, init_inputs: list, init_seed: int, dtype: torch.dtype, device: str):
        """Construct the reference ``Model`` with ``init_seed`` (the candidate's ``ModelNew`` gets the same seed)."""
        with seeded(init_seed):
            model = mod.Model(*init_inputs)
        return model.to(device=device, dtype=dtype).eval() if isinstance(model, torch.nn.Module) else model

    def reference(self, config: Config, seed: int, init_seed: int, device: str = "cpu", upcast: bool = True):
        """Run the reference for ``config``: returns ``(inputs, output)`` (see ``reference_output``)."""
        mod, init_inputs, inputs = self.instantiate(config, seed, device)
        return inputs, self.reference_output(mod, init_inputs, inputs, config, init_seed, device, upcast)

    def reference_output(self, mod, init_inputs, inputs, config: Config, init_seed: int, device: str = "cpu",
                         upcast: bool = True):
        """The reference's output on ``inputs`` (which stay untouched).

        ``inputs`` are in the configuration's dtype (what a candidate gets). With ``upcast`` the reference computes
        in higher precision (float64 for float32, float32 for half precision: REFERENCE_DTYPE) from the
        same, already rounded inputs and parameters, so that its own rounding does not decide correctness; if the
        program does not run in that precision it falls back to the configuration's dtype.
        """
        return self.reference_runner(mod, init_inputs, config, init_seed, device, upcast)(inputs)

    def reference_runner(self, mod, init_inputs, config: Config, init_seed: int, device: str = "cpu",
                         upcast: bool = True):
        """``reference_output`` as a function of the inputs, with the model built once (the evaluator checks
        several timed calls of a configuration against it). Reference models hold no state between calls: they
        are in eval mode, and backward tasks take their gradients with ``torch.autograd.grad``."""
        dtype = DTYPES[config.dtype]
        model = self.make_model(mod, init_inputs, init_seed, dtype, device)
        ref_dtype = REFERENCE_DTYPE.get(dtype, dtype) if upcast else dtype
        up_model = None
        if ref_dtype != dtype:
            try:
                up_model = copy.deepcopy(model).to(ref_dtype) if isinstance(model, torch.nn.Module) else model
            except (RuntimeError, TypeError, NotImplementedError):
                up_model = None

        def run(inputs):
            if up_model is not None:
                try:
                    up_inputs = [(x.to(ref_dtype, copy=True) if x.is_floating_point() else x.clone())
                                 if isinstance(x, torch.Tensor) else x for x in inputs]
                    return _call(up_model, up_inputs, self.backward, copy=False)  # copies already
                except (RuntimeError, TypeError, NotImplementedError):
                    pass
            return _call(model, inputs, self.backward)

        return run

    def input_shapes(self, config: Config) -> list:
        """Shapes and dtypes of the inputs of ``config`` (``get_inputs`` on the meta device: nothing allocated)."""
        mod = self.module(config)
        inputs = meta_inputs(mod)
        dtype = DTYPES[config.dtype]
        return [describe_value(cast_input(x, dtype, x.device) if isinstance(x, torch.Tensor) else x) for x in inputs]

    def to_dict(self, shapes: bool = False) -> dict:
        d = {
            "name": self.name,
            "level": self.level,
            "backward": self.backward,
            "tags": list(self.tags),
            "description": self.description,
            "path": self.path,
            "configs": [],
        }
        for c in self.configs:
            cd = c.to_dict()
            if shapes:
                try:
                    cd["inputs"] = self.input_shapes(c)
                except Exception as exc:  # a broken configuration is reported, not hidden
                    cd["inputs"] = f"error: {exc}"
            d["configs"].append(cd)
        return d


# ---------------------------------------------------------------------- helpers


def _drawn_on(mod: types.ModuleType, seed: int, device: Device) -> list | None:
    """``get_inputs()`` drawn on the GPU ``device`` (its factory calls made there, its generator seeded with
    ``seed``), or None where the program does not run so (it mixes in tensors made on the CPU, or reads values
    back with ``.numpy()``): the caller draws on the CPU then. On the GPU a configuration's inputs cost the trusted
    side microseconds rather than the CPU's nanoseconds an element, drawn under the one lock every evaluation
    draws under. The values differ from the CPU's draw of the same seed; both sides of a check get the same ones."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    try:
        with seeded(seed, index), torch.device(f"cuda:{index}"):
            return list(mod.get_inputs())
    except Exception:  # noqa: BLE001 - any failure on the device: the CPU's draw decides what the program does
        return None


def cast_input(x, dtype: torch.dtype, device: str):
    if isinstance(x, torch.Tensor):
        if x.is_floating_point():
            x = x.to(dtype)
        return x.to(device)
    return x


def _call(model, inputs, backward: bool, copy: bool = True):
    """Call a reference model on copies of ``inputs`` (``copy=False``: they are this call's own already);
    forward-only tasks run under no_grad (backward tasks use autograd inside)."""
    args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs] if copy else list(inputs)
    if backward:
        return model(*args)
    with torch.no_grad():
        return model(*args)


def describe_value(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    return repr(x)


def build_module(source: str, sizes: dict, filename: str) -> types.ModuleType:
    tree = pysource.parse(source, filename=filename)
    if sizes:
        missing = set(sizes) - apply_overrides(tree, sizes)
        tree = ast.fix_missing_locations(tree)
        if missing:
            raise TaskError(f"{filename}: size override(s) {sorted(missing)} name no module-level constant")
    mod = types.ModuleType("kbench_task")
    mod.__file__ = filename
    exec(pysource.compile_tree(tree, filename), mod.__dict__)
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, need):
            raise TaskError(f"{filename}: a task file must define {need} (KernelBench format)")
    return mod


def meta_inputs(mod) -> list:
    """``get_inputs()`` with tensors created on the meta device (shapes only), or on the CPU if that fails."""
    with seeded(0):
        try:
            with torch.device("meta"):
                return list(mod.get_inputs())
        except Exception:  # noqa: BLE001 - data-dependent input code: fall back to real tensors
            return list(mod.get_inputs())


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))

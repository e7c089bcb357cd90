"""Cheap questions about a task file at given sizes: how large are its inputs and model, does its reference run.

This module owns answering them without computing anything where it can: the file runs with the size overrides
applied, its inputs and model are built on the meta device (shapes only, no memory), and its forward runs there
too, which is where the shape constraints a scaling can break show up (``embed_dim % num_heads``, channels
divisible by groups, a spatial size too small for the kernel). The model runs in eval mode, as the evaluator runs it. Two
layer kinds that the meta device runs slowly through Python decompositions get shape-only stand-ins that make the
same checks: recurrent layers (unrolled step by step: seconds per run) and batch norms (milliseconds each: a
second for a ResNet-101). A model that cannot be built on the meta device (``.item()`` in its constructor) is
built with its small tensors on the CPU and its large ones on the meta device (else all on the CPU), then moved. Where the meta device cannot run the forward (an operator without a meta
kernel), a configuration small enough for the CPU is run there instead. Answers are remembered per size overrides.
"""

from __future__ import annotations

import contextlib
import re
import types

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from kbench_env.tasks.task import build_module, describe_value, seeded


def _meta_unsupported(exc: Exception) -> bool:
    """The meta device could not run the program (as opposed to the program rejecting its sizes)."""
    return isinstance(exc, NotImplementedError) or bool(re.search(r"\bmeta\b", str(exc), re.I))


def _rnn_shapes(self, input, hx=None):
    """``nn.LSTM``/``GRU``/``RNN`` forward on shapes only: the layer's own argument checks, then outputs of the
    right shapes."""
    if not isinstance(input, torch.Tensor):  # a PackedSequence: no stand-in
        raise NotImplementedError("packed sequences on the meta device")
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0 if self.batch_first else 1)
    if hx is not None and not batched:
        hx = tuple(h.unsqueeze(1) for h in hx) if isinstance(hx, tuple) else hx.unsqueeze(1)
    if hx is None:
        self.check_input(x, None)
    else:
        self.check_forward_args(x, hx, None)
    batch, seq = (x.shape[0], x.shape[1]) if self.batch_first else (x.shape[1], x.shape[0])
    d = 2 if self.bidirectional else 1
    h_out = self.proj_size if getattr(self, "proj_size", 0) > 0 else self.hidden_size
    out = x.new_empty((batch, seq, d * h_out) if self.batch_first else (seq, batch, d * h_out))
    h = x.new_empty(d * self.num_layers, batch, h_out)
    c = x.new_empty(d * self.num_layers, batch, self.hidden_size)
    if not batched:
        out, h, c = out.squeeze(0 if self.batch_first else 1), h.squeeze(1), c.squeeze(1)
    return (out, (h, c)) if isinstance(self, torch.nn.LSTM) else (out, h)


def _batch_norm_shapes(self, input):
    """``nn.BatchNorm*d`` forward (eval mode) on shapes only, with the layer's own checks."""
    self._check_input_dim(input)
    if input.shape[1] != self.num_features:
        raise RuntimeError(f"batch norm over {self.num_features} features got input of shape {tuple(input.shape)}")
    return torch.empty_like(input)


class _SmallOnCpu(TorchFunctionMode):
    """Tensor factories called without a device make large tensors on the meta device and small ones on the
    CPU: a constructor that reads values (drop-path rates from ``torch.linspace(...).item()``) gets real ones,
    and its weights are still never allocated."""

    SMALL = 4096

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _device_constructors() and kwargs.get("device") is None:
            out = func(*args, **{**kwargs, "device": "meta"})
            if isinstance(out, torch.Tensor) and out.numel() <= self.SMALL:
                return func(*args, **{**kwargs, "device": "cpu"})
            return out
        return func(*args, **kwargs)


_STAND_INS = ((torch.nn.RNNBase, _rnn_shapes), (torch.nn.modules.batchnorm._BatchNorm, _batch_norm_shapes))


def _stand_ins(model) -> None:
    """Give this (meta) model's slow layers their shape-only forwards (on these instances only)."""
    for mod in model.modules():
        for kind, fn in _STAND_INS:
            if isinstance(mod, kind):
                mod.forward = types.MethodType(fn, mod)


def _numel(values) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel()
    if isinstance(values, (tuple, list)):
        return sum(_numel(x) for x in values)
    return 0


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters()) if isinstance(model, torch.nn.Module) else 0


class Prober:
    """One task file's answers, per size overrides (``sizes``: {constant: value}, as a configuration has)."""

    def __init__(self, source: str, filename: str):
        self.source, self.filename = source, filename
        self._inputs: dict = {}
        self._params: dict = {}
        self._runs: dict = {}
        self._models: dict = {}  # meta-built models, for the run that follows the parameter count

    @staticmethod
    def _key(sizes: dict):
        return tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in sizes.items()))

    def _module(self, sizes: dict):
        return build_module(self.source, sizes, self.filename)

    def inputs(self, sizes: dict):
        """``(input elements, signature)``, or None if the file rejects these sizes before building a model. The
        signature (input shapes and dtypes, init inputs) tells two configurations' problems apart."""
        key = self._key(sizes)
        if key not in self._inputs:
            self._inputs[key] = None
            try:
                m = self._module(sizes)
                with seeded(0), torch.device("meta"):
                    init = list(m.get_init_inputs())
                    inputs = list(m.get_inputs())
                sig = (tuple(describe_value(x) for x in inputs), tuple(describe_value(x) for x in init))
                self._inputs[key] = (_numel(inputs), sig)
            except Exception:  # noqa: BLE001 - the file rejects these sizes
                pass
        return self._inputs[key]

    def params(self, sizes: dict, may_build_on_cpu: bool = True) -> int | None:
        """Parameter elements of the model, or None if it cannot be built (on the meta device, else, where the
        meta device cannot and ``may_build_on_cpu``, on the CPU)."""
        key = (self._key(sizes), may_build_on_cpu)
        if key not in self._params:
            built = self._build(sizes, may_build_on_cpu)
            self._params[key] = None if built is None else _params(built[1])
            if built is not None:
                self._models[key[0]] = built
        return self._params[key]

    def _build(self, sizes: dict, may_build_on_cpu: bool):
        """``(module, model on the meta device)``, or None if the model cannot be built."""
        if self.inputs(sizes) is None:
            return None
        m = self._module(sizes)
        try:
            with seeded(0), torch.device("meta"):
                return m, m.Model(*m.get_init_inputs())
        except Exception as exc:  # noqa: BLE001 - the file rejects these sizes, or the meta device its code
            if not (_meta_unsupported(exc) and may_build_on_cpu):
                return None
        for where in (_SmallOnCpu, contextlib.nullcontext):  # a constructor that reads a value: small tensors real
            try:  # (else all of it), then moved to the meta device
                with seeded(0), where():
                    model = m.Model(*m.get_init_inputs())
                return m, model.to("meta") if isinstance(model, torch.nn.Module) else model
            except Exception:  # noqa: BLE001
                continue
        return None

    def runs(self, sizes: dict, may_run_on_cpu: bool) -> int | None:
        """Elements of the reference's output with these sizes if it runs, else None: run on the meta device,
        or (where the meta device cannot run it and ``may_run_on_cpu``) for real on the CPU."""
        key = self._key(sizes)
        if (key, may_run_on_cpu) not in self._runs:
            self._runs[key, may_run_on_cpu] = self._run(sizes, key, may_run_on_cpu)
        return self._runs[key, may_run_on_cpu]

    def _run(self, sizes: dict, key, may_run_on_cpu: bool) -> int | None:
        built = self._models.pop(key, None) or self._build(sizes, may_run_on_cpu)
        if built is None:
            return None
        m, model = built
        try:
            if isinstance(model, torch.nn.Module):
                model.eval()
                _stand_ins(model)
            with seeded(0), torch.device("meta"), torch.no_grad():
                return _numel(model(*m.get_inputs()))
        except Exception as exc:  # noqa: BLE001 - the reference's own failure decides
            if not _meta_unsupported(exc):
                return None
        if not may_run_on_cpu:
            return None
        try:
            m = self._module(sizes)
            with seeded(0), torch.no_grad():
                model = m.Model(*m.get_init_inputs())
                if isinstance(model, torch.nn.Module):
                    model.eval()
                return _numel(model(*m.get_inputs()))
        except Exception:  # noqa: BLE001
            return None

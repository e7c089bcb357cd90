"""How a configuration's integer and boolean inputs are drawn afresh for every timed call (ids, indices, labels,
masks), within what the reference accepts.

Floating inputs get fresh noise per timed call (pipeline/revealed_inputs.py, pipeline/gpu_blocks.py); integers
cannot take noise, and an input that repeats in every timed call lets a candidate return a cached output. So each
integer or boolean tensor input gets an ``IntegerDraw``:

- declared by the task (``KBENCH["input_ranges"]``, by the input's position in ``get_inputs()``; preferred when
  present): ``{"low": 0, "high": "num_embeddings"}`` draws uniformly in [low, high) as ``torch.randint`` does (a
  bound may name one of the module's size constants, so a configuration's overrides follow);
  ``{"values": [-1, 1]}`` draws from a set; ``{"fixed": "why"}`` keeps the input as made, for the reason given.
  The values ``get_inputs`` itself makes must lie in the declared range (a declaration that contradicts the task
  is a TaskError);
- derived otherwise from ``DRAWS`` calls of the task's ``get_inputs`` (seeds 0, 1, ...): every element of a fresh
  draw is one of the values those calls made, chosen at random from all of them, so the values (and their
  frequencies: a mask's density, a skewed id distribution) are the task's own and never leave what the reference
  was built for. An input that is the same in every draw (a constant, ``arange`` positions) cannot vary: it is
  kept as made, and says so. What this cannot see is structure across elements (sorted ids, offsets, a bound that
  differs per position): such a task declares its inputs' ranges instead.

A configuration none of whose inputs varies gets its outputs poisoned between timed blocks instead (blocks.py,
gpu_blocks.py), so that an output kept from an earlier call reads as garbage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kbench_env.tasks.task import Config, Task, TaskError, meta_inputs

#: Calls of get_inputs a derived draw pools its values from.
DRAWS = 4
#: At most this many pooled values are kept per input (a draw picks among them).
POOL_MAX = 1 << 20


@dataclass
class IntegerDraw:
    """One integer or boolean input's fresh draw: uniform in [low, high), or one of ``values`` per element (a
    declared set, or the pooled values of the task's own draws), or ``fixed`` (why it cannot vary: kept as
    made). ``source`` says whether the task declared it or it was derived from its draws."""

    source: str
    low: int | None = None
    high: int | None = None
    values: torch.Tensor | None = None
    fixed: str | None = None

    @property
    def varies(self) -> bool:
        return self.fixed is None

    def draw(self, shape, generator: torch.Generator, dtype: torch.dtype, device) -> torch.Tensor:
        """A fresh tensor of ``shape`` and ``dtype`` on ``device`` (the generator's device), from ``generator``."""
        if self.values is None:
            return torch.randint(self.low, self.high, tuple(shape), generator=generator, device=device, dtype=dtype)
        pool = self._values_on(device)
        index = torch.randint(pool.numel(), (max(1, _numel(shape)),), generator=generator, device=device)
        # index_select, not pool[index]: the CPU's advanced indexing costs ~10x more for large draws (measured
        # 16k elements: 0.02 ms against 4.7 ms on a loaded 2-core machine)
        return pool.index_select(0, index)[:_numel(shape)].view(tuple(shape)).to(dtype)

    def describe(self) -> str:
        if self.fixed is not None:
            return f"fixed ({self.fixed})"
        if self.values is None:
            return f"uniform in [{self.low}, {self.high}) ({self.source})"
        return f"one of {self.values.unique().numel()} values per element ({self.source})"

    def _values_on(self, device) -> torch.Tensor:
        cache = self.__dict__.setdefault("_on", {})
        key = str(device)
        if key not in cache:
            cache[key] = self.values.to(device)
        return cache[key]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def input_draws(task: Task, config: Config) -> list:
    """Per input of ``config`` (in ``get_inputs()`` order): its ``IntegerDraw`` if it is an integer or boolean
    tensor, else None. Cached on the task per configuration."""
    cache = task.__dict__.setdefault("_draws", {})
    if config.name not in cache:
        cache[config.name] = _make(task, config)
    return cache[config.name]


def varies(originals: list, draws: list | None) -> bool:
    """Whether any input of a timed call is fresh: a floating tensor (it takes noise) or a drawn integer one."""
    for i, x in enumerate(originals):
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            continue
        if x.is_floating_point() or x.is_complex():
            return True
        d = draws[i] if draws and i < len(draws) else None
        if d is not None and d.varies:
            return True
    return False


def _make(task: Task, config: Config) -> list:
    mod = task.module(config)
    shapes = meta_inputs(mod)
    integer = [isinstance(x, torch.Tensor) and not (x.is_floating_point() or x.is_complex()) for x in shapes]
    declared = _declared(task, mod, len(shapes))
    if not any(integer):
        return [None] * len(shapes)
    draws = []
    for seed in range(DRAWS):  # only the integer inputs are kept (a GPU configuration's floats take gigabytes)
        made = task.instantiate(config, seed)[2]
        draws.append([x if is_int else None for x, is_int in zip(made, integer)])
        del made
    out = []
    for i, is_int in enumerate(integer):
        if not is_int:
            out.append(None)
            continue
        seen = [d[i] for d in draws]
        if i in declared:
            out.append(_check_declared(task, config, i, declared[i], seen[0]))
        else:
            out.append(_derived(seen))
    return out


def _declared(task: Task, mod, count: int) -> dict:
    out = {}
    for key, spec in (task.input_ranges or {}).items():
        try:
            i = int(key)
        except (TypeError, ValueError):
            raise TaskError(f"{task.name}: KBENCH input_ranges key {key!r} is not an input position") from None
        if not 0 <= i < count:
            raise TaskError(f"{task.name}: KBENCH input_ranges names input {i}; get_inputs() makes {count}")
        if not isinstance(spec, dict) or len({"low", "values", "fixed"} & set(spec)) != 1:
            raise TaskError(f"{task.name}: KBENCH input_ranges[{i}] must be {{'low': .., 'high': ..}}, "
                            f"{{'values': [..]}} or {{'fixed': 'why'}}; got {spec!r}")
        if "fixed" in spec:
            out[i] = IntegerDraw("declared", fixed=str(spec["fixed"]))
        elif "values" in spec:
            out[i] = IntegerDraw("declared", values=torch.tensor(list(spec["values"])))
        else:
            low, high = _bound(task, mod, spec["low"]), _bound(task, mod, spec.get("high"))
            if high <= low:
                raise TaskError(f"{task.name}: KBENCH input_ranges[{i}] is empty: [{low}, {high})")
            out[i] = IntegerDraw("declared", low=low, high=high)
    return out


def _bound(task: Task, mod, v) -> int:
    if isinstance(v, str):
        if not isinstance(getattr(mod, v, None), int):
            raise TaskError(f"{task.name}: KBENCH input_ranges names {v!r}, which is no integer constant of the task")
        return int(getattr(mod, v))
    if not isinstance(v, int):
        raise TaskError(f"{task.name}: KBENCH input_ranges bound {v!r} is neither an integer nor a constant's name")
    return v


def _check_declared(task: Task, config: Config, i: int, d: IntegerDraw, made: torch.Tensor) -> IntegerDraw:
    """``d``, once the values get_inputs makes are seen to lie in it (the declaration must describe the task)."""
    if d.fixed is not None or made.numel() == 0:
        return d
    if d.values is not None:
        ok = bool(torch.isin(made.to(d.values.dtype), d.values).all())
    else:
        ok = int(made.min()) >= d.low and int(made.max()) < d.high
    if not ok:
        raise TaskError(f"{task.name}: configuration {config.name!r}: get_inputs() made input {i} with values in "
                        f"[{int(made.min())}, {int(made.max())}], outside its declared range: {d.describe()}")
    return d


def _derived(seen: list) -> IntegerDraw:
    first = seen[0]
    if any(s.shape != first.shape for s in seen):
        return IntegerDraw("derived", fixed=f"its shape differs between draws of get_inputs ({first.shape}, ...): "
                                            "declare its range in KBENCH input_ranges")
    if first.numel() == 0:
        return IntegerDraw("derived", fixed="it is empty")
    if all(torch.equal(s, first) for s in seen[1:]):
        return IntegerDraw("derived", fixed=f"get_inputs() made the same values in {len(seen)} draws")
    pool = torch.cat([s.reshape(-1).cpu() for s in seen])[:POOL_MAX]
    return IntegerDraw("derived", values=pool)

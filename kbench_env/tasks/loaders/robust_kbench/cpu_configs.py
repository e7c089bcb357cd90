"""CPU configurations for robust-kbench tasks whose own configurations are all too large for the CPU.

robust-kbench sizes its tasks for a GPU (``tasks/layernorm``: 32 x 64 x 256 x 256 inputs; most of its
``kernelbench/level_*`` tasks likewise), so without this more than half of its tasks had no configuration a CPU
evaluation could use. From the task's first configuration this derives, as ``task.derive_configs`` does for plain
KernelBench files:

- a small one (shown): every integer setting of 16 or more (batch sizes, dimensions, channel counts; not kernel
  sizes, strides or dimension indices), including the integer defaults of ``Model.__init__`` and ``get_inputs``
  that the configuration leaves out, scaled down by a common power of two (each at least 4, or 1 if need be)
  until the inputs, parameters and output hold at most ``CPU_ELEMENT_BUDGET`` elements (or, where sizes the file
  fixes keep it larger, at most ``robust_kbench.CPU_ELEMENTS``); where no common factor gives a running reference
  (a shape constraint the scaling broke, such as ``hidden = heads * head_dim``), settings are halved one group of
  equal values (or one setting, or two) at a time, largest first, keeping each step that still runs;
- a held-out one with odd sizes (each scaled setting above 8 made odd: one less, or two more), or, where odd sizes
  break a constraint, three quarters of the small sizes, or one setting made odd, so that a kernel specialised to
  the shown shapes fails.

Sizes are searched on the meta device (shapes only, milliseconds); each derived configuration is then run once for
real on the CPU, and one that does not run is not used. Also here: the check, on the CPU, that the reference is
deterministic (``check_deterministic``).
"""

from __future__ import annotations

import inspect
from typing import Callable

import torch

from kbench_env.tasks.loaders.kernelbench import CPU_ELEMENT_BUDGET, odd_size
from kbench_env.tasks.task import TaskError, seeded

#: Integer settings at least this large are sizes to scale; smaller ones (kernel sizes, strides, dims) stay.
SCALE_FROM = 16
MIN_SIZE = 4


def int_defaults(fn) -> dict:
    """The integer (not bool) keyword defaults of ``fn``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params
            if p.default is not inspect.Parameter.empty and type(p.default) is int}


def _is_size(v) -> bool:
    return type(v) is int and v >= SCALE_FROM


def _map(init: dict, inp: dict, fn) -> tuple[dict, dict]:
    return ({k: fn(k, v) for k, v in init.items()}, {k: fn(k, v) for k, v in inp.items()})


def derive_cpu_settings(rk, init: dict, inp: dict, probe: Callable, budget: int = CPU_ELEMENT_BUDGET,
                        limit: int = 0) -> list:
    """``[(init, inp, probe result, held_out)]``: a small configuration and, where one runs, an odd-sized one
    (module docstring). ``probe(init, inp, devices)`` runs the task (read._probe) and raises TaskError
    when it does not; its result has ``numel``. Where the settings cannot bring the task within ``budget`` elements
    (a size the file fixes, such as 224 x 224 images), up to ``limit`` is accepted. Empty when nothing small runs."""
    init = {**int_defaults(rk.Model.__init__), **init}
    inp = {**int_defaults(rk.get_inputs), **inp}
    if not any(_is_size(v) for v in (*init.values(), *inp.values())):
        return []

    def size_of(i, j) -> int | None:  # elements of inputs, parameters and output, from shapes only where possible
        try:
            return probe(i, j, ("meta", "cpu") if _fits_inputs(i, j) else ("meta",))["numel"]
        except TaskError:
            return None

    def _fits_inputs(i, j) -> bool:  # a real run is only tried once the inputs alone are small
        try:
            return probe(i, j, ("meta",), forward=False)["numel"] <= budget
        except TaskError:
            return False

    def runs(i, j):
        try:
            return probe(i, j, ("cpu",))
        except TaskError:
            return None

    small = None
    # sizes the settings do not reach (224 x 224 images) may keep it larger: then down to 1, within ``limit``
    for b, lo in ((budget, MIN_SIZE), (max(budget, limit), 1)):
        small = _common_factor(init, inp, size_of, runs, b, lo) or _halving(init, inp, size_of, runs, b, lo)
        if small is not None:
            break
    if small is None:
        return []
    s_init, s_inp, s_probe = small
    scaled = {(w, k) for w, d, sd in (("init", init, s_init), ("input", inp, s_inp)) for k in d if d[k] != sd[k]}

    def other_shapes(i, j):  # a variant the inputs do not see (only out_channels odd) is no held-out one
        got = runs(i, j)
        same = got is not None and "in_shapes" in got and got["in_shapes"] == s_probe.get("in_shapes")
        return None if same else got

    return [(s_init, s_inp, s_probe, False)] + _held_out(s_init, s_inp, scaled, other_shapes)


def _held_out(init: dict, inp: dict, keys: set, runs: Callable) -> list:
    """``[(init, inp, probe result, True)]``: the settings ``keys`` (``("init"|"input", name)``) made odd (one less,
    or two more; those above 8), or else three quarters of themselves, or else one setting at a time made odd
    (largest first, down to 4: where sizes are tied by a constraint, a batch size alone may still change),
    whichever runs first; [] if none does."""
    def odd(v):
        return odd_size(v) if v > 8 else v

    def variant(fn, chosen):
        i = {k: fn(v) if ("init", k) in chosen else v for k, v in init.items()}
        j = {k: fn(v) if ("input", k) in chosen else v for k, v in inp.items()}
        return (i, j) if (i, j) != (init, inp) else None

    def odd_any(v):  # for one setting at a time: sizes scaled down to 4 or 8 may change too
        return odd_size(v) if v >= MIN_SIZE else v

    value = {("init", k): v for k, v in init.items()} | {("input", k): v for k, v in inp.items()}
    single = sorted((key for key in keys if value[key] >= MIN_SIZE), key=lambda key: (-value[key], key))
    tries = [(odd, keys), (lambda v: max(MIN_SIZE, v * 3 // 4), keys)] + [(odd_any, {key}) for key in single]
    for fn, chosen in tries:
        cand = variant(fn, chosen)
        got = runs(*cand) if cand else None
        if got is not None:
            return [(cand[0], cand[1], got, True)]
    return []


def derive_held_out(rk, init: dict, inp: dict, probe: Callable, devices: tuple = ("cpu",)) -> list:
    """``[(init, inp, probe result, True)]``: for a task whose configurations hold out no input shape the device
    was not shown, the shown configuration ``(init, inp)`` with odd sizes (as ``derive_cpu_settings``' held-out
    one; every integer setting of 16 or more, the functions' integer defaults included), so that a kernel
    specialised to the one shape it was shown fails; [] if no such variant runs on ``devices`` (the CPU; for a
    GPU, the meta device: shapes only, sizes a CPU would not hold) or changes no input shape."""
    init = {**int_defaults(rk.Model.__init__), **init}
    inp = {**int_defaults(rk.get_inputs), **inp}
    try:
        shown = probe(init, inp, devices)["in_shapes"]
    except TaskError:  # the forward does not run there (``.item()`` on the meta device): nothing derived
        return []

    def runs(i, j):
        try:
            got = probe(i, j, devices)
        except TaskError:
            return None
        return got if got["in_shapes"] != shown else None  # a variant the inputs do not see is no held-out one

    # the sizes first; where those do not reach the inputs (a small configuration: 4 x 8 x 8), smaller settings
    for least in (SCALE_FROM, MIN_SIZE):
        keys = {(w, k) for w, d in (("init", init), ("input", inp)) for k, v in d.items()
                if type(v) is int and v >= least}
        found = _held_out(init, inp, keys, runs) if keys else []
        if found:
            return found
    return []


def _common_factor(init, inp, size_of, runs, budget, lo):
    last = None
    for step in range(1, 40):
        f = 0.5 ** step
        i, j = _map(init, inp, lambda k, v: max(lo, int(v * f)) if _is_size(v) else v)
        if (i, j) == last:  # every size is at its minimum
            return None
        last = (i, j)
        n = size_of(i, j)
        if n is None or n > budget:
            continue
        got = runs(i, j)
        return (i, j, got) if got is not None else None
    return None


def _halving(init, inp, size_of, runs, budget, lo):
    """Halve one group of equal-valued sizes at a time (then single settings, then pairs), largest first, keeping
    each step whose shapes still work, until the configuration fits."""
    i, j = dict(init), dict(inp)
    for _ in range(200):
        n = size_of(i, j)
        if n is not None and n <= budget:
            got = runs(i, j)
            return (i, j, got) if got is not None else None
        keys = [(d, k) for d, o in ((i, init), (j, inp)) for k in d
                if _is_size(o[k]) and d[k] >= 2 * lo]
        values = sorted({d[k] for d, k in keys}, reverse=True)
        tries = [[(d, k) for d, k in keys if d[k] == v] for v in values]
        by_size = sorted(keys, key=lambda dk: -dk[0][dk[1]])
        tries += [[dk] for dk in by_size if len(tries[values.index(dk[0][dk[1]])]) > 1]
        tries += [[a, b] for x, a in enumerate(by_size) for b in by_size[x + 1:]]  # hidden = heads * head_dim
        for group in tries:
            ti, tj = dict(i), dict(j)
            for d, k in group:
                (ti if d is i else tj)[k] = d[k] // 2
            if size_of(ti, tj) is not None:
                i, j = ti, tj
                break
        else:
            return None
    return None


def check_deterministic(rk, init: dict, inp: dict, where: str) -> None:
    """Raise TaskError when robust-kbench's forward gives different outputs for the same inputs and parameters
    (it draws random numbers: ``kernelbench/level_2/task_83`` applies ``F.dropout(..., training=True)``). No
    kernel can be checked against such a reference: an honest one fails and the candidate would pay for it, so
    the task is reported and skipped instead (robust-kbench's own filter marks that task too). Run once on the
    CPU, on a configuration small enough for it."""
    outs = []
    for draw in (1, 2):
        with seeded(0):
            inputs = [x.detach() if isinstance(x, torch.Tensor) else x for x in rk.get_inputs(**inp)]
            model = rk.Model(**init)
        if isinstance(model, torch.nn.Module):
            model.eval()
        with seeded(draw), torch.no_grad():
            outs.append(model(*inputs, fn=rk.forward_fn))
    a, b = outs
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype:
        if torch.equal(a, b) or bool(((a == b) | (a.isnan() & b.isnan())).all()):
            return
    raise TaskError(f"{where}: the reference is not deterministic: two calls of forward_fn on the same inputs and "
                    f"parameters give different outputs (it draws random numbers, e.g. dropout with training=True), "
                    f"so no kernel can be checked against it")

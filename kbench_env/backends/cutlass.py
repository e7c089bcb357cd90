"""CUTLASS headers for CUDA candidates: robust-kbench's solutions may ``#include <cutlass/...>`` (robust-kbench
builds them with its ``third_party/cutlass/include`` on the include path).

A CUTLASS checkout is given by ``$KBENCH_CUTLASS`` (or CUTLASS's own ``$CUTLASS_PATH``): the root of the
repository, or its ``include`` folder. Builds then get ``<root>/include`` and ``<root>/tools/util/include`` (CUTLASS's
utilities: ``cutlass/util/...``) as include paths, the worker's sandbox may read the checkout (``confine``), and the
variables reach the worker (``confine.scrubbed_environment``). Without one, a build that fails on a missing CUTLASS
header says which variable to set.
"""

from __future__ import annotations

import os
import re

from kbench_env.config import environ
from kbench_env.config.environ import CUTLASS_VARS as ENV_VARS

#: g++/nvcc's words for an include that was not found, naming a CUTLASS (or CuTe) header.
MISSING_CUTLASS = re.compile(r"(?:cutlass|cute)/[\w./-]+\s*:\s*No such file or directory|"
                             r"cannot open source file\s*\"(?:cutlass|cute)/")


def root(env: dict | None = None) -> str | None:
    """The CUTLASS checkout given in the environment (the repository root), or None."""
    given = environ.cutlass_checkouts(env)
    if not given:
        return None
    path = os.path.abspath(os.path.expanduser(given[0]))
    # given as .../include (what robust-kbench puts on the path): the root is above it
    if os.path.basename(path.rstrip(os.sep)) == "include" and os.path.isdir(os.path.join(path, "cutlass")):
        path = os.path.dirname(path.rstrip(os.sep))
    return path


def include_paths(env: dict | None = None) -> list[str]:
    """``<root>/include`` and ``<root>/tools/util/include`` (those that exist) for the given checkout, else []."""
    r = root(env)
    if r is None:
        return []
    return [p for p in (os.path.join(r, "include"), os.path.join(r, "tools", "util", "include")) if os.path.isdir(p)]


def add_include_paths(kwargs: dict, env: dict | None = None) -> dict:
    """``kwargs`` of a cpp_extension build with the CUTLASS include paths appended to ``extra_include_paths``."""
    extra = include_paths(env)
    if extra:
        have = list(kwargs.get("extra_include_paths") or [])
        kwargs["extra_include_paths"] = have + [p for p in extra if p not in have]
    return kwargs


def missing_hint(error: str, env: dict | None = None) -> str | None:
    """What to do about a build error that is a CUTLASS header not found, or None if it is not one."""
    if not MISSING_CUTLASS.search(error):
        return None
    r = root(env)
    if r is None:
        return ("kbench: the sources include CUTLASS headers, and no CUTLASS checkout is given: set KBENCH_CUTLASS "
                "(or CUTLASS_PATH) to a CUTLASS repository (its include/ and tools/util/include/ are then put on "
                "the include path)")
    return (f"kbench: a CUTLASS header was not found under the checkout given ({r}: include paths "
            f"{include_paths(env) or 'none found there'}); check that KBENCH_CUTLASS / CUTLASS_PATH names a "
            f"CUTLASS repository root")

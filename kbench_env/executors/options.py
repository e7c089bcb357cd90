"""The arguments every executor takes, and the error for one it does not.

Both executors are built as ``make_executor(kind, device=..., workers=..., **evaluator_kwargs)``:

- ``device``: "auto" (every GPU there is, else the CPU), "cpu", "cuda" (every GPU), "cuda:N" (that GPU; local
  only: a Ray actor's GPU is always its own "cuda"), or a list of these (local only).
- ``workers``: evaluations in flight at once: the local executor's threads (default: the Evaluator's
  ``build_workers``), the Ray executor's actors (default: one per GPU of the cluster, else 1).
- everything else goes to each ``Evaluator`` (``cache_dir``, ``timing``, ``reward``, ``rules``, ``remote_builds``:
  builds as Ray tasks on a cluster's CPU nodes, builder/ray_builds.py, ...).

Every executor also takes ``stuck_after`` (by name): seconds an evaluation may run before it counts as stuck (the
processes executor kills its device process and sends its candidates elsewhere; Ray kills and restarts the actor
and sends the evaluation again; the local executor ends the batch with an error), so no wait is without a deadline.

The Ray executor also takes its cluster's options (``address``, ``cpus_per_actor``, ``max_concurrency``,
``retries``).
"""

from __future__ import annotations

#: Names people reach for, and the argument that means it here.
RENAMED = {"devices": "device", "num_actors": "workers", "num_workers": "workers", "max_workers": "workers"}
#: Arguments only the Ray executor has.
RAY_ONLY = ("address", "cpus_per_actor", "max_concurrency", "retries")


def check_arguments(kind: str, kwargs: dict) -> None:
    """A TypeError naming the right argument for a misnamed one, before any Evaluator is made."""
    for name in kwargs:
        if name in RENAMED:
            raise TypeError(f"make_executor({kind!r}): no argument {name!r}; use {RENAMED[name]}= (both executors "
                            f"take device=, workers= and the Evaluator's arguments; see kbench_env.executors.options)")
        if kind != "ray" and name in RAY_ONLY:
            raise TypeError(f"make_executor({kind!r}): {name!r} is an argument of the Ray executor only "
                            f"(make_executor('ray', {name}=...))")


__all__ = ["RAY_ONLY", "RENAMED", "check_arguments"]

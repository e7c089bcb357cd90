"""Joining a Ray cluster: ``connect`` is the one place an address is understood, for the Ray executor
(executors/ray_executor.py) and for remote builds (builder/ray_builds.py). Ray is the [ray] extra: imported only here,
when a cluster is asked for."""

from __future__ import annotations


def connect(address: str | None, num_cpus: int | None = None):
    """Join the Ray cluster at ``address`` ("auto": the one running here; "ray://host:port" or "host:port"), or
    start a local instance (``"local"`` or None; ``num_cpus`` at least). Returns the ``ray`` module."""
    import ray

    if ray.is_initialized():
        return ray
    local = address in (None, "", "local")
    try:
        ray.init(address=None if local else address, ignore_reinit_error=True, include_dashboard=False,
                 log_to_driver=False, **({"num_cpus": num_cpus} if local and num_cpus else {}))
    except ConnectionError as exc:
        raise ConnectionError(f"no Ray cluster at address {address!r}: {exc} (start one with `ray start --head`, "
                              f"or use 'local' to start an instance in this process)") from None
    return ray

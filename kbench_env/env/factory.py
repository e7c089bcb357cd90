"""What ``gym.make("KBench-v0", ...)`` calls: the local env, or with ``url=`` the remote one on a ``kbench serve``
server (``kbench_env.serving.remote_env``, the [serve] extra), both with the same spaces and behaviour."""

from __future__ import annotations

from kbench_env.env.env import KBenchEnv


def make_env(url: str | None = None, **kwargs):
    """``KBenchEnv(**kwargs)``; with ``url``, ``RemoteKBenchEnv(url, **kwargs)``."""
    if url is not None:
        from kbench_env.serving.remote_env import RemoteKBenchEnv  # httpx, the [serve] extra

        return RemoteKBenchEnv(url, **kwargs)
    return KBenchEnv(**kwargs)


# gym.make reads the creator's render modes from here (both envs have these)
make_env.metadata = {"render_modes": ["ansi"], "render_fps": 1}

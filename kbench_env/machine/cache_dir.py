"""Where kbench keeps what it computes once: ``$KBENCH_CACHE``, else ``~/.cache/kbench`` (builds, derivations)."""

from __future__ import annotations

from pathlib import Path

from kbench_env.config import environ


def default_cache_dir() -> Path:
    return Path(environ.get("KBENCH_CACHE") or Path.home() / ".cache" / "kbench")

"""Where kbench keeps what it computes once: ``$KBENCH_CACHE``, else ``~/.cache/kbench`` (builds, derivations)."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    return Path(os.environ.get("KBENCH_CACHE") or Path.home() / ".cache" / "kbench")

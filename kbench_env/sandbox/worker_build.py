"""A worker's build, on the trusted side: its source's own directory of the build cache held for the worker's
lifetime (buildcache.Claim); one build of a source at a time in this process (builds are private to a worker until
it has loaded, in its overlay of the cache, so a worker for a source that another worker is building waits for that
build to be published, as torch's build lock made it wait before); and publishing what the worker built."""

from __future__ import annotations

import hashlib
import os
import threading

from kbench_env.sandbox import buildcache
from kbench_env.sandbox.policy import Limits

_INFLIGHT_LOCK = threading.Lock()
_INFLIGHT: dict = {}  # build key -> Event set once the worker building that source has published it


class WorkerBuild:
    """The build of one worker's source: claimed once the worker has its source, published when it is over."""

    def __init__(self, backend: str, device: str, build_root: str, limits: Limits):
        self._backend, self._device, self._root, self._limits = backend, device, build_root, limits
        self.key = self._event = self._claim = self.path = None
        self.done = False  # the build finished (or never will)
        self.built = False  # the worker reported a build it made (not found in the cache)
        self.published: list = []

    def claim(self, source: str) -> None:
        """Hold the source's directory of the cache, for the worker's lifetime; if another worker of this process
        is building the same source, wait first for it to publish its build."""
        self._claim = buildcache.Claim(self._root, buildcache.source_key(str(source)))
        self.path = self._claim.path
        key = "\0".join((self._backend, self._device, self._root, str(source)))
        self.key = hashlib.sha256(key.encode()).hexdigest()
        with _INFLIGHT_LOCK:
            first = _INFLIGHT.get(self.key)
            self._event = None if first is not None else _INFLIGHT.setdefault(self.key, threading.Event())
        if first is not None:
            first.wait(timeout=self._limits.build_timeout)

    def publish(self, scratch: str | None, protections: dict) -> None:
        """Publish what the worker built under its own source's directory, within ``Limits.build_bytes`` (on the
        CPU; a GPU worker has no overlay and wrote into the shared cache itself)."""
        if scratch is not None and self._claim is not None and \
                "build_cache_overlay" in protections.get("active", {}):
            self.published += buildcache.publish(scratch, self._root, os.path.basename(self._claim.path),
                                                 self._limits.build_bytes)

    def let_waiters_go(self) -> None:
        """Workers of the same source that wait for this build go on."""
        if self._event is not None:
            with _INFLIGHT_LOCK:
                if _INFLIGHT.get(self.key) is self._event:
                    del _INFLIGHT[self.key]
            self._event.set()

    def release(self) -> bool:
        """Let the source's directory go. Returns whether the cache grew (then it must be brought back under its
        bound)."""
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        return bool(self.published or self.built)

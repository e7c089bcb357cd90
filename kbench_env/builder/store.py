"""The builder's side of the build cache: a build is made in a staging directory, checked against its size bound,
given a manifest (the artifact's name, module name and SHA-256) and renamed into place as ``<root>/<unit>`` in one
step; a unit with a manifest whose artifact still has its digest is a hit. One build of a unit at a time, across
threads and processes (an flock per unit), so a second request for a unit being built waits and finds it built.

Only the builder writes here, and the trusted side when it publishes a build made by a remote builder
(``publish_external``, builder/ray_builds.py: its files written by ``get_or_build``); workers see the cache
read-only (sandbox/confine). GPU workers have no read-only view (confinement.LIMITATIONS): the digest check turns a
library changed after its build into a rebuild rather than a load, though it cannot stop a change made between the
check and the load.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import uuid

from kbench_env.builder.compiler import CompileError
from kbench_env.builder import cache

MANIFEST = ".kbench-build.json"
_UNIT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}$")
_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}$")  # a file of a published build: a plain name


class ExternalBuildRefused(ValueError):
    """A build made elsewhere that the store will not publish (publish_external says why)."""


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Store:
    """The units of one build root."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        os.makedirs(os.path.join(self.root, ".locks"), exist_ok=True)

    def path(self, unit: str) -> str:
        if not _UNIT.match(unit):
            raise ValueError(f"not a build unit name: {unit!r}")
        return os.path.join(self.root, unit)

    def lookup(self, unit: str) -> dict | None:
        """The manifest of a finished build of ``unit`` whose artifact still matches its digest, else None."""
        d = self.path(unit)
        try:
            with open(os.path.join(d, MANIFEST)) as f:
                manifest = json.load(f)
            artifact = os.path.join(d, manifest["artifact"])
            if os.path.basename(artifact) != manifest["artifact"] or sha256_file(artifact) != manifest["sha256"]:
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        with contextlib.suppress(OSError):
            os.utime(d)  # its last use: eviction goes by it
        return {**manifest, "path": artifact}

    @contextlib.contextmanager
    def _locked(self, unit: str):
        fd = os.open(os.path.join(self.root, ".locks", unit + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def get_or_build(self, unit: str, make, max_bytes: int) -> tuple[dict, bool]:
        """(manifest, cached): the unit's build, made with ``make(directory) -> (artifact file name, module name)``
        if it is not in the cache. ``make`` raises CompileError for a failed build; a build whose directory holds
        more than ``max_bytes`` is discarded with a CompileError."""
        with self._locked(unit):
            found = self.lookup(unit)
            if found is not None:
                return found, True
            with self._staging() as staging:
                t0 = time.perf_counter()
                try:
                    artifact, module = make(staging)
                except CompileError as exc:
                    raise CompileError(str(exc).replace(staging, "<build>")) from None
                size = cache.disk_usage(staging)[0]
                if size > max_bytes:
                    raise CompileError(f"the build's output is {size / 2**20:.1f} MiB, over the "
                                       f"{max_bytes / 2**20:.1f} MiB this candidate's builds may still add to the "
                                       "build cache (Limits.build_bytes)")
                manifest = {"unit": unit, "artifact": artifact, "module": module, "bytes": size,
                            "sha256": sha256_file(os.path.join(staging, artifact)),
                            "build_seconds": round(time.perf_counter() - t0, 3)}
                self._install(staging, unit, manifest)
        return {**manifest, "path": os.path.join(self.path(unit), artifact)}, False

    def publish_external(self, unit: str, files: dict, manifest: dict, max_bytes: int) -> tuple[dict, bool]:
        """(manifest, cached): publish a build made elsewhere (a remote builder, builder/ray_builds.py) through
        ``get_or_build``, as a local build, so a later local request for ``unit`` finds it. ``files``:
        {name: bytes}, the artifact among them. Refused with ExternalBuildRefused, nothing published, when the
        manifest names another unit or artifact, the artifact's bytes do not have the manifest's SHA-256, or the
        files are over ``max_bytes``."""
        artifact = manifest.get("artifact") if isinstance(manifest, dict) else None
        if not isinstance(artifact, str) or manifest.get("unit") != unit or artifact not in files:
            raise ExternalBuildRefused(f"the remote build's manifest does not describe unit {unit!r} and its "
                                       f"artifact (manifest: {str(manifest)[:200]})")
        if any(not _FILE.match(name) for name in files) or MANIFEST in files:
            raise ExternalBuildRefused(f"the remote build of {unit} holds a file kbench does not publish: "
                                       f"{sorted(files)[:8]}")
        size = sum(len(data) for data in files.values())
        if size > max_bytes:
            raise ExternalBuildRefused(f"the remote build of {unit} is {size / 2**20:.1f} MiB, over the "
                                       f"{max_bytes / 2**20:.1f} MiB bound (Limits.build_bytes)")
        digest = hashlib.sha256(files[artifact]).hexdigest()
        if digest != manifest.get("sha256"):
            raise ExternalBuildRefused(f"the remote build of {unit}: {artifact} has SHA-256 {digest}, not the "
                                       f"manifest's {manifest.get('sha256')}; not published")

        def make(directory):
            for name, data in files.items():
                with open(os.path.join(directory, name), "wb") as f:
                    f.write(data)
            return artifact, manifest.get("module")

        try:  # its manifest is this store's: the artifact's digest as written, its size on this file system
            return self.get_or_build(unit, make, max_bytes)
        except CompileError as exc:  # over max_bytes as written here
            raise ExternalBuildRefused(f"the remote build of {unit}: {exc}") from None

    @contextlib.contextmanager
    def _staging(self):
        """A staging directory in the root (the same file system, so the install is one rename), removed after."""
        staging = tempfile.mkdtemp(prefix=".staging-", dir=self.root)
        try:
            yield staging
        finally:
            if os.path.isdir(staging):
                shutil.rmtree(staging, ignore_errors=True)

    def _install(self, staging: str, unit: str, manifest: dict) -> None:
        """Write the manifest and rename the finished build into place, setting aside what is there (a build whose
        artifact changed)."""
        with open(os.path.join(staging, MANIFEST), "w") as f:
            json.dump(manifest, f)
        dest = self.path(unit)
        os.chmod(staging, 0o755)
        if os.path.lexists(dest):
            old = os.path.join(self.root, f".old-{uuid.uuid4().hex}")
            os.rename(dest, old)
            shutil.rmtree(old, ignore_errors=True)
        os.rename(staging, dest)

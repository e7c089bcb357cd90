"""The process layer of the confinement: the descriptors a worker keeps, and the environment variables a worker and
the fork server may have (the trusted side uses ``scrubbed_environment`` for both; the worker scrubs its own again).
"""

from __future__ import annotations

import multiprocessing.forkserver as forkserver
import multiprocessing.process as process
import multiprocessing.resource_tracker as resource_tracker
import os
import re
import tempfile

# Environment variables a build or a run may need (a worker's whole environment); anything named like a credential,
# or whose value holds one in a URL, is dropped even if listed.
_ENV_KEEP = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "CC", "CXX", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
             "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "TRITON_INTERPRET", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST",
             "KBENCH_LIGHT_HEADERS", "KBENCH_CUTLASS", "CUTLASS_PATH"}
_ENV_PREFIX_KEEP = ("KBENCH_THREADS", "CUDA_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM", "TRITON_", "LC_")
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
_URL_CREDENTIAL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]*@")  # scheme://user[:password]@
# The fork server (whose environment every worker's /proc/self/environ shows) also gets what Python and torch read
# when they start; never a whole family such as KBENCH_*, which holds the LLM client's settings.
_SERVER_KEEP = {"PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "VIRTUAL_ENV", "CONDA_PREFIX", "HOME", "USER",
                "LOGNAME", "TMPDIR", "TERM"}
_SERVER_PREFIX_KEEP = ("OMP_", "MKL_", "OPENBLAS_", "TORCH", "HIP_", "ROCM_")
# glibc's malloc in the fork server, hence in every worker forked from it, asks for transparent huge pages for its
# heap (where the machine gives them on request: THP "madvise" or "always"; older glibc ignores it). On 4 KiB pages a
# CPU worker's speed depends on where its heap's pages lie and stays so for its life: fresh worker pairs timed the
# same code several times further apart than one pair's timings did, and on huge pages they agree about as one
# pair's timings do. The compilers a build runs do not get it (a worker's own environment).
MALLOC_TUNABLES = "glibc.malloc.hugetlb=1"


def close_inherited(keep_fds, report, act: dict) -> None:
    """Close every descriptor but stdio, the protocol channel and the report channel. A forked worker holds what
    multiprocessing passed it: the resource tracker's pipe (a candidate registered files for the unconfined
    tracker to delete and made it grow without bound), the fork server's liveness pipe and the parent's sentinel;
    multiprocessing's references to them are dropped so that nothing writes to a reused number."""
    keep = {0, 1, 2, *(int(fd) for fd in keep_fds)}
    if report is not None:
        keep.add(report.fileno())
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            try:
                os.close(int(name))
            except OSError:
                pass  # the listing's own descriptor
    resource_tracker._resource_tracker._fd = None  # a tracker started later runs inside the sandbox
    forkserver._forkserver._forkserver_alive_fd = None
    process._parent_process = None
    act["descriptors"] = "only stdio and its two channels (inherited ones closed)"


def scrub(scratch: str, build_root: str, threads: int, env: dict | None = None) -> None:
    """The worker's environment: what the parent allowed for this worker (``env``, filtered again here), else the
    allowed part of the one it inherited; the fork server's, which /proc/self/environ still shows, held nothing
    more (forkserver.spawn_scrubbed)."""
    keep = scrubbed_environment(os.environ if env is None else env, worker=True)
    os.environ.clear()
    os.environ.update(keep)
    os.environ.update({"HOME": scratch, "TMPDIR": scratch, "TORCH_EXTENSIONS_DIR": os.path.join(scratch, "torch_extensions"),
                       "OMP_NUM_THREADS": str(threads), "XDG_CACHE_HOME": os.path.join(scratch, ".cache"),
                       "TRITON_CACHE_DIR": os.path.join(scratch, ".triton"),
                       "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor")})
    tempfile.tempdir = scratch  # the fork server may have cached /tmp (not writable in the sandbox) before


def scrubbed_environment(env: dict | None = None, worker: bool = False) -> dict:
    """The variables of ``env`` (default: this process's) that a worker may have (``worker``), or that the fork
    server may start with: those, the ones Python and torch read when they start, and glibc's malloc tunables
    (``MALLOC_TUNABLES`` added to any given). Never anything named like a credential or holding one in a URL, and
    nothing not named here."""
    def allowed(k: str, v: str) -> bool:
        if SECRET_NAME.search(k) or _URL_CREDENTIAL.search(v):
            return False
        if k in _ENV_KEEP or k.startswith(_ENV_PREFIX_KEEP):
            return True
        return not worker and (k in _SERVER_KEEP or k.startswith(_SERVER_PREFIX_KEEP))

    source = dict(os.environ if env is None else env)
    kept = {k: v for k, v in source.items() if allowed(k, v)}
    if not worker:
        given = source.get("GLIBC_TUNABLES", "")
        # (a given setting of the same tunable is the user's: glibc.malloc.hugetlb=0 keeps 4 KiB pages)
        kept["GLIBC_TUNABLES"] = given if MALLOC_TUNABLES.split("=")[0] in given \
            else f"{given}:{MALLOC_TUNABLES}" if given else MALLOC_TUNABLES
    return kept

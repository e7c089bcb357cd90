"""Worker processes and their confinement: spawning, limits, cgroups, namespaces, Landlock, seccomp, the audit hook,
and the build cache they read.

The trusted side: ``policy`` (Limits), ``job`` (what a worker starts with), ``forkserver`` (where workers are forked
from), ``worker_process`` (Worker: start, talk with deadlines, watch, kill, clean up), ``reports`` (its report
channel), ``diagnosis`` (WorkerError and what a death means), ``worker_build`` (its build requests, relayed to
the trusted builder, kbench_env/builder) and ``buildcache`` (the shared cache's claims and bound), ``cgroup``,
``reaper`` (background clean-up), ``spares`` (a worker kept ready), ``doctor``.
Inside the worker: ``confine/``, one module a layer.
"""

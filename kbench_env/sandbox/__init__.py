"""Worker processes and their confinement: spawning, limits, cgroups, namespaces, Landlock, seccomp, the audit hook.

The trusted side: ``job`` (what a worker starts with), ``worker_process`` (Worker: start, talk with deadlines,
watch, kill, clean up), ``report_channel`` (its report channel), ``diagnosis`` (WorkerError and what a death
means), ``worker_build`` (its build requests, relayed to the trusted builder, kbench_env/builder, whose cache
holds what it was given), ``memory``, ``samples`` and ``placement`` (reading, sampling and pinning a worker),
``reaper`` (background clean-up), ``spares`` (a worker kept ready) and ``idle_start`` (its start at the idle
scheduling class), ``cpu_tally`` (the workers' CPU time by role and stage), ``doctor``.
``confine/``: the lower layer the trusted builder uses too: the policy (``Limits``), the fork server, cgroups, and
the confinement layers applied inside the worker, one module a layer.
"""

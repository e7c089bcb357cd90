"""The trusted builder: compiles what candidates build, in a process no candidate code runs in.

A candidate's ``load_inline`` / ``load`` calls and fast-path kernels are intercepted in its worker
(worker/builds.py) and sent as BUILD requests on the worker's protocol channel; the trusted side checks and relays
them (sandbox/worker_build.py) to the builder process, and answers with the artifact's path in the build cache,
which the worker can read but not write, or with the compiler's trimmed error.

``client`` (Builder: the trusted side's handle, one per Evaluator, serving its workers concurrently), ``server``
(the confined builder process), ``requests`` (what a request may hold; content-addressed unit names), ``flags``
(the compiler and linker flags refused, with reasons), ``torch_ext`` and ``fast`` (the two kinds of build),
``nvcc_steps`` (a ``.cu`` compiled in nvcc's own steps, the host step against a precompiled shared start),
``pch`` (the precompiled heads and reused binding objects),
``store`` (staging, manifest, publication into the cache), ``cache`` (the shared cache seen from the trusted side:
claims, bound, eviction), ``compiler`` (a compiler under a deadline), ``errors``, ``symbols`` (what a built library
calls, read from its symbol tables); ``ray_builds`` and ``ray_task`` (the same builds as Ray tasks on a cluster's
CPU nodes, published into this cache). Below it: the backends (how a format is built) and the sandbox's
``confine/`` (the builder's process is confined as a worker is); above it, the sandbox's workers relay to it.
"""

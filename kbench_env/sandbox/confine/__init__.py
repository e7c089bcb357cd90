"""Confinement of a kbench child process: the lower layer of the sandbox, which the trusted builder's process uses
as a candidate's worker does (kbench_env/builder imports it, never the rest of the sandbox).

What the process is started from and held to, on the parent's side: ``policy`` (``Limits``: resources, timeouts,
which layers, the build cache's bounds), ``forkserver`` (where workers and the builder are forked from),
``cgroup`` and ``freeze_group`` (the pids cgroup, killing a session, freezing a group of processes),
``proc_table`` (the process table as /proc shows it), and
``record_controls`` (RecordFunction's C++ switches, which the audit hook refuses to look up). The rest of the
parent's side (``sandbox.worker_process`` and the modules beside it: the report channel, relaying build requests
to the trusted builder, the watchdogs) is above this layer.

The layers a worker applies to itself before any candidate code runs: every layer is applied where this machine
allows it; ``confinement.apply`` runs them in order and returns which ones are active, and the parent reports them
(``kbench doctor``). In the order applied, one module each:

1. Process (environment.py): no descriptor but stdio and its two channels (multiprocessing's resource tracker pipe
   and the fork server's closed), its own session (the parent kills the group), a pids cgroup made by the parent
   (root), a scrubbed environment (only what builds and runs need, named one by one; nothing named like a
   credential; the fork server it was forked from started with no more), stdout/stderr to a log.
2. Namespaces (namespaces.py; root, or unprivileged user namespaces): a network namespace with no interface up (no
   network at all, loopback included); a mount namespace in which every mount is read-only except the scratch
   directory (the build cache is read-only: the trusted builder writes it, kbench_env/builder); /run hidden (daemon
   sockets), the compilers' own programs hidden from a candidate's worker (the builder compiles for it), and the
   home directory hidden where the Landlock layer is missing.
3. Resource limits (rlimits.py): address space, CPU seconds, file size, open files, no core files, processes
   (RLIMIT_NPROC where not root: root ignores it, so a root parent uses the pids cgroup instead).
4. Landlock (landlock.py, with the allowed paths of paths.py): reads only from system, Python and kbench
   directories, the scratch directory and the build cache; writes only to the scratch directory; programs run only from system and Python directories; TCP bind/connect denied (ABI 4+); signals and
   abstract unix sockets scoped to the worker (ABI 6+); and Landlock's ptrace rules make /proc/<pid>/environ and
   /mem of processes outside the sandbox unreadable.
5. Capabilities (privileges.py; root): bounding and ambient sets emptied, SECBIT_NOROOT locked, every capability
   dropped, so the uid-0 worker cannot remount, raise its limits, load modules or leave the cgroup; no_new_privs in
   any case.
6. seccomp (seccomp.py): socket() fails with EACCES (every family: no network, no daemon sockets); mount,
   namespace, module, kexec, bpf, ptrace, keyring, io_uring, AIO and perf system calls fail with EPERM, and so do
   setsid() and setpgid() (every descendant stays in the worker's session and process group, which the parent
   kills where no cgroup is at hand and stops by signal where it has no freezer cgroup); clone3 reports ENOSYS
   (glibc falls back to clone, whose flags the filter reads: namespace flags, CLONE_VM outside the thread group
   but for vfork's form, and SIGCONT as exit signal are refused); SIGCONT is refused where the filter can read the
   signal (nothing resumes a process the trusted side stopped); 32-bit and x32 system calls kill.
7. A Python audit hook (audit_hook.py) that refuses, and reports to the parent on a channel of its own, what the
   candidate's Python code tries outside the sandbox: opening files outside it, writing into the build cache, sockets, running programs other than the compiler tool chain, reading another process's /proc
   entries. It is a report layer, not the wall: native code (a C++ kernel, ctypes) bypasses it; the layers above do
   not.

CUDA workers (unless ``Limits.gpu_isolation``): CUDA's initialisation fails under the mount namespace, under Landlock
and under a seccomp filter that refuses AF_UNIX sockets (bench/gpu_sandbox_probe.py), so they get the network
namespace alone (``netns_only``) and a filter that refuses every socket family but AF_UNIX (``unix_sockets``), with
the other layers; they have no read-only view of the file system.

What is not stopped, by design or for want of a mechanism, is listed in ``confinement.LIMITATIONS``
(``kbench doctor``).

No module here may import anything that runs candidate code, and ``apply`` must run before the candidate loads.
"""

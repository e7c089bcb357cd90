"""Worker processes and their confinement: spawning, limits, cgroups, namespaces, Landlock, seccomp, the audit hook, and the build cache they publish to."""

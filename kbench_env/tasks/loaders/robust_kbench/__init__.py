"""robust-kbench (SakanaAI/robust-kbench) task folders and CUDA submissions, used unchanged by kbench: one format,
one module a step. ``loader`` (folders into ``Task``s: the format, the plan of each form, names in a tree),
``read`` (a folder's forms, configurations and task file, the reference probed), ``source`` (the generated
KernelBench-format program: robust-kbench's file unchanged, then kbench's adapter), ``cpu_configs``
(configurations for the CPU where the folder's own are all too large) and ``submission`` (a ``.cu`` submission as
a kbench action). What other code uses is here."""

from __future__ import annotations

from kbench_env.tasks.loaders.robust_kbench.loader import (
    CPU_ELEMENTS,
    load_robust_task,
    load_robust_tasks,
    load_robust_tree,
    task_path_name,
    unique_path_names,
)
from kbench_env.tasks.loaders.robust_kbench.submission import exported_functions, submission_to_source

__all__ = ["CPU_ELEMENTS", "load_robust_task", "load_robust_tasks", "load_robust_tree", "task_path_name",
           "unique_path_names", "exported_functions", "submission_to_source"]

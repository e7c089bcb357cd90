"""Loaders of the task-file formats other than kbench's own file (tasks/loading.py): plain KernelBench files
(``kernelbench``: configurations derived for a file without a ``KBENCH`` block) and robust-kbench folders
(``robust_kbench/``). "Format" alone names an action format (pipeline/formats.py)."""

"""Kernel tasks: the task model, suites on disk, and the file formats tasks come in."""

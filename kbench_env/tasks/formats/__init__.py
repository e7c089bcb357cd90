"""Task file formats other than kbench's own KernelBench-style file (robust-kbench)."""

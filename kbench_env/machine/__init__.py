"""The machine kbench runs on, as every other part sees it: the lowest layer, importing nothing else of kbench_env.

``device`` (a device as one value: ``Device``, ``resolve_device``), ``hardware`` (the target described in the
words a kernel writer needs, for the prompt), ``device_lock`` (a GPU's lock across threads and processes, named by
the GPU's UUID, and the hold log) and ``shared_device_lock`` (the same lock with shared and exclusive holders; the
pipeline decides who holds it when: pipeline/device_hold.py), ``cache_dir`` (where kbench keeps what it computes
once) and ``ray_cluster`` (joining a Ray cluster, for the Ray executor and remote builds).
"""

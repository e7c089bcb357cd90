"""The messages between the trusted side and a worker (``messages``), their framing on the wire (``wire``), and
the GPU memory both read and write through CUDA's inter-process handles (``cuda_ipc``)."""

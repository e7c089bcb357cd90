"""The messages between the trusted side and a worker (``messages``), their framing on the wire (``wire``), the GPU
memory both read and write through CUDA's inter-process handles (``cuda_ipc``), and the refusal of an action
before it is built (``screen_error``)."""

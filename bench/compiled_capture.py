"""A torch.compile'd robust/rmsnorm_forward ("small": 4x64x256) captured as compile_later's timing captures it: two
warm-up calls on a side stream, then 2461 calls on rows of one buffer in one CUDA graph; for each pairing of grad
mode at the first run and at the timing: the first call, the warm-up, the capture and one replay (issue #36: the
same capture took 31.5 s inside a trainer step). On a GPU, from the repository root:

    TORCH_LOGS=recompiles python bench/compiled_capture.py
"""
import importlib.util
import time

import torch

TASK = "tasks/robust/rmsnorm_forward.py"
BLOCK = 2461  # the block compile_later's timing captured in the trainer step


def _task():
    spec = importlib.util.spec_from_file_location("task", TASK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _since(t0: float, scale: float = 1.0) -> float:
    torch.cuda.synchronize()
    return round((time.perf_counter() - t0) * scale, 3)


def capture(task, grad_run: bool, grad_time: bool, block: int = BLOCK) -> None:
    torch._dynamo.reset()
    f = torch.compile(task.Model(256).cuda(), options={"compile_threads": 1}, dynamic=False)
    xs = [torch.randn(4, 64, 256, device="cuda") for _ in range(8)]
    with torch.set_grad_enabled(grad_run):
        t0 = time.perf_counter()
        f(xs[0])
        print(" first s", _since(t0))
    with torch.set_grad_enabled(grad_time):
        t0 = time.perf_counter()
        for x in xs[:2]:
            f(x)
        print(" warm ms", _since(t0, 1e3))
        buf = torch.randn(block, 4, 64, 256, device="cuda")
        g, s = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            f(xs[1])
            f(xs[2])
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.cuda.graph(g):
            outs = [f(buf[k]) for k in range(block)]  # noqa: F841 - (kept alive with the graph)
        print(" capture s", _since(t0))
        t0 = time.perf_counter()
        g.replay()
        print(" replay ms", _since(t0, 1e3))


if __name__ == "__main__":
    torch._dynamo.config.recompile_limit = 64
    task = _task()
    for grad_run, grad_time in [(False, False), (True, True), (False, True), (True, False)]:
        print("grad run", grad_run, "grad time", grad_time, flush=True)
        capture(task, grad_run, grad_time)

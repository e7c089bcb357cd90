"""TRL GRPO under ``accelerate launch``, each process evaluating on its own GPU (issue #25).

    python -m kbench_training.tiny --out /tmp/kbench-tiny --hidden 256 --layers 4 --heads 4 --kv-heads 2
    accelerate launch --multi_gpu --num_processes 4 bench/train_multi_gpu.py --out runs/grpo4 -- \\
        --model /tmp/kbench-tiny --device cuda --max-steps 3 --num-generations 4 --per-device-batch-size 4 \\
        --max-completion-length 64 --no-save

Every process builds its trainer exactly as ``python -m kbench_training.grpo`` does (``kbench_training.grpo.build_trainer``: with
``--device cuda`` and several processes, the Evaluator of rank r is on ``cuda:LOCAL_RANK``), then:

1. sends the shipped solution of ``--check-task`` for the Evaluator's backend and format through the trainer's own reward
   function, so each rank shows a correct kernel built, checked and timed on its GPU, with its reward;
2. trains ``--max-steps`` GRPO steps (DDP over the processes; a tiny random model writes no kernel, so the steps
   measure the loop and the reward path, not learning);
3. appends one JSON line to ``<out>/ranks.jsonl``: rank, the Evaluator's device and that GPU's UUID, the check's
   correctness, speedup, reward and the device its EvalResult names, the training's evaluations and seconds.

Rank 0 also writes the trainer's log (``<out>/log.jsonl``, as kbench_training.grpo does).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, grpo_argv = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for ranks.jsonl and the trainer's log")
    ap.add_argument("--check-task", default="level1/relu", help="task whose shipped solution each rank checks")
    args = ap.parse_args(own)

    from kbench_env.machine.device_lock import gpu_identity
    from kbench_env.tasks.suite import resolve_task, solution_path
    from kbench_training.grpo import build_trainer, parse_args

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gargs = parse_args([*grpo_argv, "--output-dir", str(out)])
    rank = int(os.environ.get("RANK", "0"))
    t0 = time.perf_counter()
    trainer, _, reward = build_trainer(gargs)
    evaluator = reward.evaluator
    record = {"rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
              "world_size": int(os.environ.get("WORLD_SIZE", "1")), "evaluator_device": evaluator.device,
              "gpu": gpu_identity(evaluator.device) if evaluator.device.startswith("cuda") else None, "setup_s": round(time.perf_counter() - t0, 2)}

    task = resolve_task(args.check_task)
    path = solution_path(task, evaluator.backend_name, evaluator.format)
    if path is None:
        raise SystemExit(f"no shipped {evaluator.backend_name} solution of {task.name} in the {evaluator.format} format")
    reward.keep_history = True
    t1 = time.perf_counter()
    rewards = reward(prompts=[None], completions=[path.read_text()], task=[task.name])
    r = reward.history[-1][2]
    record.update(check_task=task.name, check_correct=r.correct, check_speedup=r.speedup, check_reward=rewards[0],
                  check_flags=r.integrity_flags, check_error=(r.error or "")[:300], check_result_device=r.device,
                  check_s=round(time.perf_counter() - t1, 2))
    reward.keep_history = False
    print(f"rank {rank}: evaluator on {evaluator.device} ({record['gpu']}); {task.name} shipped solution "
          f"correct={r.correct} speedup={r.speedup} reward={rewards[0]:.3f} in {record['check_s']} s", flush=True)

    t2 = time.perf_counter()
    trainer.train()
    summary = reward.summary()
    record.update(train_s=round(time.perf_counter() - t2, 2), steps=trainer.state.global_step,
                  reward_metrics={k: round(v, 4) for k, v in summary.items()})
    with (out / "ranks.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"rank {rank}: {trainer.state.global_step} GRPO steps in {record['train_s']} s; metrics "
          f"{json.dumps(record['reward_metrics'])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GRPO post-training of a kernel-writing model against KBench-v0 (TRL's GRPOTrainer).

Single turn (``--turns 1``): each prompt is a task's prompt (exactly what ``KBench-v0`` shows), the model writes
``--num-generations`` answers, all answers of a step are evaluated together by the Evaluator and each earns the
env's reward (``kbench_training.rewards.KBenchReward``). Multi turn (``--turns N``): each answer starts an episode; the
env's feedback goes back as the next user message, up to N attempts, and the episode earns
``best turn reward - turn_cost * (turns - 1)`` (``kbench_training.rollout``). The Evaluator runs in this process, or on a
``kbench serve --expose-info`` server (``--env-url``, ``--env-token``:
``kbench_env.serving.remote.RemoteEvaluator``), whose
device, backend, reward and timing are then the ones the prompts name and the rewards pay. Evaluation metrics
(compile, correctness, integrity-flag rates, speedups) are logged with the trainer's own metrics, and every log line
is appended to ``<output-dir>/log.jsonl``.

    # CPU smoke run with a local tiny model (python -m kbench_training.tiny --out runs/tiny)
    python -m kbench_training.grpo --model runs/tiny --device cpu --max-steps 2 --num-generations 4 \\
        --per-device-batch-size 4 --max-completion-length 32
    # rewards from a server (kbench serve on the GPU host or a Ray cluster; see README, "Serving")
    KBENCH_TOKEN=... python -m kbench_training.grpo --model runs/tiny --env-url http://gpu-host:8000 --max-steps 2
    # a real model on GPUs, vLLM colocated (see README, "Training")
    accelerate launch -m kbench_training.grpo --model Qwen/Qwen2.5-Coder-7B-Instruct --suite level1 --vllm colocate \\
        --turns 2 --lora --max-steps 200
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

from transformers import TrainerCallback


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # what to train, on what
    p.add_argument("--model", default="Qwen/Qwen2.5-Coder-1.5B-Instruct", help="model name or local directory")
    p.add_argument("--suite", default="default",
                   help="suite spec: a name from tasks/suites.json, a level, a folder, or task names joined by commas")
    p.add_argument("--backend", default=None, help="kernel language: cpu, cuda, triton (default: by device)")
    p.add_argument("--device", default="auto", help="device the kernels are evaluated on: auto, cpu, cuda, cuda:1")
    p.add_argument("--format", default="kernelbench", choices=["kernelbench", "fast", "triton"],
                   help="action format the prompts ask for: kernelbench (load_inline), fast (extern \"C\" kernels "
                        "through kbench_env.fastpath, ~1 s builds) or triton (GPU only)")
    p.add_argument("--reward", default="tiered", help="reward preset of kbench_env.pipeline.reward (tiered, binary, ...)")
    p.add_argument("--no-timing", action="store_true", help="correctness only: skip timing (speedup counts as 1)")
    p.add_argument("--eval-workers", type=int, default=None,
                   help="candidates evaluated at once (default: one per CPU core)")
    p.add_argument("--env-url", default=None,
                   help="evaluate on a `kbench serve --expose-info` server (http://host:port) instead of in this "
                        "process; its device, backend, reward and rules are the server's")
    p.add_argument("--env-token", default=None, help="the server's token (default: $KBENCH_TOKEN)")
    # episodes
    p.add_argument("--turns", type=int, default=1, help="attempts per episode; >1 feeds the env's feedback back")
    p.add_argument("--episode-reward", default="best", choices=["best", "last"],
                   help="multi-turn: an episode earns its best or its last turn's reward ...")
    p.add_argument("--turn-cost", type=float, default=0.02, help="... minus this per turn after the first")
    p.add_argument("--target-speedup", type=float, default=None,
                   help="multi-turn: the env ends an episode once an attempt is correct and this much faster")
    p.add_argument("--max-feedback-chars", type=int, default=4000, help="longest feedback message sent back")
    # GRPO
    p.add_argument("--num-generations", type=int, default=8, help="answers per prompt (the GRPO group)")
    p.add_argument("--per-device-batch-size", type=int, default=8,
                   help="completions per device per step (a multiple of --num-generations with one process)")
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    p.add_argument("--max-completion-length", type=int, default=2048, help="new tokens per answer (per turn)")
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference model)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="model weights (default: bfloat16 on a GPU, float32 on the CPU)")
    p.add_argument("--no-gradient-checkpointing", action="store_true",
                   help="keep activations (faster, more memory; TRL checkpoints by default)")
    # LoRA
    p.add_argument("--lora", action="store_true", help="train LoRA adapters (peft) instead of all weights")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=32)
    p.add_argument("--lora-dropout", type=float, default=0.05)
    # generation backend
    p.add_argument("--vllm", default="none", choices=["none", "colocate", "server"],
                   help="generate with vLLM in the training process (colocate) or a `trl vllm-serve` server")
    p.add_argument("--vllm-gpu-memory-utilization", type=float, default=0.3, help="colocate: vLLM's GPU share")
    p.add_argument("--vllm-server-base-url", default=None, help="server: e.g. http://localhost:8000")
    p.add_argument("--vllm-max-model-length", type=int, default=None,
                   help="colocate: vLLM's context (prompt + all turns must fit; default: the model's)")
    # output
    p.add_argument("--output-dir", default="runs/grpo")
    p.add_argument("--logging-steps", type=int, default=1)
    p.add_argument("--save-steps", type=int, default=0, help="checkpoint every N steps (0: only at the end)")
    p.add_argument("--no-save", action="store_true", help="do not save the trained model")
    p.add_argument("--report-to", default="none", help="trainer loggers: none, tensorboard, wandb, ...")
    p.add_argument("--log-completions", action="store_true", help="print a table of completions at each log")
    return p.parse_args(argv)


class JsonlLog(TrainerCallback):
    """Appends every log dict (the trainer's metrics and kbench's) to a JSONL file."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and state.is_world_process_zero:
            with self.path.open("a") as f:
                f.write(json.dumps({"step": state.global_step, "time": time.time(), **logs}) + "\n")


def remote_evaluator(args: argparse.Namespace):
    """The server's evaluator (``--env-url``). Options that only an in-process Evaluator takes are refused rather
    than silently ignored: the server fixes device, backend, reward and timing (``kbench serve --help``)."""
    from kbench_env.serving.remote import RemoteEvaluator  # httpx, the [serve] extra

    evaluator = RemoteEvaluator(args.env_url, args.env_token)
    clashes = [flag for flag, clash in (
        (f"--device {args.device}", args.device not in ("auto", evaluator.device)),
        (f"--backend {args.backend}", args.backend not in (None, evaluator.backend_name)),
        (f"--format {args.format}", args.format != evaluator.format),
        (f"--reward {args.reward}", args.reward != "tiered"), ("--no-timing", args.no_timing)) if clash]
    if clashes:
        raise SystemExit(f"{', '.join(clashes)}: with --env-url the server at {args.env_url} evaluates (device "
                         f"{evaluator.device}, backend {evaluator.backend_name}, format {evaluator.format}, its own reward "
                         f"and timing); set "
                         f"these on `kbench serve` instead")
    return evaluator


def where_kernels_run(args: argparse.Namespace):
    """``(evaluator, tasks, device, backend, format)``: the server's evaluator (``--env-url``) or one in this
    process (on this rank's own GPU under a multi-process launch), and the suite's tasks for that device."""
    from kbench_env.backends import default_backend
    from kbench_env.machine.device import Device
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.pipeline.formats import resolve_backend

    from .data import load_tasks

    if args.env_url:
        evaluator = remote_evaluator(args)
        device, backend, fmt = evaluator.device, evaluator.backend_name, evaluator.format
    else:
        dev = Device.parse(args.device)
        if dev == Device("cuda") and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            dev = Device("cuda", int(os.environ.get("LOCAL_RANK", "0")))  # each process evaluates on its own GPU
        device = str(dev)
        fmt = getattr(args, "format", "kernelbench")
        backend = resolve_backend(fmt, args.backend, device) or default_backend(device)
        evaluator = Evaluator(device=device, backend=backend, reward=args.reward, time_candidates=not args.no_timing,
                              format=fmt)
    tasks = load_tasks(args.suite, device)
    if args.env_url:
        evaluator.check_tasks(t.name for t in tasks)
    return evaluator, tasks, device, backend, fmt


def grpo_config(args: argparse.Namespace, cuda: bool):
    """TRL's GRPOConfig for ``args``; ``cuda``: whether a GPU trains (bfloat16 by default there, float32 else)."""
    from trl import GRPOConfig

    dtype = args.dtype or ("bfloat16" if cuda else "float32")
    return GRPOConfig(
        output_dir=args.output_dir,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.per_device_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        beta=args.beta,
        max_steps=args.max_steps,
        seed=args.seed,
        logging_steps=args.logging_steps,
        save_strategy="steps" if args.save_steps > 0 else "no",
        save_steps=max(1, args.save_steps),
        report_to=args.report_to,
        log_completions=args.log_completions,
        use_cpu=not cuda,
        bf16=cuda and dtype == "bfloat16",
        fp16=cuda and dtype == "float16",
        **({"gradient_checkpointing": False} if args.no_gradient_checkpointing else {}),
        model_init_kwargs={"dtype": dtype},
        use_vllm=args.vllm != "none",
        vllm_mode=args.vllm if args.vllm != "none" else "colocate",
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        vllm_server_base_url=args.vllm_server_base_url,
        vllm_max_model_length=args.vllm_max_model_length,
    )


def build_trainer(args: argparse.Namespace):
    """The GRPOTrainer for ``args``, and the object that turns completions into rewards (KBenchReward for one turn,
    MultiTurnRollout for several)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is documented as experimental
    import torch
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from .data import build_dataset
    from .rewards import EpisodeReward, KBenchReward
    from .rollout import MultiTurnRollout

    # 1. where kernels run, and the tasks
    evaluator, tasks, device, backend, fmt = where_kernels_run(args)
    dataset = build_dataset(tasks, backend, device, repeats=math.ceil(256 / len(tasks)), format=fmt)

    # 2. the model's tokenizer: left padding and a pad token, as GRPO needs
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    # 3. the reward: single turn through a reward function, multi turn through a rollout function
    rollout = None
    if args.turns > 1:
        rollout = MultiTurnRollout(evaluator, tasks, backend, device, max_turns=args.turns, mode=args.episode_reward,
                                   turn_cost=args.turn_cost, target_speedup=args.target_speedup,
                                   max_feedback_chars=args.max_feedback_chars, max_workers=args.eval_workers)
        reward = EpisodeReward()
    else:
        reward = KBenchReward(evaluator, tasks, max_workers=args.eval_workers)

    # 4. GRPO
    config = grpo_config(args, torch.cuda.is_available())
    peft_config = None
    if args.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        rollout_func=rollout,
        callbacks=[JsonlLog(Path(args.output_dir) / "log.jsonl")],
    )
    return trainer, (rollout or reward), reward


def main(argv=None) -> None:
    args = parse_args(argv)
    trainer, _, reward = build_trainer(args)
    print(f"GRPO: {args.model} on suite {args.suite!r}, {args.turns} turn(s), {args.num_generations} generations, "
          f"{args.max_steps} steps; logs in {Path(args.output_dir) / 'log.jsonl'}", flush=True)
    trainer.train()
    print("kbench metrics over the run:", json.dumps(reward.summary(), indent=1, sort_keys=True), flush=True)
    if not args.no_save:
        trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()

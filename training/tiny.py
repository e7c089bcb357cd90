"""A tiny chat model and tokenizer built locally, with no download: for offline tests and GPU smoke runs.

The tokenizer is a byte-level BPE trained with ``tokenizers`` on the task suite's own text (``tasks/**/*.py``),
wrapped in ``PreTrainedTokenizerFast`` with left padding, a pad token and a ChatML chat template whose end-of-turn
token ``<|im_end|>`` is the EOS (as in Qwen2 instruct models). The model is a randomly initialised ``Qwen2`` causal
LM. A random model writes garbage, which the screen rejects in milliseconds: what these models exercise is the
training plumbing, not kernel writing.

    python -m kbench_training.tiny --out runs/tiny-qwen2 --hidden 256 --layers 4      # writes a model directory
"""

from __future__ import annotations

import argparse
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

#: ChatML, prefix-preserving (rendering a longer conversation starts with the rendering of a shorter one).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def suite_text_files(root: str | Path | None = None) -> list[str]:
    """The task suite's Python files (references and sample solutions): the tokenizer's training text."""
    from kbench_env.tasks.suite import tasks_root

    root = Path(root) if root else tasks_root()
    files = sorted(str(p) for p in root.rglob("*.py"))
    if not files:
        raise FileNotFoundError(f"no .py files under {root} to train a tokenizer on")
    return files


def build_tokenizer(vocab_size: int = 2048, files: list[str] | None = None):
    """A byte-level BPE trained on the suite's text, as a ``PreTrainedTokenizerFast`` ready for GRPO."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files or suite_text_files(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None, padding_side="left",
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 1 << 20
    return fast


def build_model(tokenizer, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                intermediate: int | None = None, max_positions: int = 32768, seed: int = 0):
    """A randomly initialised Qwen2 causal LM sized to ``tokenizer``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads,
                         intermediate_size=intermediate or 4 * hidden, max_position_embeddings=max_positions,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id, do_sample=True)
    return model


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory to write the model and tokenizer to")
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    tok = build_tokenizer(args.vocab_size)
    model = build_model(tok, args.hidden, args.layers, args.heads, args.kv_heads, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {out}: Qwen2 hidden {args.hidden}, {args.layers} layers, {n / 1e6:.2f}M parameters, "
          f"vocabulary {len(tok)}")


if __name__ == "__main__":
    main()

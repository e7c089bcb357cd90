import torch
from transformers import AutoConfig, AutoModelForCausalLM


class Model(torch.nn.Module):
    """Level-4 style: a Hugging Face model fetched by name at import."""

    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits


model_name = "gpt2"
config = AutoConfig.from_pretrained(model_name)
vocab_size = config.vocab_size
batch_size = 2
sequence_length = 64


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, sequence_length))]


def get_init_inputs():
    return [model_name, config]

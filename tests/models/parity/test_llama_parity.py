"""Parity with Hugging Face transformers (PyTorch CPU): a small random-initialised model of each family (Llama
with GQA, Llama with tied embeddings and llama3 RoPE scaling, Mistral, Qwen2, Qwen3) saved with
``save_pretrained``; our logits match within float32's tolerance and 32 greedy tokens are identical.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.models.llama import LlamaModel

pytestmark = pytest.mark.parity

FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(num_key_value_heads=2)),
    "llama3-tied": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_key_value_heads=1, tie_word_embeddings=True, rope_theta=500000.0, max_position_embeddings=512,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64})),
    "llama-dynamic": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_key_value_heads=2, max_position_embeddings=16, rope_scaling={"rope_type": "dynamic", "factor": 2.0})),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(num_key_value_heads=2, sliding_window=None)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(num_key_value_heads=2)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(num_key_value_heads=2, head_dim=32)),
}


def _build(family: str, path: str):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg_cls, model_cls, extra = FAMILIES[family]
    kw = dict(vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
              max_position_embeddings=256, rms_norm_eps=1e-6, initializer_range=0.2, bos_token_id=1,
              eos_token_id=2, pad_token_id=0)
    kw.update(extra)
    cfg = getattr(transformers, cfg_cls)(**kw)
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(cfg).eval().to(torch.float32)
    with torch.no_grad():  # transformers zero-inits biases; give Qwen2's q/k/v biases values
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.2)
    model.save_pretrained(path, safe_serialization=True)
    return torch, model


@pytest.mark.parametrize("family", list(FAMILIES))
def test_logits_and_32_greedy_tokens(family, tmp_path, device):
    torch, ref = _build(family, str(tmp_path))
    ours = LlamaModel.load(str(tmp_path), device=device, dtype=nbx.float32)
    ids = [1, 17, 300, 45, 9, 211, 77, 480, 5, 64, 3, 150]
    with torch.no_grad():
        want = ref(torch.tensor([ids])).logits[0].double().numpy()
    got = ours.forward([ids], ours.new_cache(1, len(ids)), all_logits=True).cpu().numpy()[0].astype(np.float64)
    err = np.abs(got - want).max()
    assert err <= 1e-4 * max(1.0, np.abs(want).max()), err
    with torch.no_grad():
        out = ref.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False, eos_token_id=None,
                           pad_token_id=0, min_new_tokens=32)
    theirs = out[0, len(ids):].tolist()
    mine = list(ours.generate(ids, 32, stop_ids=[]))
    assert mine == theirs

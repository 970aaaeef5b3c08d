"""Tiny random Llama-family models for the tests: config dicts, random weights, a Hugging Face folder writer, a
GGUF writer (llama.cpp's Q/K row permutation, optional Q4_0/Q4_1/Q8_0 weights, a byte-level BPE vocabulary), and
an independent float64 NumPy forward pass (transformers' formulas, rotate-half RoPE) as the oracle.
"""

from __future__ import annotations

import json
import os

import numpy as np

import nbxtensor as nbx


def tiny_config(model_type="llama", *, vocab=300, hidden=64, inter=96, layers=2, heads=4, kv=2, head_dim=None,
                tie=False, theta=10000.0, **extra) -> dict:
    cfg = {"model_type": model_type, "architectures": ["LlamaForCausalLM"], "vocab_size": vocab,
           "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "rms_norm_eps": 1e-5, "rope_theta": theta,
           "max_position_embeddings": 256, "tie_word_embeddings": tie, "bos_token_id": 1, "eos_token_id": 2}
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    cfg.update(extra)
    return cfg


def random_weights(cfg: dict, seed: int = 0, scale: float = 0.08) -> dict:
    rng = np.random.default_rng(seed)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    Hq, Hk = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or H // Hq
    r = lambda *s: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    norm = lambda n: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    w = {"model.embed_tokens.weight": r(V, H) * 10, "model.norm.weight": norm(H)}
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = r(V, H)
    bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias")
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = r(Hq * D, H)
        w[p + "self_attn.k_proj.weight"] = r(Hk * D, H)
        w[p + "self_attn.v_proj.weight"] = r(Hk * D, H)
        w[p + "self_attn.o_proj.weight"] = r(H, Hq * D)
        w[p + "mlp.gate_proj.weight"] = r(I, H)
        w[p + "mlp.up_proj.weight"] = r(I, H)
        w[p + "mlp.down_proj.weight"] = r(H, I)
        if bias:
            for n, rows in (("q", Hq * D), ("k", Hk * D), ("v", Hk * D)):
                w[p + f"self_attn.{n}_proj.bias"] = r(rows)
        if cfg["model_type"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = norm(D)
            w[p + "self_attn.k_norm.weight"] = norm(D)
    return w


def save_hf_folder(path: str, cfg: dict, weights: dict) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    nbx.save_file({k: nbx.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()},
                  os.path.join(path, "model.safetensors"))
    return path


# ---------------------------------------------------------------------------------------------------------
# float64 reference forward (transformers' LlamaForCausalLM, rotate-half RoPE)
# ---------------------------------------------------------------------------------------------------------
def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference_logits(cfg: dict, weights: dict, ids) -> np.ndarray:
    """Logits [S, V] of one sequence, float64."""
    W = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    H, Hq, Hk = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or H // Hq
    eps = cfg["rms_norm_eps"]
    S = len(ids)
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(S)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(x):  # [h, S, D]
        rot = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
        return x * cos + rot * sin
    h = W["model.embed_tokens.weight"][np.asarray(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = _rms(h, W[p + "input_layernorm.weight"], eps)

        def proj(n):
            y = x @ W[p + f"self_attn.{n}_proj.weight"].T
            b = W.get(p + f"self_attn.{n}_proj.bias")
            return y if b is None else y + b
        q = proj("q").reshape(S, Hq, D).transpose(1, 0, 2)
        k = proj("k").reshape(S, Hk, D).transpose(1, 0, 2)
        v = proj("v").reshape(S, Hk, D).transpose(1, 0, 2)
        if p + "self_attn.q_norm.weight" in W:
            q = _rms(q, W[p + "self_attn.q_norm.weight"], eps)
            k = _rms(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q), rope(k)
        g = Hq // Hk
        k, v = np.repeat(k, g, 0), np.repeat(v, g, 0)
        sc = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        sc = np.where(np.tril(np.ones((S, S), bool)), sc, -np.inf)
        pr = np.exp(sc - sc.max(-1, keepdims=True))
        pr /= pr.sum(-1, keepdims=True)
        o = (pr @ v).transpose(1, 0, 2).reshape(S, Hq * D)
        h = h + o @ W[p + "self_attn.o_proj.weight"].T
        x = _rms(h, W[p + "post_attention_layernorm.weight"], eps)
        gt = x @ W[p + "mlp.gate_proj.weight"].T
        h = h + ((gt / (1 + np.exp(-gt))) * (x @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    h = _rms(h, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return h @ head.T


# ---------------------------------------------------------------------------------------------------------
# GGUF writer (what llama.cpp's convert_hf_to_gguf.py does for LlamaModel)
# ---------------------------------------------------------------------------------------------------------
def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.LlamaModel.permute: rows of each head reordered for llama.cpp's interleaved RoPE."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_GG = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}
_GB = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
       "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
       "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
       "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}


def gguf_name(hf: str) -> str:
    if hf in _GG:
        return _GG[hf]
    parts = hf.split(".")
    i, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    return f"blk.{i}.{_GB[rest]}.{kind}"


def byte_vocab():
    """A GPT-2 byte-level vocabulary of the 256 byte symbols plus a few merges and control tokens."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    sym = [chr(c) for c in cs]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + sym + ["Ġt", "he", "Ġthe", "in"]
    merges = ["Ġ t", "h e", "Ġt he", "i n"]
    types = [3, 3, 3] + [1] * (len(tokens) - 3)
    return tokens, merges, types


def save_gguf(path: str, cfg: dict, weights: dict, *, qtypes: dict | None = None, arch: str = "llama") -> str:
    """Write ``weights`` as a GGUF file. ``qtypes``: suffix of HF name -> ggml type name (e.g. {"_proj.weight":
    "Q4_1"}); everything else F32."""
    import gguf
    qtypes = qtypes or {}
    w = gguf.GGUFWriter(path, arch)
    H, Hq, Hk = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w.add_uint32(f"{arch}.block_count", cfg["num_hidden_layers"])
    w.add_uint32(f"{arch}.context_length", cfg["max_position_embeddings"])
    w.add_uint32(f"{arch}.embedding_length", H)
    w.add_uint32(f"{arch}.feed_forward_length", cfg["intermediate_size"])
    w.add_uint32(f"{arch}.attention.head_count", Hq)
    w.add_uint32(f"{arch}.attention.head_count_kv", Hk)
    w.add_float32(f"{arch}.rope.freq_base", cfg["rope_theta"])
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    w.add_uint32(f"{arch}.vocab_size", cfg["vocab_size"])
    if cfg.get("head_dim"):
        w.add_uint32(f"{arch}.attention.key_length", cfg["head_dim"])
        w.add_uint32(f"{arch}.attention.value_length", cfg["head_dim"])
    tokens, merges, types = byte_vocab()
    tokens = tokens + [f"<unused{i}>" for i in range(cfg["vocab_size"] - len(tokens))]
    types = types + [4] * (len(tokens) - len(types))
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "smollm")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_array("tokenizer.ggml.merges", merges)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    for name, a in weights.items():
        a = np.asarray(a, dtype=np.float32)
        if arch == "llama" and name.endswith("q_proj.weight"):
            a = permute_qk(a, Hq)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            a = permute_qk(a, Hk)
        qt = next((t for suf, t in qtypes.items() if name.endswith(suf)), "F32")
        if qt == "F32":
            w.add_tensor(gguf_name(name), np.ascontiguousarray(a))
        else:
            qtype = gguf.GGMLQuantizationType[qt]
            w.add_tensor(gguf_name(name), gguf.quants.quantize(a, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def gguf_effective_weights(path: str) -> dict:
    """The weights a GGUF file holds, as float64 in Hugging Face order (Q/K rows un-permuted)."""
    from nbxtensor.io.gguf import GGUFFile, hf_name
    f = GGUFFile(path)
    cfg = f.config()
    out = {}
    for name in f.tensors:
        a = f.reference(name)
        hf = hf_name(name)
        if f.architecture == "llama" and hf.endswith(("q_proj.weight", "k_proj.weight")):
            n = cfg["num_attention_heads"] if "q_proj" in hf else cfg["num_key_value_heads"]
            D = a.shape[0] // n
            a = a.reshape(n, D // 2, 2, -1).swapaxes(1, 2).reshape(a.shape)  # inverse of permute_qk
        out[hf] = a
    return out

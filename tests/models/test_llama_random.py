"""The benchmark hooks of the Llama runner: ``LlamaModel.random`` (random weights drawn on the device), the decode
step's embedding as a view of the table (no lookup kernel, no range-flag read-back), and the per-step inputs
queued without waiting on CUDA (``_step_input``)."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.models import llama as L
from nbxtensor.models.llama import LlamaConfig, LlamaModel

CFG = {"model_type": "llama", "vocab_size": 97, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1,
       "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 500000.0, "max_position_embeddings": 128}


def _host(t) -> np.ndarray:
    return t.float().cpu().numpy()


def test_random_shapes_values_and_seed():
    m = LlamaModel.random(CFG, seed=3)
    c = m.config
    assert m.dtype is nbx.float32 and m.codec is None and not m.quantized()
    assert tuple(m.embed.shape) == (97, 32) and m.lm_head is not m.embed
    lay = m.layers[0]
    assert tuple(lay["qkv"].shape) == ((4 + 2 + 2) * 8, 32)  # q, k, v fused as for a loaded checkpoint
    assert tuple(lay["gate_up"].shape) == (2 * 48, 32) and tuple(lay["down"].shape) == (32, 48)  # gate, up too
    assert not {"q", "k", "v", "gate", "up"} & set(lay) and lay["gate_up_b"] is None
    assert np.all(_host(lay["in_norm"]) == 1.0) and np.all(_host(m.norm) == 1.0)
    w = np.concatenate([_host(m.embed).ravel(), _host(lay["qkv"]).ravel(), _host(lay["gate_up"]).ravel()])
    assert abs(w.mean()) < 0.002 and w.std() == pytest.approx(0.02, rel=0.05)
    n_params = 2 * 97 * 32 + 8 * 8 * 32 + 32 * 32 + 3 * 48 * 32 + 3 * 32
    assert m.weight_bytes() == 4 * n_params
    same, other = LlamaModel.random(CFG, seed=3), LlamaModel.random(CFG, seed=4)
    assert np.array_equal(_host(same.layers[0]["qkv"]), _host(lay["qkv"]))
    assert not np.array_equal(_host(other.layers[0]["qkv"]), _host(lay["qkv"]))
    assert c.rope_interleaved is False and m.rope.inv_freq[1] == pytest.approx(500000.0 ** (-2 / 8), rel=1e-6)


def test_random_variants_and_generate():
    tied = LlamaModel.random(dict(CFG, tie_word_embeddings=True), std=0.05)
    assert tied.lm_head is tied.embed
    q2 = LlamaModel.random(dict(CFG, model_type="qwen2"))  # q/k/v biases, zero
    assert np.all(_host(q2.layers[0]["qkv_b"]) == 0.0)
    q3 = LlamaModel.random(LlamaConfig.from_dict(dict(CFG, model_type="qwen3")), dtype="float64")
    assert q3.dtype is nbx.float64 and np.all(_host(q3.layers[0]["q_norm"]) == 1.0)
    toks = list(tied.generate([5, 6, 7, 8], 5, stop_ids=[]))
    assert len(toks) == 5 and all(0 <= t < 97 for t in toks)
    assert tied.stats.new_tokens == 5


def test_random_errors():
    with pytest.raises(ValueError, match="dtype must be a float dtype"):
        LlamaModel.random(CFG, dtype="int32")
    with pytest.raises(ValueError, match="std must be >= 0"):
        LlamaModel.random(CFG, std=-1.0)
    with pytest.raises(ValueError, match="model_type"):
        LlamaModel.random(dict(CFG, model_type="gpt2"))


def test_decode_embedding_view_equals_lookup():
    m = LlamaModel.random(CFG, seed=1)
    c1, c2 = m.new_cache(1, 16), m.new_cache(1, 16)
    m.forward([[3, 4, 5]], c1)
    m.forward([[3, 4, 5]], c2)
    a = m.forward([[11]], c1)  # one host token: the table's row as a view
    b = m.forward(nbx.tensor([[11]]), c2)  # a tensor: the embedding lookup
    assert np.array_equal(_host(a), _host(b))
    row = m._embed_row(11)
    assert tuple(row.shape) == (1, 1, 32) and row.data_ptr() == m.embed.data_ptr() + 11 * 32 * 4
    for bad in (97, -1):
        with pytest.raises(IndexError, match=r"token id .* outside the vocabulary \[0, 97\)"):
            m.forward([[bad]], c1)


def test_step_input_cpu_and_queued_cuda_copy(monkeypatch):
    t = L._step_input(np.array([[1, 2, 3]]), T.int64, nbx.device("cpu"))
    assert t.dtype is nbx.int64 and t.tolist() == [[1, 2, 3]]
    calls = []

    class FakeBackend:
        def write(self, storage, offset, src, non_blocking=False):
            calls.append((offset, src.dtype, src.nbytes, non_blocking))

    class FakeDev:
        type = "cuda"

    monkeypatch.setattr(L, "backend_for", lambda dev: FakeBackend())
    monkeypatch.setattr(L, "new_empty", lambda shape, dtype, dev: nbx.empty(shape, dtype=dtype))
    out = L._step_input(np.full(2, 7), T.int32, FakeDev())
    assert tuple(out.shape) == (2,) and out.dtype is nbx.int32
    assert calls == [(0, np.dtype(np.uint8), 8, True)]  # queued: the backend's non-blocking host-to-device copy


# -- decode_step (a CUDA graph replay on CUDA, the eager step elsewhere) -------------------------------------------
def _two_layer(device, dtype):
    return LlamaModel.random({**CFG, "num_hidden_layers": 2}, device=device, dtype=dtype, seed=5)


def test_decode_step_equals_the_eager_forward_step(device):
    dt = T.bfloat16 if str(device).startswith("cuda") else T.float32
    m = _two_layer(device, dt)
    prompt = [3, 14, 15, 92, 65]
    a, b = m.new_cache(1, 16), m.new_cache(1, 16)
    m.forward([prompt], a)
    m.forward([prompt], b)
    for t in (35, 89, 79, 32):
        got = _host(m.decode_step([t], a)).copy()        # the graph's static output is overwritten by later steps
        want = _host(m.forward([[t]], b))
        assert got.tobytes() == want.tobytes() and a.length == b.length
    assert (a.graph is not None) == (m.cuda_graphs and str(device).startswith("cuda"))
    with pytest.raises(IndexError, match=r"token ids must lie in \[0, 97\)"):
        m.decode_step([97], a)
    with pytest.raises(RuntimeError, match="tokens for a cache of batch 1"):
        m.decode_step([1, 2], a)


def test_generate_gives_the_same_tokens_with_and_without_graphs(device):
    if not str(device).startswith("cuda"):
        pytest.skip("CUDA graphs need a CUDA device")
    m = _two_layer(device, T.bfloat16)
    cache = m.new_cache(1, 40)
    with_graphs = list(m.generate([1, 2, 3], 12, stop_ids=[], cache=cache))
    again = list(m.generate([1, 2, 3], 12, stop_ids=[], cache=cache))   # the cache's graph replays again
    m.cuda_graphs = False
    eager = list(m.generate([1, 2, 3], 12, stop_ids=[]))
    assert with_graphs == again == eager and cache.graph is not None

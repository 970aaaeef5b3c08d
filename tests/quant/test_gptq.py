"""GPTQ and AWQ 4-bit layouts mapped onto grouped int4: tensors packed here the way AutoGPTQ and AutoAWQ pack
them (their loops, written out again), dequantized exactly (``s * (q - zero)`` in float64), refusals of what is
not supported, and a Llama folder with a GPTQ ``quantization_config`` against the float64 model."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.quant import QuantLinear, awq_to_int4, dequantize_oracle, gptq_to_int4

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
from llama_helpers import random_weights, reference_logits, tiny_config  # noqa: E402

rng = np.random.default_rng(5)
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def pack_gptq(q_kn: np.ndarray, z_gn: np.ndarray, v1: bool):
    """AutoGPTQ's QuantLinear.pack loops (4 bits): inputs packed along K, zeros along N (v1: zero - 1)."""
    K, N = q_kn.shape
    iw = q_kn.astype(np.uint32)
    qweight = np.zeros((K // 8, N), np.uint32)
    for row in range(K // 8):
        for j in range(8):
            qweight[row] |= iw[row * 8 + j] << np.uint32(4 * j)
    zeros = ((z_gn.astype(np.int64) - 1) & 15 if v1 else z_gn.astype(np.int64)).astype(np.uint32)
    qzeros = np.zeros((z_gn.shape[0], N // 8), np.uint32)
    for col in range(N // 8):
        for j in range(8):
            qzeros[:, col] |= zeros[:, col * 8 + j] << np.uint32(4 * j)
    return qweight.view(np.int32), qzeros.view(np.int32)


def pack_awq(q_kn: np.ndarray, z_gn: np.ndarray):
    """AutoAWQ's GEMM pack loops: both packed along N in the order 0, 2, 4, 6, 1, 3, 5, 7."""
    def pack(a):
        out = np.zeros((a.shape[0], a.shape[1] // 8), np.uint32)
        for col in range(a.shape[1] // 8):
            for i in range(8):
                out[:, col] |= a[:, col * 8 + AWQ_ORDER[i]].astype(np.uint32) << np.uint32(4 * i)
        return out.view(np.int32)
    return pack(q_kn), pack(z_gn)


def _random(K, N, G):
    q = rng.integers(0, 16, (K, N))
    z = rng.integers(0, 16, (K // G, N))
    s = (rng.random((K // G, N)) * 0.02 + 1e-3).astype(np.float16)
    exact = (s.astype(np.float64)[np.arange(K) // G] * (q - z[np.arange(K) // G])).T  # [N, K]
    return q, z, s, exact


@pytest.mark.parametrize("G", [32, 64, 128])
@pytest.mark.parametrize("fmt", ["gptq", "gptq_v2", "awq"])
def test_layouts_dequantize_exactly(G, fmt, device):
    K, N = 2 * G, 24
    q, z, s, exact = _random(K, N, G)
    if fmt == "awq":
        qw, qz = pack_awq(q, z)
        packed = awq_to_int4(qw, qz, s, group_size=G)
    else:
        qw, qz = pack_gptq(q, z, v1=fmt == "gptq")
        packed = gptq_to_int4(qw, qz, s, np.arange(K) // G, group_size=G, checkpoint_format=fmt)
    assert np.array_equal(dequantize_oracle(*packed, G), exact)
    lin = QuantLinear.from_packed(*packed, group_size=G, device=device)
    got = lin.dequantize(nbx.float32).cpu().numpy()
    assert np.array_equal(got, cast_array(exact, T.float64, T.float32))


def test_refusals():
    q, z, s, _ = _random(64, 16, 32)
    qw, qz = pack_gptq(q, z, v1=True)
    with pytest.raises(NotImplementedError, match="act-order"):
        gptq_to_int4(qw, qz, s, rng.permutation(64) // 32, group_size=32)
    with pytest.raises(NotImplementedError, match="group_size"):
        gptq_to_int4(qw, qz, s, group_size=-1)
    with pytest.raises(NotImplementedError, match="checkpoint_format"):
        gptq_to_int4(qw, qz, s, group_size=32, checkpoint_format="marlin")
    with pytest.raises(RuntimeError, match="scales must be"):
        gptq_to_int4(qw, qz, s[:1], group_size=32)


def test_gptq_llama_folder(tmp_path, device):
    cfg = tiny_config(vocab=200, hidden=64, inter=128, heads=4, kv=2)
    w = random_weights(cfg, seed=9)
    G = 32
    eff, st = {}, {}
    for name, a in w.items():
        if not name.endswith("_proj.weight"):
            eff[name], st[name] = a.astype(np.float64), a
            continue
        W = a.astype(np.float64).T  # [K, N]
        K, N = W.shape
        g = W.reshape(K // G, G, N)
        lo, hi = g.min(1), g.max(1)
        s = ((hi - lo) / 15).astype(np.float16)
        s64 = s.astype(np.float64)
        zero = np.clip(np.rint(-lo / s64), 0, 15)
        q = np.clip(np.rint(g / s64[:, None] + zero[:, None]), 0, 15).reshape(K, N)
        eff[name] = (s64[np.arange(K) // G] * (q - zero[np.arange(K) // G])).T
        qw, qz = pack_gptq(q, zero, v1=True)
        p = name[:-len(".weight")]
        st.update({p + ".qweight": qw, p + ".qzeros": qz, p + ".scales": s,
                   p + ".g_idx": (np.arange(K) // G).astype(np.int32)})
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": False,
                                  "sym": False, "checkpoint_format": "gptq"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    nbx.save_file({k: nbx.from_numpy(np.ascontiguousarray(v)) for k, v in st.items()},
                  str(tmp_path / "model.safetensors"))
    from nbxtensor.models.llama import LlamaModel
    m = LlamaModel.load(str(tmp_path), device=device, dtype=nbx.float32)
    assert m.quantized()
    ids = [3, 17, 99, 150, 4, 8]
    ref = reference_logits(cfg, eff, ids)
    got = m.forward([ids], m.new_cache(1, 8), all_logits=True).cpu().numpy()[0]
    assert np.abs(got - ref).max() <= 2e-5 * max(1.0, np.abs(ref).max())
    from nbxtensor.cli.inspect import inspect_path
    rep = inspect_path(str(tmp_path))
    assert rep["valid"] and "GPTQ" in rep["quantization"]
    cfg["quantization_config"]["quant_method"] = "bitsandbytes"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NotImplementedError, match="bitsandbytes"):
        LlamaModel.load(str(tmp_path))

"""Programmatic dependent launch (runtime/pdl.py): where it is on, how a config or the environment turns it off, and
(on the GPU tier) that a decode step computes the same bits with it as without it, eagerly and in a CUDA graph.

The PTX side (each PDL-aware kernel waits before touching memory) is tests/ops/test_ptx_audit.py's
``test_pdl_kernels_wait_before_touching_memory``.
"""

from __future__ import annotations

import contextlib

import pytest

import nbxtensor as nbx
from nbxtensor.device.facts import ARCHES, fact
from nbxtensor.runtime import configs, pdl

PDL_OPS = ("gemv", "norm_rows", "rope", "decode_attention", "kv_append", "pointwise", "int4_gemv")


def test_facts_declare_pdl_from_sm90_on():
    """CUDA C++ Programming Guide: programmatic dependent launch needs compute capability 9.0 or later."""
    for arch in ARCHES:
        assert fact(arch, "programmatic_dependent_launch") is (int(arch[2:]) >= 90), arch


class _Dev:
    def __init__(self, type_, index=0):
        self.type, self.index = type_, index


def test_settings(monkeypatch):
    assert pdl.settings({}, nbx.device("cpu")) == {"PDL": False, "launch_pdl": False}
    monkeypatch.setattr(pdl, "supported", lambda device: True)
    cuda = _Dev("cuda")
    assert pdl.settings({}, cuda) == {"PDL": True, "launch_pdl": True}
    cfg = {"PDL": 0, "BLOCK": 4}
    assert pdl.settings(cfg, cuda) == {"PDL": False, "launch_pdl": False}
    assert cfg == {"BLOCK": 4}   # consumed: the kernel never sees the config key
    monkeypatch.setattr(pdl, "ENV_ON", False)   # NBX_PDL=0
    assert pdl.settings({"PDL": 1}, cuda) == {"PDL": False, "launch_pdl": False}


def test_supported_reads_the_architecture(monkeypatch):
    from nbxtensor import cuda
    caps = {7: (8, 0), 8: (9, 0), 9: (12, 0)}
    monkeypatch.setattr(cuda, "get_device_capability", lambda index: caps[index])
    monkeypatch.setattr(pdl, "INTERPRET", False)
    assert [pdl.supported(_Dev("cuda", i)) for i in (7, 8, 9)] == [False, True, True]
    assert not pdl.supported(nbx.device("cpu"))


@contextlib.contextmanager
def _pdl_off():
    with contextlib.ExitStack() as st:
        for op in PDL_OPS:
            st.enter_context(configs.override(op, PDL=0))
        yield


def _step(dev):
    """A decode step's kernels once each, chained (each reads the previous one's output): rms_norm, a one-row
    bf16 linear (split-K), rope, the KV append, decode attention (split and combine), a multiply, an int4 linear.
    Returns (run, outputs)."""
    import nbxtensor.nn.functional as F
    from nbxtensor.ops import registry
    from nbxtensor.quant.int4 import QuantLinear
    bf = nbx.bfloat16
    g = nbx.Generator(dev).manual_seed(0)
    H, Hq, Hk, D, L = 512, 4, 2, 64, 300
    h = nbx.randn(1, 1, H, generator=g, device=dev).to(bf)
    nw = nbx.randn(H, generator=g, device=dev).to(bf)
    wqkv = (nbx.randn((Hq + 2 * Hk) * D, H, generator=g, device=dev) * 0.05).to(bf)
    kc = nbx.randn(1, Hk, L + 8, D, generator=g, device=dev).to(bf)
    vc = nbx.randn(1, Hk, L + 8, D, generator=g, device=dev).to(bf)
    lens, lens1 = nbx.tensor([L], dtype=nbx.int32, device=dev), nbx.tensor([L + 1], dtype=nbx.int32, device=dev)
    pos = nbx.tensor([L], dtype=nbx.int64, device=dev)
    inv = (1.0 / (10000.0 ** (nbx.arange(0, D, 2, device=dev).float() / D)))
    ql = QuantLinear.quantize(nbx.randn(H, Hq * D, generator=g, device=dev), group_size=32, scale_dtype=bf).to(dev)
    rope, app = registry.get("rotary_embedding").extra["function"], registry.get("kv_cache_append").extra["function"]
    dec = registry.get("decode_attention").extra["function"]

    def run():
        x = F.rms_norm(h, (H,), nw, 1e-5)
        y = F.linear(x, wqkv)
        q = y[..., :Hq * D].view(1, 1, Hq, D)
        k = y[..., Hq * D:(Hq + Hk) * D].view(1, 1, Hk, D)
        v = y[..., (Hq + Hk) * D:].view(1, 1, Hk, D)
        q, k = rope(q.transpose(1, 2), k.transpose(1, 2), pos, inv, 1.0, False)
        app(kc, vc, lens, k, v.transpose(1, 2), check=False)
        o = dec(q[:, :, 0, :], kc, vc, lens1).reshape(1, 1, Hq * D)
        return ql(o * o)
    return run


def test_decode_step_same_bits_with_and_without_pdl(device):
    """The GPU tier: the step's outputs, eagerly and replayed from a CUDA graph, are the same bytes with PDL on
    (the H200's default) and off (``PDL=0`` over every PDL-aware op's config)."""
    device = nbx.device(device)
    if device.type != "cuda":
        pytest.skip("programmatic dependent launch is a CUDA feature (the GPU tier runs this)")
    run = _step(device)
    outs = {}
    for name, ctx in (("on", contextlib.nullcontext), ("off", _pdl_off)):
        with ctx():
            eager = run().cpu().numpy().tobytes()
            run()  # plans made outside the capture
            gr = nbx.cuda.CUDAGraph()
            with nbx.cuda.graph(gr):
                out = run()
            gr.replay()
            nbx.cuda.synchronize()
            outs[name] = (eager, out.cpu().numpy().tobytes())
    assert pdl.supported(device) == (nbx.cuda.get_device_capability(device.index)[0] >= 9)
    assert outs["on"][0] == outs["on"][1] == outs["off"][0] == outs["off"][1]
    assert any(outs["on"][0])

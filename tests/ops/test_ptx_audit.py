"""PTX audit: the kernels of every non-elementwise family compute floats as PyTorch's CUDA kernels do, proven on
the sm_90 (H200) code without a GPU.

PyTorch's CUDA kernels are built by nvcc with IEEE division and square root and without flush-to-zero, and its
reductions treat NaN as the extreme. Triton 3.6 differs where a kernel is not careful: float32 ``/`` becomes
``div.full.f32`` (2 ulp; 0 for divisors beyond 2**126), ``tl.sqrt``/``tl.exp``/``tl.log`` become ``.approx``
instructions, ``tl.maximum``/``tl.max`` become NaN-dropping ``max.f32``, and libdevice is built with
flush-to-zero unless the launch says otherwise. The layer_norm of ``[40000, 40001, ...]`` was 0.1% off on the H200
(``mean = tl.sum(x) / N`` was ``div.full.f32``) before the families switched to
:mod:`nbxtensor.ops.triton_helpers`' ``div_rn``/``rcp_rn``/``sqrt_rn``, libdevice and the NaN-propagating maxima.

Each case below runs an op's real host wrapper on small CPU tensors with ``launch`` captured instead of run and
the ``sm90`` launch table selected, so the audited kernels are the variants the ops launch on the H200 (their
constexprs and configs); each captured launch is compiled for sm_90 with the launcher's options (Triton's LLVM
and bundled ptxas; no GPU) and its PTX is read by :func:`ptx_violations`. One or two launches per op keep the
file fast (about 30 compilations).

The element-wise family (ops/elementwise.py, ops/activation.py) has its own, exhaustive check in
tests/ops/test_pointwise.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import pkgutil
import re

import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET

pytestmark = pytest.mark.skipif(INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler (not "
                                "under the interpreter)")

# ---------------------------------------------------------------------------------------------------------
# What the PTX may not contain, and the short lists of what it may
# ---------------------------------------------------------------------------------------------------------
# Approximate float32 division: Triton's `/` (nvcc's default is div.rn, -prec-div=true).
_APPROX_DIV = re.compile(r"\bdiv\.(?:full|approx)(?:\.ftz)?\.f32\b")
# Approximate reciprocals, and anything flushing subnormals (nvcc's default is -ftz=false).
_RCP_APPROX = re.compile(r"\brcp\.approx(?:\.ftz)?\.f(?:32|64)\b")
_FTZ = re.compile(r"\b[a-z0-9]+(?:\.[a-z0-9]+)*\.ftz(?:\.[a-z0-9]+)*")
# NaN-dropping minimum/maximum (the NaN-propagating forms are min/max.NaN; float64 has no such instruction and
# appears as max.f64 guarded by setp.nan, so float64 is judged on the TTIR below).
_NAN_DROPPING = re.compile(r"\b(?:min|max)(?:\.ftz)?\.(?:f32|f16|bf16|f16x2|bf16x2)\b")
_NAN_DROPPING_TTIR = re.compile(r"= (arith\.(?:minnumf|maxnumf)) ")
# The SFU approximations our own code reaches through tl.exp/tl.exp2/tl.log/tl.sqrt/tl.sin/tl.cos (libdevice's
# internal uses are the .ftz forms below).
_OWN_APPROX = re.compile(r"\b(?:ex2|lg2|sqrt|rsqrt|sin|cos|tanh)\.approx\.f32\b")

# libdevice internals: what the non-FTZ libdevice functions (the code nvcc links for PyTorch's kernels) use on
# range-reduced arguments, exactly as CUDA's math library does. Nothing else may carry .ftz or rcp.approx.
LIBDEVICE_INTERNALS = {
    "ex2.approx.ftz.f32": "expf, powf, tanhf: 2**f of the reduced argument, scaled by an exact power of two",
    "lg2.approx.ftz.f32": "powf/log2f: log2 of the mantissa, refined in extended precision",
    "rcp.approx.ftz.f32": "tanhf and powf: reciprocal of a value in a normal range, followed by a Newton step",
    "rcp.approx.ftz.f64": "float64 division and reciprocal helpers: the seed of Newton iterations",
    "rsqrt.approx.ftz.f32": "float32 norm/rhypot helpers: the seed of a Newton step",
    "rsqrt.approx.ftz.f64": "float64 sqrt helpers: the seed of Newton iterations",
}

# Deliberate fast paths: kernels allowed the SFU exponential of tl.exp/tl.exp2 (ex2.approx.f32), with why the
# tolerance table covers it (each kernel says so in its module docstring).
FAST_EXP = {
    "_softmax_rows_kernel": "softmax's exp: error ~|x - m| * 2**-24 + 2 ulp, inside float32's rtol wherever a "
                            "probability exceeds the atol; tests widen by the row length (ops/softmax.py)",
    "_softmax_cols_kernel": "as _softmax_rows_kernel",
    "_attn_fwd_kernel": "FlashAttention's exp2 of base-2 scores (PyTorch's flash kernels use fast math); "
                        "attention_tolerance covers it (ops/attention.py)",
    "_decode_split_kernel": "decode attention's exp2, as _attn_fwd_kernel",
    "_decode_combine_kernel": "exp2 weights of the split partials, as _attn_fwd_kernel",
}

# Kernels whose maxima never see NaN by construction, so the NaN-dropping float64 max is exact there.
NAN_FREE_MAX = {
    "_race_kernel": "exponential-race keys are w / E or -1: a NaN or non-positive weight gets -1 (w > 0 is False)",
    "_sample_kernel": "NaN logits are masked to -inf before the max (x == x) and make the row invalid (-1) before "
                      "any exp_f64 sees them; race keys as in _race_kernel",
}


def ptx_violations(compiled, kernel: str) -> list[str]:
    """The instructions of ``compiled`` (a Triton ``CompiledKernel`` for sm_90) that deviate from nvcc's float
    defaults, less the allow-lists above; ``kernel`` is the kernel's name."""
    ptx, ttir = compiled.asm["ptx"], compiled.asm["ttir"]
    bad = set(_APPROX_DIV.findall(ptx))
    bad |= set(_RCP_APPROX.findall(ptx)) - set(LIBDEVICE_INTERNALS)
    bad |= set(_FTZ.findall(ptx)) - set(LIBDEVICE_INTERNALS)
    if kernel not in FAST_EXP:
        bad |= set(_OWN_APPROX.findall(ptx))
    else:
        bad |= set(_OWN_APPROX.findall(ptx)) - {"ex2.approx.f32"}
    if kernel not in NAN_FREE_MAX:
        bad |= set(_NAN_DROPPING.findall(ptx))
        bad |= {f"{m} (TTIR)" for m in _NAN_DROPPING_TTIR.findall(ttir)}
    return sorted(bad)


# ---------------------------------------------------------------------------------------------------------
# Capturing the launches of an op's host wrapper, compiling them for sm_90
# ---------------------------------------------------------------------------------------------------------
def _import_all() -> None:
    import nbxtensor.ops
    import nbxtensor.random
    for pkg in (nbxtensor.ops, nbxtensor.random):
        for mi in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(mi.name)


@contextlib.contextmanager
def captured(monkeypatch):
    """Run op code with every Triton launch recorded as ``(kernel, args, meta)`` instead of run, the ``sm90``
    launch table in force, CPU ops dispatched to their Triton implementations and an H200's 132 SMs."""
    import sys

    from nbxtensor.ops import matmul, registry
    from nbxtensor.runtime import configs, launcher
    _import_all()
    got = []
    real = launcher.launch
    for name, mod in list(sys.modules.items()):
        if name.startswith("nbxtensor.") and mod is not launcher and getattr(mod, "launch", None) is real:
            monkeypatch.setattr(mod, "launch", lambda kernel, grid, *args, **meta: got.append((kernel, args, meta)))
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    monkeypatch.setattr(registry, "interpreting", lambda: True)  # registry.impl: cpu tensors -> rec.triton
    monkeypatch.setattr(matmul, "_sm_count", lambda index: 132)
    yield got


def _compile_options() -> frozenset:
    from triton.backends.nvidia.compiler import CUDAOptions
    return frozenset(f.name for f in dataclasses.fields(CUDAOptions))


def compile_sm90(kernel, args, meta):
    """Compile a captured launch as the launcher would on an H200: compile options in ``meta`` (``num_warps``,
    ``enable_fp_fusion``, ...) pass through, ``enable_reflect_ftz`` defaults to False (the launcher's default for
    every CUDA launch), the other keywords are constexprs; arguments are typed as Triton's JIT types them."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.runtime.jit import _normalize_ty

    from nbxtensor.ops.triton_helpers import TL_DTYPES
    names = _compile_options()
    opts = {k: v for k, v in meta.items() if k in names}
    opts.setdefault("enable_reflect_ftz", False)
    consts = {k: v for k, v in meta.items() if k not in names}
    sig, cx = {}, {}
    for p, a in zip(kernel.params, list(args) + [None] * (len(kernel.params) - len(args))):
        n = p.name
        if n in consts or a is None:
            sig[n], cx[n] = "constexpr", consts.get(n, p.default if p.has_default else None)  # unset: its default
        elif hasattr(a, "data_ptr"):
            sig[n] = "*" + _normalize_ty(TL_DTYPES[a.dtype.name])
        elif p.annotation_type:
            sig[n] = p.annotation_type
        elif isinstance(a, bool):
            sig[n] = "i1"
        elif isinstance(a, float):
            sig[n] = "fp32"
        else:
            sig[n] = "i32" if -2 ** 31 <= int(a) < 2 ** 31 else "i64"
    src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=cx)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)


# ---------------------------------------------------------------------------------------------------------
# Representative launches of every family
# ---------------------------------------------------------------------------------------------------------
def _t(*shape, dtype=nbx.float32, positive=False):
    a = np.random.default_rng(len(shape) + shape[0]).standard_normal(shape)
    t = nbx.from_numpy(np.abs(a) if positive else a)
    return t.to(dtype)


def _lin(x, w, act):
    from nbxtensor.ops.matmul import linear
    return lambda: linear(x, w, activation=act)


def _decode(dt):
    from nbxtensor.ops.decode_attention import launch_decode
    q, k, v, out = _t(2, 8, 64, dtype=dt), _t(2, 2, 4096, 64, dtype=dt), _t(2, 2, 4096, 64, dtype=dt), \
        _t(2, 8, 64, dtype=dt)
    return lambda: launch_decode(q, k, v, None, out, scale=0.125, paged=False)


def _rope():
    from nbxtensor.ops.rope import launch_rope
    q, k, pos, inv = _t(1, 4, 8, 64), _t(1, 2, 8, 64), nbx.arange(8).view(1, 8), _t(32, positive=True)
    yq, yk = nbx.empty(1, 4, 8, 64), nbx.empty(1, 2, 8, 64)
    return lambda: launch_rope(q, yq, k, yk, pos, inv, 1.0, False)


def _renorm(p):
    from nbxtensor.ops.embedding import launch_embedding, launch_renorm
    idx, w, err = nbx.tensor([0, 2]), _t(4, 8), nbx.zeros(1, dtype=nbx.int32)
    out = nbx.empty(2, 8)
    return lambda: (launch_renorm(idx, w, 1.0, p, err), launch_embedding(idx, w, out, err))


def _sample():
    from nbxtensor.random.sampling import sample
    x = _t(2, 100)
    return lambda: sample(x, temperature=0.7, top_k=5, top_p=0.9, min_p=0.01, repetition_penalty=1.2,
                          prev_tokens=[[1, 2], [3, 4]], generator=nbx.Generator().manual_seed(0), validate=False)


# (family, case id, factory: builds the inputs outside the capture and returns the call, kernels expected)
CASES = [
    ("reduction", "mean-rows", lambda: (lambda x: lambda: nbx.mean(x, 1))(_t(4, 300)), ["_reduce_rows_kernel"]),
    ("reduction", "var-cols-split", lambda: (lambda x: lambda: nbx.var(x, 0))(_t(5000, 8)),
     ["_reduce_cols_kernel"] * 2),
    ("reduction", "std-rows-f64", lambda: (lambda x: lambda: nbx.std(x, 1))(_t(4, 300, dtype=nbx.float64)),
     ["_reduce_rows_kernel"]),
    ("reduction", "logsumexp", lambda: (lambda x: lambda: nbx.logsumexp(x, 1))(_t(4, 300)), ["_reduce_rows_kernel"],
     {"min.f32": "LSE_EX2 (on in sm90.json): _ex2_nonpos's min(t, 0) maps a NaN exponent to 0 on purpose (equal "
                 "infinite maxima add their sums; a NaN element already made the maximum NaN)"}),
    ("reduction", "amax", lambda: (lambda x: lambda: nbx.amax(x, 1))(_t(4, 300)), ["_reduce_rows_kernel"]),
    ("reduction", "nanmean", lambda: (lambda x: lambda: nbx.nanmean(x, 1))(_t(4, 300)), ["_reduce_rows_kernel"]),
    ("reduction", "vector_norm-p3", lambda: (lambda x: lambda: nbx.vector_norm(x, 3, 1))(_t(4, 300)),
     ["_reduce_rows_kernel"]),
    ("scan", "cummax-rows", lambda: (lambda x: lambda: nbx.cummax(x, 1))(_t(4, 300)), ["_scan_rows_kernel"]),
    ("scan", "logcumsumexp-cols", lambda: (lambda x: lambda: nbx.logcumsumexp(x, 0))(_t(300, 4)),
     ["_scan_cols_kernel"]),
    ("softmax", "softmax-rows-bf16", lambda: (lambda x: lambda: nbx.softmax(x, 1))(_t(4, 300, dtype=nbx.bfloat16)),
     ["_softmax_rows_kernel"]),
    ("softmax", "log_softmax-rows-looped", lambda: (lambda x: lambda: nbx.log_softmax(x, 1))(_t(2, 70000)),
     ["_softmax_rows_kernel"]),
    ("softmax", "softmax-cols-looped", lambda: (lambda x: lambda: nbx.softmax(x, 0))(_t(300, 4)),
     ["_softmax_cols_kernel"]),
    ("norm", "layer_norm-bf16", lambda: (lambda x, w, b: lambda: F.layer_norm(x, [300], w, b))(
        _t(4, 300, dtype=nbx.bfloat16), _t(300), _t(300)), ["_norm_rows_kernel"]),
    ("norm", "layer_norm-looped", lambda: (lambda x: lambda: F.layer_norm(x, [70000]))(_t(2, 70000)),
     ["_norm_rows_kernel"]),
    ("norm", "rms_norm-f64", lambda: (lambda x: lambda: F.rms_norm(x, [300]))(_t(4, 300, dtype=nbx.float64)),
     ["_norm_rows_kernel"]),
    ("norm", "group_norm-looped", lambda: (lambda x: lambda: F.group_norm(x, 2))(_t(2, 4, 40000)),
     ["_norm_rows_kernel"]),
    ("norm", "batch_norm", lambda: (lambda x, m, v: lambda: F.batch_norm(x, m, v))(
        _t(2, 3, 40), _t(3), _t(3, positive=True)), ["_batch_norm_kernel"]),
    ("attention", "sdpa-bf16-causal", lambda: (lambda q: lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))(
        _t(1, 2, 64, 64, dtype=nbx.bfloat16)), ["_attn_fwd_kernel"]),
    ("attention", "sdpa-f32-additive-mask", lambda: (lambda q, m: lambda: F.scaled_dot_product_attention(
        q, q, q, attn_mask=m))(_t(1, 2, 64, 64), _t(64, 64)), ["_attn_fwd_kernel"]),
    ("decode_attention", "decode-bf16-split", lambda: _decode(nbx.bfloat16),
     ["_decode_split_kernel", "_decode_combine_kernel"]),
    ("rope", "rope-f32", _rope, ["_rope_kernel"]),
    ("embedding", "renorm-inf", lambda: _renorm(float("inf")),
     ["_embedding_mark_kernel", "_embedding_renorm_kernel", "_embedding_kernel"]),
    ("embedding", "renorm-p3", lambda: _renorm(3.0), ["_embedding_mark_kernel", "_embedding_renorm_kernel",
                                                      "_embedding_kernel"]),
    ("matmul", "mm-bf16-gelu_tanh", lambda: _lin(_t(64, 64, dtype=nbx.bfloat16), _t(64, 64, dtype=nbx.bfloat16),
                                                 "gelu_tanh"), ["_mm_kernel"]),
    ("matmul", "gemv-f32-silu", lambda: _lin(_t(1, 64), _t(64, 64), "silu"), ["_gemv_kernel"]),
    ("matmul", "gemv-bf16-gelu", lambda: _lin(_t(2, 64, dtype=nbx.bfloat16), _t(64, 64, dtype=nbx.bfloat16),
                                              "gelu"), ["_gemv_kernel"]),
    ("cast", "copy-f32-bf16-strided", lambda: (lambda x, y: lambda: y.copy_(x.t()))(_t(8, 8),
                                                                                nbx.empty(8, 8, dtype=nbx.bfloat16)),
     ["_pw1"]),
    ("random", "randn", lambda: (lambda g: lambda: nbx.randn(100, generator=g))(nbx.Generator().manual_seed(0)),
     ["_fill_kernel"]),
    ("random", "multinomial", lambda: (lambda w: lambda: nbx.multinomial(w, 3, True))(_t(2, 8, positive=True)),
     ["_race_kernel"]),
    ("random", "sample", _sample, ["_penalty_kernel", "_sample_kernel"]),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_sm90_ptx_follows_pytorch_float_semantics(case, monkeypatch):
    """Every launch of the case compiles to a cubin for sm_90 whose PTX has no approximate division, no
    approximate reciprocal or flush-to-zero outside libdevice's internals, no NaN-dropping minimum/maximum and
    no SFU approximation beyond the declared fast paths (:func:`ptx_violations`)."""
    family, name, factory, expected = case[:4]
    allowed = case[4] if len(case) > 4 else {}   # a case's own deliberate exceptions, each explained
    call = factory()
    with captured(monkeypatch) as got:
        call()
    kernels = [k.__name__ for k, _, _ in got]
    assert [k for k in kernels if k in expected] == expected, (name, kernels)
    for kernel, args, meta in got:
        if kernel.__name__ not in expected:
            continue  # a helper launch (a copy or fill of the host wrapper): audited by its own case
        c = compile_sm90(kernel, args, meta)
        assert c.asm["cubin"], (name, kernel.__name__)
        bad = [b for b in ptx_violations(c, kernel.__name__) if b not in allowed]
        assert not bad, f"{family}/{name}: {kernel.__name__} deviates from PyTorch's CUDA float semantics: {bad}"


def test_allow_lists_are_short_and_explained():
    assert len(LIBDEVICE_INTERNALS) <= 8 and len(FAST_EXP) <= 6 and len(NAN_FREE_MAX) <= 2
    assert sum(len(c) > 4 for c in CASES) <= 2
    for table in (LIBDEVICE_INTERNALS, FAST_EXP, NAN_FREE_MAX, *(c[4] for c in CASES if len(c) > 4)):
        assert all(isinstance(why, str) and len(why) > 10 for why in table.values())


def test_the_audit_sees_each_forbidden_pattern():
    """The checker itself, on a kernel written the old way: float32 ``/``, ``tl.max``/``tl.maximum``,
    ``tl.exp``, ``tl.sqrt`` and libdevice with Triton's default flush-to-zero are all reported; the same kernel
    written with the helpers is clean."""
    from nbxtensor.ops.triton_helpers import div_rn, libdevice, maximum, nan_max, sqrt_rn
    from nbxtensor.runtime.triton_compat import jit, tl

    @jit
    def _old(x_ptr, y_ptr, HELPERS: tl.constexpr):
        offs = tl.arange(0, 128)
        x = tl.load(x_ptr + offs)
        if HELPERS:
            y = div_rn(x, nan_max(x, 0)) + maximum(x, 0.5) + libdevice.exp(x) + sqrt_rn(x) + libdevice.floor(x)
        else:
            y = x / tl.max(x, 0) + tl.maximum(x, 0.5) + tl.exp(x) + tl.sqrt(x) + libdevice.floor(x)
        tl.store(y_ptr + offs, y)

    x = nbx.zeros(128)
    old = ptx_violations(compile_sm90(_old, (x, x), {"HELPERS": False, "enable_reflect_ftz": True}), "_old")
    # (with Triton's FTZ default, tl.sqrt is sqrt.approx.ftz and libdevice's floor flushes: cvt.rmi.ftz)
    for pat in ("div.full.f32", "max.f32", "ex2.approx.f32", "sqrt.approx.ftz.f32", "cvt.rmi.ftz.f32.f32"):
        assert pat in old, (pat, old)
    assert "arith.maxnumf (TTIR)" in old
    assert ptx_violations(compile_sm90(_old, (x, x), {"HELPERS": True}), "_old") == []


# ---------------------------------------------------------------------------------------------------------
# Programmatic dependent launch (runtime/pdl.py)
# ---------------------------------------------------------------------------------------------------------
_GLOBAL_LOAD = re.compile(r"\b(?:ld|cp\.async(?:\.bulk)?(?:\.tensor)?)(?:\.[a-z0-9:]+)*\.global\b|\bld\.global\b")
_GLOBAL_WRITE = re.compile(r"\b(?:st|atom|red)(?:\.[a-z0-9]+)*\.global\b")


def _pdl_cases():
    from nbxtensor.ops import registry
    from nbxtensor.ops.matmul import linear
    from nbxtensor.quant.int4 import QuantLinear, int4_linear
    kv_cache_append = registry.get("kv_cache_append").extra["function"]
    bf = nbx.bfloat16
    ql, xq = QuantLinear.quantize(_t(64, 256), group_size=32, scale_dtype=bf), _t(1, 256, dtype=bf)
    qw, xw = QuantLinear.quantize(_t(64, 4096), group_size=32, scale_dtype=bf), _t(1, 4096, dtype=bf)
    x, w = _t(1, 2048, dtype=bf), _t(256, 2048, dtype=bf)
    a, b = _t(3, 500, dtype=bf), _t(3, 500, dtype=bf)
    h, nw = _t(1, 4096, dtype=bf), _t(4096, dtype=bf)
    kc, vc = _t(1, 2, 16, 64, dtype=bf), _t(1, 2, 16, 64, dtype=bf)
    kn, vn, lens = _t(1, 2, 1, 64, dtype=bf), _t(1, 2, 1, 64, dtype=bf), nbx.tensor([3], dtype=nbx.int32)
    return [
        ("gemv", lambda: linear(x, w), ["_gemv_kernel"]),
        ("rms_norm", lambda: F.rms_norm(h, [4096], nw, 1e-5), ["_norm_rows_kernel"]),
        ("rope", _rope(), ["_rope_kernel"]),
        ("decode", _decode(bf), ["_decode_split_kernel", "_decode_combine_kernel"]),
        ("kv_append", lambda: kv_cache_append(kc, vc, lens, kn, vn, check=False), ["_kv_append_kernel"]),
        ("mul", lambda: a * b, ["_pw2"]),
        ("int4_gemv", lambda: int4_linear(xq, ql.qweight, ql.scales, ql.mins, group_size=32), ["_int4_gemv_kernel"]),
        ("int4_gemv-word", lambda: int4_linear(xw, qw.qweight, qw.scales, qw.mins, group_size=32),
         ["_int4_gemv_w_kernel"]),
    ]


@pytest.mark.parametrize("i", range(8), ids=["gemv", "rms_norm", "rope", "decode", "kv_append", "mul", "int4_gemv",
                                              "int4_gemv-word"])
def test_pdl_kernels_wait_before_touching_memory(i, monkeypatch):
    """With programmatic dependent launch on (sm_90; forced here on the CPU's captured launches), each kernel of a
    decode step is compiled with ``launch_pdl`` and its PTX executes ``griddepcontrol.wait`` before any global
    store, atomic or load, then ``griddepcontrol.launch_dependents``. With ``PDL=0`` in the config the same
    launch has no ``griddepcontrol`` at all."""
    from nbxtensor.runtime import configs, pdl
    name, factory, expected = _pdl_cases()[i]
    monkeypatch.setattr(pdl, "supported", lambda device: True)
    with captured(monkeypatch) as got:
        pass
    for on in (True, False):
        with contextlib.ExitStack() as st:
            if not on:
                for op in ("gemv", "norm_rows", "rope", "decode_attention", "kv_append", "pointwise", "int4_gemv"):
                    st.enter_context(configs.override(op, PDL=0))
            got.clear()
            factory()
            launches = [(k, a, m) for k, a, m in got if k.__name__ in expected]
            assert [k.__name__ for k, _, _ in launches] == expected, (name, [k.__name__ for k, _, _ in got])
            for kernel, args, meta in launches:
                assert meta.get("launch_pdl") is on and meta.get("PDL") is on, (name, meta)
                c = compile_sm90(kernel, args, meta)
                ptx = c.asm["ptx"]
                if not on:
                    assert "griddepcontrol" not in ptx, name
                    continue
                assert c.metadata.launch_pdl, name
                cut = ptx.find("griddepcontrol.wait")
                assert cut > 0 and "griddepcontrol.launch_dependents" in ptx[cut:], name
                before = ptx[:cut]
                assert not _GLOBAL_WRITE.search(before), (name, _GLOBAL_WRITE.findall(before))
                assert not _GLOBAL_LOAD.search(before), (name, _GLOBAL_LOAD.findall(before))


def test_mm_tma_rule_compiles_to_bulk_copies(monkeypatch):
    """sm90.json's rule for large products with a transposed (K-major) weight takes the GEMM's descriptor variant:
    its sm_90 code loads both operands with bulk tensor copies and multiplies with wgmma, and follows PyTorch's
    float semantics like every other launch (:func:`ptx_violations`)."""
    from nbxtensor.ops.matmul import linear
    x, w = _t(1100, 9000, dtype=nbx.bfloat16), _t(256, 9000, dtype=nbx.bfloat16)
    with captured(monkeypatch) as got:
        linear(x, w)
    (kernel, args, meta), = [g for g in got if g[0].__name__ == "_mm_kernel"]
    assert meta["TMA"] and meta["B_KMAJOR"] and (meta["BLOCK_M"], meta["BLOCK_N"]) == (256, 128), meta
    c = compile_sm90(kernel, args, meta)
    ptx = c.asm["ptx"]
    assert "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx
    assert ptx_violations(c, kernel.__name__) == []

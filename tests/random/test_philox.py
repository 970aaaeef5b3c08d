"""Philox4x32-10: known answers, the stream layout, the deterministic float64 math, the Generator, no counter
reuse, and bit equality of the CPU (NumPy) and Triton implementations of every random op.

The CPU/kernel equality tests run in the interpreter tier (``NBX_TRITON_INTERPRET=1``), where the Triton
kernels run on host memory; on a GPU machine ``test_cuda_matches_cpu`` (marked ``gpu``, device from
``NBX_TEST_DEVICE``) checks the real kernels against the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops.registry import get
from nbxtensor.random import detmath as D
from nbxtensor.random import distributions as Dist
from nbxtensor.random.generator import Generator
from nbxtensor.random.philox import (blocks_for_words, f64_bits, i64_args, philox4x32, philox4x32_10, philox_at,
                                     philox_blocks, signed64, stream_words)
from nbxtensor.runtime.launcher import interpreting, launch
from nbxtensor.runtime.triton_compat import jit, tl

interp = pytest.mark.skipif(not interpreting(), reason="runs the Triton kernels: interpreter tier "
                            "(NBX_TRITON_INTERPRET=1) only")

# Random123 tests/kat_vectors (https://github.com/DEShawResearch/random123), "philox4x32 R" lines:
# rounds, counter (4 words), key (2 words), expected (4 words). Checked against the published file and
# against an independent Python implementation (E. Sarmas, philox.py, which copies the same lines verbatim).
KAT = [
    (10, (0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    (10, (0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff),
     (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    (10, (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
    (7, (0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48)),
    (7, (0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff),
     (0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662)),
    (7, (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a)),
]


@pytest.mark.parametrize("rounds,ctr,key,expected", KAT)
def test_known_answers_numpy(rounds, ctr, key, expected):
    out = philox4x32(*ctr, *key, rounds=rounds)
    assert [int(w) for w in out] == list(expected)


@jit
def _kat_kernel(c_ptr, k_ptr, o_ptr):
    i = tl.arange(0, 4)
    c = tl.load(c_ptr + i)
    k0 = tl.load(k_ptr)
    k1 = tl.load(k_ptr + 1)
    c0 = tl.sum(tl.where(i == 0, c, 0), axis=0)
    c1 = tl.sum(tl.where(i == 1, c, 0), axis=0)
    c2 = tl.sum(tl.where(i == 2, c, 0), axis=0)
    c3 = tl.sum(tl.where(i == 3, c, 0), axis=0)
    r0, r1, r2, r3 = philox4x32_10(c0, c1, c2, c3, k0, k1)
    tl.store(o_ptr + i, tl.where(i == 0, r0, tl.where(i == 1, r1, tl.where(i == 2, r2, r3))))


@interp
@pytest.mark.parametrize("rounds,ctr,key,expected", [k for k in KAT if k[0] == 10])
def test_known_answers_triton(rounds, ctr, key, expected):
    c = nbx.tensor(list(ctr), dtype=nbx.uint32)
    k = nbx.tensor(list(key), dtype=nbx.uint32)
    o = nbx.zeros(4, dtype=nbx.uint32)
    launch(_kat_kernel, (1,), c, k, o)
    assert o.tolist() == list(expected)


def test_stream_layout():
    seed, off = 0x0123456789ABCDEF, (1 << 32) - 2  # the offset carries into the counter's high word
    blocks = philox_blocks(seed, off, 5)
    for b in range(5):
        ctr = off + b
        ref = philox4x32(ctr & 0xFFFFFFFF, ctr >> 32, 0, 0, seed & 0xFFFFFFFF, seed >> 32)
        assert [int(w) for w in blocks[b]] == [int(w) for w in ref]
    words = stream_words(seed, off, 17)
    assert words.shape == (17,) and np.array_equal(words, blocks.reshape(-1)[:17])
    assert blocks_for_words(17) == 5 and blocks_for_words(16) == 4 and blocks_for_words(0) == 0
    assert signed64(2**64 - 1) == -1 and signed64(5) == 5


def test_detmath_accuracy():
    rng = np.random.default_rng(7)
    u = np.concatenate([rng.random(50000), 2.0 ** -rng.uniform(0, 64, 20000), [1.0, 2.0 ** -53, 2.0 ** -64]])
    u = u[u > 0]
    ulp = lambda a, b: np.max(np.abs(a - b) / np.spacing(np.abs(b)))  # noqa: E731
    assert ulp(D.log_np(u), np.log(u)) <= 2
    x = np.concatenate([-rng.exponential(5, 50000), -rng.uniform(0, 708, 20000), [0.0, -1e-300]])
    assert ulp(D.exp_np(x), np.exp(x)) <= 2
    assert D.exp_np(np.array([0.0]))[0] == 1.0 and np.all(D.exp_np(x) <= 1.0)
    sub = np.array([-740.0, -745.0, -745.6, -1000.0, -np.inf])
    assert np.allclose(D.exp_np(sub), np.exp(sub), rtol=0, atol=5e-324 * 2)
    t = np.concatenate([rng.random(50000), np.arange(64) / 64])
    s, c = D.sincos2pi_np(t)
    assert np.max(np.abs(s - np.sin(2 * np.pi * t))) < 2e-15
    assert np.max(np.abs(c - np.cos(2 * np.pi * t))) < 2e-15


@jit
def _detmath_kernel(x_ptr, o1, o2, o3, o4, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m, other=0.5)
    tl.store(o1 + i, D.log_f64(x), mask=m)
    tl.store(o2 + i, D.exp_f64(-x * 800.0), mask=m)
    s, c = D.sincos2pi_f64(x)
    tl.store(o3 + i, s, mask=m)
    tl.store(o4 + i, c, mask=m)


@interp
def test_detmath_kernel_bits():
    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.random(3000), 2.0 ** -rng.uniform(0, 60, 1000), [1.0, 2.0 ** -53]])
    outs = [nbx.empty(xs.size, dtype=nbx.float64) for _ in range(4)]
    launch(_detmath_kernel, (xs.size // 1024 + 1,), nbx.from_numpy(xs), *outs, xs.size, BLOCK=1024)
    refs = [D.log_np(xs), D.exp_np(-xs * 800.0), *D.sincos2pi_np(xs)]
    for o, r in zip(outs, refs):
        assert np.array_equal(o.numpy().view(np.int64), r.view(np.int64))


@jit(do_not_specialize=["seed", "offset"])
def _blocks_kernel(o_ptr, seed: tl.int64, offset: tl.int64, n, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    r0, r1, r2, r3 = philox_at(seed, offset, b, 0)
    m = b < n
    tl.store(o_ptr + b * 4, r0, mask=m)
    tl.store(o_ptr + b * 4 + 1, r1, mask=m)
    tl.store(o_ptr + b * 4 + 2, r2, mask=m)
    tl.store(o_ptr + b * 4 + 3, r3, mask=m)


@interp
@pytest.mark.parametrize("seed,offset", [(0, 0), (2**64 - 1, 2**64 - 300), (0x0123456789ABCDEF, 2**32 - 3),
                                         (2**31 + 5, 2**31 - 7)])
def test_stream_kernel_bits(seed, offset):
    n = 300
    o = nbx.empty(4 * n, dtype=nbx.uint32)
    launch(_blocks_kernel, (2,), o, *i64_args(signed64(seed), signed64(offset)), n, BLOCK=256)
    assert np.array_equal(o.numpy(), philox_blocks(seed, offset, n).reshape(-1))


# ---------------------------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------------------------
def test_generator_seed_rules():
    g = Generator()
    assert g.initial_seed() == 67280421310721 and g.get_offset() == 0 and g.device == nbx.device("cpu")
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1
    assert g.manual_seed(2**64 - 1).initial_seed() == 2**64 - 1
    with pytest.raises(ValueError, match="Overflow"):
        g.manual_seed(2**64)
    with pytest.raises(ValueError):
        g.manual_seed(-2**63 - 1)
    with pytest.raises(RuntimeError, match="expected a long"):
        g.manual_seed(1.5)
    s = g.seed()
    assert 0 <= s < 2**64 and g.initial_seed() == s and g.get_offset() == 0


def test_generator_key_is_the_seed():
    # key = (low word, high word) of the 64-bit seed; draws read blocks from the offset.
    seed = 0xA4093822299F31D0 + 12345
    g = Generator().manual_seed(seed)
    x = nbx.rand(8, generator=g)
    w = stream_words(seed, 0, 8)
    assert np.array_equal(x.numpy(), ((w >> 8).astype(np.float64) * 2.0 ** -24).astype(np.float32))


def test_state_round_trip():
    g = Generator().manual_seed(99)
    nbx.randn(10, generator=g)
    st = g.get_state()
    assert st.dtype is nbx.uint8 and st.shape == (16,)
    a = nbx.rand(20, generator=g)
    g.set_state(st)
    assert np.array_equal(nbx.rand(20, generator=g).numpy(), a.numpy())
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state(nbx.zeros(16, dtype=nbx.int8))
    with pytest.raises(RuntimeError, match="16 bytes"):
        g.set_state(nbx.zeros(3, dtype=nbx.uint8))


def test_offsets_and_exhaustion():
    g = Generator().manual_seed(1)
    g.set_offset(5)
    assert g.get_offset() == 5
    g.set_offset(2**64 - 2)
    nbx.rand(8, generator=g)  # exactly the last two blocks
    assert g.get_offset() == 2**64
    with pytest.raises(RuntimeError, match="2\\*\\*64"):
        nbx.rand(1, generator=g)
    with pytest.raises(RuntimeError):
        g.set_offset(2**64)


def test_manual_seed_seeds_defaults():
    nbx.manual_seed(1234)
    a = nbx.rand(5)
    nbx.manual_seed(1234)
    assert np.array_equal(nbx.rand(5).numpy(), a.numpy())
    assert nbx.initial_seed() == 1234
    st = nbx.get_rng_state()
    b = nbx.randn(3)
    nbx.set_rng_state(st)
    assert np.array_equal(nbx.randn(3).numpy(), b.numpy())
    assert 0 <= nbx.seed() < 2**64


def test_generator_checks():
    with pytest.raises(TypeError, match="Generator"):
        nbx.rand(2, generator=object())


# ---------------------------------------------------------------------------------------------------------
# No counter reuse: every draw reserves exactly its blocks, consecutively
# ---------------------------------------------------------------------------------------------------------
def _draws(g):
    """(call, expected blocks) for one draw of each op; blocks = ceil(elements * words / 4)."""
    w = nbx.rand(30, generator=Generator().manual_seed(0))
    return [
        (lambda: nbx.rand(13, generator=g), 4),                                   # 1 word per element
        (lambda: nbx.rand(13, dtype=nbx.float64, generator=g), 7),                # 2 words
        (lambda: nbx.randn(13, dtype=nbx.float16, generator=g), 4),
        (lambda: nbx.randn(13, dtype=nbx.float64, generator=g), 7),
        (lambda: nbx.randint(0, 10, (13,), generator=g), 7),
        (lambda: nbx.randperm(13, generator=g), 7),
        (lambda: nbx.bernoulli(w, generator=g), 15),
        (lambda: nbx.zeros(13).bernoulli_(0.3, generator=g), 7),
        (lambda: nbx.nn.functional.dropout(w, 0.2, training=True, generator=g), 8),
        (lambda: nbx.multinomial(w, 4, generator=g), 15),
        (lambda: nbx.multinomial(w, 4, replacement=True, generator=g), 60),
        (lambda: nbx.random.sample(w.view(3, 10), generator=g, top_p=0.5), 15),
        (lambda: nbx.rand(0, generator=g), 0),
    ]


def test_offsets_advance_by_the_blocks_drawn():
    g = Generator().manual_seed(5)
    for call, blocks in _draws(g):
        before = g.get_offset()
        call()
        assert g.get_offset() - before == blocks


def test_reservations_are_disjoint(monkeypatch):
    g = Generator().manual_seed(5)
    seen = []
    orig = Generator.reserve

    def spy(self, n):
        seed, start = orig(self, n)
        if self is g:
            seen.append((start, n))
        return seed, start

    monkeypatch.setattr(Generator, "reserve", spy)
    for call, _ in _draws(g) * 2:
        call()
    assert len(seen) == 2 * len(_draws(g))
    pos = 0
    for start, n in seen:  # each draw starts where the previous one ended: no range is used twice
        assert start == pos
        pos += n


def test_consecutive_draws_continue_the_stream():
    g = Generator().manual_seed(77)
    a, b = nbx.rand(10, generator=g), nbx.rand(6, generator=g)
    w = stream_words(77, 0, 4 * 3 + 6)  # a used blocks 0..2, b starts at block 3
    to_u = lambda x: ((x >> 8).astype(np.float64) * 2.0 ** -24).astype(np.float32)  # noqa: E731
    assert np.array_equal(a.numpy(), to_u(w[:10]))
    assert np.array_equal(b.numpy(), to_u(w[12:18]))
    assert not np.intersect1d(a.numpy(), b.numpy()).size


# ---------------------------------------------------------------------------------------------------------
# CPU (NumPy) == Triton kernel, bit for bit, for every op and dtype
# ---------------------------------------------------------------------------------------------------------
FLOATS = [nbx.float32, nbx.float64, nbx.float16, nbx.bfloat16]
SEED, OFFSET = 0x5EED5EED12345678, 2**32 - 5


def _both(op: str, make_out, *params):
    rec = get(op)
    a, b = make_out(), make_out()
    rec.cpu(a, SEED, OFFSET, *params)
    rec.triton(b, SEED, OFFSET, *params)
    return a.numpy(), b.numpy()


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@interp
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1029])
def test_uniform_cpu_equals_kernel(dtype, n):
    for a_, b_ in [(0.0, 1.0), (-3.5, 2.25), (1e-3, 1e-3 * (1 + 2**-10))]:
        assert _same_bits(*_both("uniform_", lambda: nbx.empty(n, dtype=dtype), a_, b_))


@interp
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1029])
def test_normal_cpu_equals_kernel(dtype, n):
    for mean, std in [(0.0, 1.0), (3.0, 0.25)]:
        assert _same_bits(*_both("normal_", lambda: nbx.empty(n, dtype=dtype), mean, std))


@interp
@pytest.mark.parametrize("dtype", [nbx.int64, nbx.int32, nbx.uint8, nbx.int8, nbx.bool, *FLOATS], ids=str)
def test_randint_cpu_equals_kernel(dtype):
    ranges = [(0, 2)] if dtype is nbx.bool else [(0, 2), (3, 100)] if dtype in (nbx.uint8, nbx.int8) or \
        dtype in (nbx.float16, nbx.bfloat16) else [(0, 2), (-50, 100), (0, 2**31 - 1)]
    if dtype is nbx.int64:
        ranges += [(-2**63, 2**63 - 1), (0, 2**40 + 3)]
    for lo, hi in ranges:
        assert _same_bits(*_both("random_", lambda: nbx.empty(37, dtype=dtype), signed64(lo), signed64(hi - lo)))


@interp
@pytest.mark.parametrize("dtype", [*FLOATS, nbx.int64, nbx.bool], ids=str)
def test_bernoulli_cpu_equals_kernel(dtype):
    assert _same_bits(*_both("bernoulli", lambda: nbx.empty(41, dtype=dtype), 0.3))
    for pd in FLOATS:
        p = nbx.rand(41, dtype=pd, generator=Generator().manual_seed(3))
        assert _same_bits(*_both("bernoulli", lambda: nbx.empty(41, dtype=dtype), p))


@interp
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_dropout_cpu_equals_kernel(dtype):
    x = nbx.randn(1031, dtype=dtype, generator=Generator().manual_seed(4))
    for prob in (0.0, 0.1, 0.5, 1.0):
        thr = int(np.ceil(prob * 2.0**32))
        scale = 0.0 if prob == 1.0 else 1.0 / (1.0 - prob)
        assert _same_bits(*_both("native_dropout", lambda: nbx.empty(1031, dtype=dtype), x, thr, scale))


@interp
@pytest.mark.parametrize("dtype", [nbx.int64, nbx.int32, nbx.float32], ids=str)
def test_randperm_cpu_equals_kernel(dtype):
    a, b = _both("randperm", lambda: nbx.empty(300, dtype=dtype))
    assert _same_bits(a, b) and sorted(a.tolist()) == list(range(300))


@interp
@pytest.mark.parametrize("wdtype", FLOATS, ids=str)
def test_multinomial_cpu_equals_kernel(wdtype):
    w = nbx.rand(3, 1500, dtype=wdtype, generator=Generator().manual_seed(8))
    w[1, 100:].fill_(0.0)
    for replacement, s in ((False, 7), (True, 5)):
        assert _same_bits(*_both("multinomial", lambda: nbx.empty(3, s, dtype=nbx.int64), w, replacement))


# ---------------------------------------------------------------------------------------------------------
# The real GPU: cuda == cpu, bit for bit (run with NBX_TEST_DEVICE=cuda)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_matches_cpu(device):
    if device == "cpu":
        pytest.skip("compares a GPU with the CPU: set NBX_TEST_DEVICE=cuda")

    def both(fn):
        gc, gg = Generator("cpu").manual_seed(SEED), Generator(device).manual_seed(SEED)
        gc.set_offset(OFFSET)
        gg.set_offset(OFFSET)
        a, b = fn(gc, "cpu"), fn(gg, device)
        assert gc.get_offset() == gg.get_offset()
        return a.numpy(), b.cpu().numpy()

    n = (1 << 20) + 3
    for dt in FLOATS:
        assert _same_bits(*both(lambda g, d: nbx.rand(n, dtype=dt, generator=g, device=d)))
        assert _same_bits(*both(lambda g, d: nbx.randn(n, dtype=dt, generator=g, device=d)))
        assert _same_bits(*both(lambda g, d: nbx.empty(n, dtype=dt, device=d).uniform_(-2.0, 3.0, generator=g)))
        assert _same_bits(*both(lambda g, d: nbx.empty(n, dtype=dt, device=d).normal_(1.5, 0.5, generator=g)))
        x = nbx.randn(n, dtype=dt, generator=Generator().manual_seed(1))
        assert _same_bits(*both(lambda g, d: nbx.nn.functional.dropout(x.to(d), 0.3, training=True, generator=g)))
        p = nbx.rand(n, dtype=dt, generator=Generator().manual_seed(2))
        assert _same_bits(*both(lambda g, d: nbx.bernoulli(p.to(d), generator=g)))
    for dt in (nbx.int64, nbx.int32, nbx.uint8, nbx.float32):
        assert _same_bits(*both(lambda g, d: nbx.randint(0, 200, (n,), dtype=dt, generator=g, device=d)))
    assert _same_bits(*both(lambda g, d: nbx.randint(-2**63, 2**63 - 1, (n,), generator=g, device=d)))
    assert _same_bits(*both(lambda g, d: nbx.randperm(100003, generator=g, device=d)))
    w = nbx.rand(8, 50000, generator=Generator().manual_seed(3))
    assert _same_bits(*both(lambda g, d: nbx.multinomial(w.to(d), 20, generator=g)))
    assert _same_bits(*both(lambda g, d: nbx.multinomial(w.to(d), 20, replacement=True, generator=g)))
    logits = nbx.empty(16, 128256).normal_(0.0, 3.0, generator=Generator().manual_seed(4))
    prev = nbx.randint(0, 128256, (16, 64), generator=Generator().manual_seed(5))
    for kw in (dict(temperature=0), dict(), dict(temperature=0.7, top_p=0.9), dict(top_k=50, top_p=0.95),
               dict(min_p=0.05, temperature=1.3), dict(repetition_penalty=1.3, top_k=40, top_p=0.8)):
        kw = dict(kw, prev_tokens=prev) if "repetition_penalty" in kw else kw
        for dt in FLOATS:
            lg = logits.to(dt)
            assert _same_bits(*both(lambda g, d: nbx.random.sample(
                lg.to(d), generator=g, **{k: (v.to(d) if isinstance(v, nbx.Tensor) else v) for k, v in kw.items()})))


# ---------------------------------------------------------------------------------------------------------
# The GPU code itself, without a GPU: compile for sm90 and read the PTX
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(interpreting(), reason="compiles the kernels for sm90: the core tier (not the interpreter)")
def test_sm90_ptx_rounds_like_numpy():
    """The bit-equality promise on the GPU rests on three facts about the compiled code, checked here on the
    PTX Triton emits for sm90 (no GPU needed): no fused multiply-add (``enable_fp_fusion=False``), float64
    division and square root in their IEEE forms (``div.rn.f64``, ``sqrt.rn.f64``), and multiplies and adds
    marked ``.rn`` so ptxas does not contract them either."""
    import re

    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from nbxtensor.random import sampling as S

    def ptx(fn, sig, const):
        sig = dict(sig, **{k: "constexpr" for k in const})
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4, "enable_fp_fusion": False})
        return k.asm["ptx"]

    i64 = {"n": "i64", "seed": "i64", "offset": "i64", "pa": "i64", "pb": "i64"}
    texts = [
        ptx(Dist._fill_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", **i64},
            {"DIST": Dist.K_NORMAL, "WIDE": False, "DIGITS": 0, "OUT": 1, "BLOCK": 256}),
        ptx(S._sample_kernel, {"out_ptr": "*i64", "x_ptr": "*bf16", "bad_ptr": "*i32", "V": "i64", "seed": "i64",
                               "offset": "i64", "temp_bits": "i64", "top_k": "i64", "top_p_bits": "i64",
                               "lmp_bits": "i64"},
            {"GREEDY": False, "HAS_TEMP": True, "HAS_TOPK": True, "HAS_TOPP": True, "HAS_MINP": True,
             "HAS_BAD": False, "BLOCK": 256}),
    ]
    for text in texts:
        assert not re.findall(r"\bfma\.", text)
        assert re.findall(r"div\.rn\.f64", text) and not re.findall(r"div\.(?:full|approx)", text)
        assert not re.findall(r"sqrt\.approx", text)
        assert not re.findall(r"\b(?:mul|add|sub)\.f64", text)  # only the .rn forms, which ptxas never fuses
    assert re.findall(r"sqrt\.rn\.f64", texts[0])

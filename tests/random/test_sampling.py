"""Token sampling: greedy and tie rules, the top-k/top-p/min-p/penalty filters against the float64 reference,
sampled frequencies (chi-square) on small vocabularies, determinism under a seed, errors, and (interpreter
tier) the Triton kernel against the CPU implementation bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from random_stats import chi_square_pvalue

import nbxtensor as nbx
from nbxtensor.ops.registry import get
from nbxtensor.random import Generator, sample, sample_reference, sampling_mask
from nbxtensor.random.sampling import SamplingParams
from nbxtensor.runtime.launcher import interpreting

ALPHA = 1e-6
interp = pytest.mark.skipif(not interpreting(), reason="runs the Triton kernel: interpreter tier only")
not_interp = pytest.mark.skipif(interpreting(), reason="a program per row: statistics need the CPU tier; the "
                                "kernel is proven bit-equal to the CPU below")

CONFIGS = [
    dict(),
    dict(temperature=0.6),
    dict(temperature=1.7, top_k=3),
    dict(top_p=0.7),
    dict(top_p=0.0),
    dict(min_p=0.2),
    dict(temperature=0.8, top_k=4, top_p=0.8, min_p=0.05),
    dict(repetition_penalty=1.8, top_p=0.9),
    dict(repetition_penalty=0.7, top_k=2),
]


def gen(seed: int = 7) -> Generator:
    return Generator().manual_seed(seed)


def _kw(cfg: dict, prev) -> dict:
    return dict(cfg, prev_tokens=prev) if "repetition_penalty" in cfg else dict(cfg)


# ---------------------------------------------------------------------------------------------------------
# greedy
# ---------------------------------------------------------------------------------------------------------
def test_greedy_is_argmax_with_lowest_index_ties():
    x = nbx.tensor([[0.0, 3.0, 3.0, 1.0], [2.0, -1.0, 2.0, 2.0], [float("-inf")] * 4])
    assert sample(x, temperature=0).tolist() == [1, 0, 0]
    assert sample(x[0], temperature=0).shape == () and int(sample(x[0], temperature=0)) == 1


def test_greedy_with_repetition_penalty():
    x = nbx.tensor([[3.0, 2.9, -1.0, -1.05]])
    assert int(sample(x, temperature=0, repetition_penalty=1.2, prev_tokens=[[0]])[0]) == 1  # 3/1.2 < 2.9
    y = nbx.tensor([[-1.0, -1.05]])
    assert int(sample(y, temperature=0, repetition_penalty=1.2, prev_tokens=[[0, 0, -1]])[0]) == 1  # -1.2 < -1.05


def test_greedy_consumes_the_stream_like_sampling():
    g = gen()
    sample(nbx.zeros(3, 10), temperature=0, generator=g)
    assert g.get_offset() == 15  # ceil(rows * V * 2 / 4): every call reserves the same range whatever the mode


# ---------------------------------------------------------------------------------------------------------
# the kept set against the float64 reference
# ---------------------------------------------------------------------------------------------------------
def _logits(rows: int, V: int, dtype, seed: int) -> nbx.Tensor:
    rng = np.random.default_rng(seed)
    return nbx.tensor(rng.normal(scale=2.0, size=(rows, V)), dtype=dtype)


@pytest.mark.parametrize("dtype", [nbx.float32, nbx.bfloat16, nbx.float16], ids=str)
@pytest.mark.parametrize("cfg", CONFIGS + [dict(temperature=0)], ids=str)
def test_mask_matches_reference(dtype, cfg):
    lg = _logits(40, 257, dtype, 1)  # bfloat16 logits have many exact ties: the rank order breaks them by index
    prev = nbx.randint(0, 257, (40, 12), generator=gen(2))
    kw = _kw(cfg, prev)
    probs, keep = sample_reference(lg, **kw)
    assert np.array_equal(sampling_mask(lg, **kw), keep)
    assert np.allclose(probs.sum(axis=1), 1.0) and np.all(probs[~keep] == 0) and np.all(probs[keep] > 0)


def test_filters_by_hand():
    x = np.log(np.array([[0.4, 0.3, 0.2, 0.1]]))
    keep = lambda **k: sampling_mask(x, **k)[0].tolist()  # noqa: E731
    assert keep(top_k=2) == [True, True, False, False]
    assert keep(top_p=0.69) == [True, True, False, False]   # mass before token 2 is 0.7: not < 0.69
    assert keep(top_p=0.71) == [True, True, True, False]
    assert keep(top_p=0.0) == [True, False, False, False]   # the first token is always kept
    assert keep(min_p=0.5) == [True, True, True, False]     # p >= 0.5 * 0.4
    assert keep(top_p=0.75) == [True, True, True, False]
    assert keep(top_k=3, top_p=0.75) == [True, True, False, False]  # over the renormalised top 3: 0.444 + 0.333
    ties = np.log(np.array([[0.25, 0.25, 0.25, 0.25]]))
    assert sampling_mask(ties, top_k=2)[0].tolist() == [True] * 4  # ties with the k-th value are kept (HF)
    assert sampling_mask(ties, top_p=0.5)[0].tolist() == [True, True, False, False]  # ties ranked by index
    probs, _ = sample_reference(x, top_p=0.71)
    assert np.allclose(probs[0], [0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0.0])


# ---------------------------------------------------------------------------------------------------------
# sampled frequencies
# ---------------------------------------------------------------------------------------------------------
@not_interp
@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
def test_frequencies_chi_square(cfg):
    base = np.array([[1.0, 0.2, -0.5, 2.0, 0.0, 1.5, -3.0, 0.9]])
    rows = 20000
    lg = nbx.tensor(np.repeat(base, rows, axis=0), dtype=nbx.float32)
    prev = nbx.tensor([[3, 5, 5, -1]] * rows)
    kw = _kw(cfg, prev)
    tok = sample(lg, generator=gen(11), **kw).numpy()
    probs, keep = sample_reference(base, **_kw(cfg, prev[:1]))
    counts = np.bincount(tok, minlength=base.shape[1])
    assert np.all(counts[~keep[0]] == 0)
    assert chi_square_pvalue(counts, probs[0]) > ALPHA


@not_interp
def test_samples_stay_in_the_kept_set():
    lg = _logits(300, 500, nbx.bfloat16, 5)
    for cfg in CONFIGS:
        kw = _kw(cfg, nbx.randint(0, 500, (300, 20), generator=gen(3)))
        tok = sample(lg, generator=gen(4), **kw).numpy()
        assert np.all(sampling_mask(lg, **kw)[np.arange(300), tok])


def test_determinism_under_a_seed():
    lg = _logits(8, 100, nbx.float32, 9)
    a = sample(lg, top_p=0.9, generator=gen(5))
    assert np.array_equal(a.numpy(), sample(lg, top_p=0.9, generator=gen(5)).numpy())
    g = gen(5)
    draws = [sample(lg, top_p=0.9, generator=g).numpy() for _ in range(6)]
    assert any(not np.array_equal(draws[0], d) for d in draws[1:])
    assert g.get_offset() == 6 * 8 * 100 * 2 // 4


# ---------------------------------------------------------------------------------------------------------
# errors and invalid rows
# ---------------------------------------------------------------------------------------------------------
def test_parameter_errors():
    x = nbx.zeros(2, 5)
    for kw in (dict(temperature=-1.0), dict(top_k=-1), dict(top_p=1.5), dict(min_p=-0.1),
               dict(repetition_penalty=0.0), dict(temperature=float("nan"))):
        with pytest.raises(ValueError):
            sample(x, **kw)
    with pytest.raises(TypeError):
        sample(np.zeros(3))
    with pytest.raises(RuntimeError, match="float16"):
        sample(nbx.zeros(2, 3, dtype=nbx.int64))
    with pytest.raises(RuntimeError, match="\\(V,\\) or \\(rows, V\\)"):
        sample(nbx.zeros(2, 2, 2))


def test_invalid_rows():
    nan = nbx.tensor([[0.0, float("nan")], [0.0, 1.0]])
    with pytest.raises(RuntimeError, match="NaN"):
        sample(nan)
    with pytest.raises(RuntimeError, match="NaN"):
        sample(nan, temperature=0)
    with pytest.raises(RuntimeError, match="\\+inf"):
        sample(nbx.tensor([[0.0, float("inf")]]))
    with pytest.raises(RuntimeError, match="no finite logit"):
        sample(nbx.tensor([[float("-inf"), float("-inf")]]))
    with pytest.raises(IndexError, match=">= V"):
        sample(nbx.zeros(1, 4), repetition_penalty=1.5, prev_tokens=[[4]])
    out = sample(nan, validate=False, generator=gen())
    assert out.tolist()[0] == -1 and out.tolist()[1] in (0, 1)
    assert sample(nbx.zeros(1, 4), repetition_penalty=1.5, prev_tokens=[[9]], validate=False).tolist() == [-1]


def test_masked_tokens_are_never_drawn():
    x = nbx.tensor([[0.0, float("-inf"), 0.0, float("-inf")]] * 2000)
    tok = sample(x, generator=gen()).numpy() if not interpreting() else np.array([0, 2])
    assert set(np.unique(tok).tolist()) <= {0, 2}


# ---------------------------------------------------------------------------------------------------------
# kernel == CPU, bit for bit (interpreter tier)
# ---------------------------------------------------------------------------------------------------------
@interp
@pytest.mark.parametrize("dtype", [nbx.float32, nbx.bfloat16, nbx.float16, nbx.float64], ids=str)
def test_kernel_equals_cpu(dtype):
    rec = get("sample_tokens")
    rows, V = 3, 2100  # three chunks of the interpreter's BLOCK: ties and winners across chunk borders
    lg = _logits(rows, V, dtype, 21)
    lg[0, 1500:1510].fill_(float(lg[0].numpy().astype(np.float64).max()) + 1.0)  # a tie for the max across chunks
    prev = nbx.randint(0, V, (rows, 30), generator=gen(22))
    configs = CONFIGS + [dict(temperature=0), dict(top_k=1), dict(top_k=7, top_p=0.3)]
    if dtype is not nbx.float32:  # the other dtypes differ only in the load: a few configs keep the tier fast
        configs = [dict(), dict(top_p=0.7), dict(temperature=0.8, top_k=4, top_p=0.8, min_p=0.05),
                   dict(temperature=0), dict(repetition_penalty=1.8, top_p=0.9)]
    for cfg in configs:
        p = SamplingParams(**cfg)
        pv = prev if "repetition_penalty" in cfg else None
        a, b = nbx.empty(rows, dtype=nbx.int64), nbx.empty(rows, dtype=nbx.int64)
        rec.cpu(a, 0xC0FFEE, 2**33 + 1, lg, pv, p)
        rec.triton(b, 0xC0FFEE, 2**33 + 1, lg, pv, p)
        assert a.tolist() == b.tolist(), cfg


@interp
def test_kernel_invalid_rows_equal_cpu():
    rec = get("sample_tokens")
    lg = nbx.tensor([[0.0, float("nan"), 1.0], [0.0, float("inf"), 1.0], [float("-inf")] * 3, [0.5, 0.2, 0.1]])
    prev = nbx.tensor([[0], [1], [2], [7]])
    for cfg in (dict(), dict(temperature=0), dict(repetition_penalty=2.0, top_p=0.5)):
        p = SamplingParams(**cfg)
        pv = prev if "repetition_penalty" in cfg else None
        a, b = nbx.empty(4, dtype=nbx.int64), nbx.empty(4, dtype=nbx.int64)
        rec.cpu(a, 1, 0, lg, pv, p)
        rec.triton(b, 1, 0, lg, pv, p)
        assert a.tolist() == b.tolist(), cfg

"""Distributions: moments and a Kolmogorov-Smirnov (or chi-square) test per distribution, value sets, and
PyTorch's argument rules and errors.

Sizes and bounds make a false failure less likely than 1e-6 (see random_stats); seeds are fixed so runs
repeat. In the interpreter tier the same tests run through the Triton kernels, except the ones whose kernels
launch a program per sample (multinomial with replacement) or need thousands of launches (randperm's
uniformity), which are proven bit-equal to the CPU in test_philox.py instead.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from random_stats import chi_square_pvalue, hoeffding_bound, ks_bound, ks_statistic, normal_cdf

import nbxtensor as nbx
from nbxtensor.random import Generator
from nbxtensor.runtime.launcher import interpreting

ALPHA = 1e-6
FLOATS = [nbx.float32, nbx.float64, nbx.float16, nbx.bfloat16]
DIGITS = {"float32": 24, "float64": 53, "float16": 11, "bfloat16": 8}
N = 1 << 15 if interpreting() else 1 << 16
not_interp = pytest.mark.skipif(interpreting(), reason="many launches or a program per sample: too slow under the "
                                "interpreter; the kernel is proven bit-equal to the CPU in test_philox.py")


def gen(seed: int = 2024) -> Generator:
    return Generator().manual_seed(seed)


def f64(t) -> np.ndarray:
    return np.asarray(t.numpy(), dtype=np.float64)


# ---------------------------------------------------------------------------------------------------------
# uniform
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rand_grid_range_and_ks(dtype):
    x = nbx.rand(N, dtype=dtype, generator=gen())
    assert x.dtype is dtype and x.shape == (N,)
    v = f64(x)
    d = DIGITS[dtype.name]
    assert v.min() >= 0.0 and v.max() < 1.0
    assert np.all(v * 2.0**d == np.floor(v * 2.0**d))  # on the grid of 2**-digits: exact in the dtype
    grid_cdf = lambda t: np.minimum((np.floor(t * 2.0**d) + 1.0) / 2.0**d, 1.0)  # noqa: E731  (exact, discrete)
    assert ks_statistic(v, grid_cdf) < ks_bound(N, ALPHA)
    assert abs(v.mean() - 0.5) < hoeffding_bound(N, ALPHA)
    assert abs(np.mean((v - 0.5) ** 2) - 1 / 12) < 0.25 * hoeffding_bound(N, ALPHA) + 2.0 ** -d


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_uniform_bounds_and_ks(dtype):
    a, b = -3.0, 5.0
    v = f64(nbx.empty(N, dtype=dtype).uniform_(a, b, generator=gen(3)))
    assert v.min() >= a and v.max() < b
    ulp = 2.0 ** (3 - DIGITS[dtype.name])  # the dtype's spacing near |8|: rounding moves the CDF by < that / 8
    assert ks_statistic(v, lambda t: np.clip((t - a) / (b - a), 0, 1)) < ks_bound(N, ALPHA) + ulp / (b - a) + \
        2.0 ** -DIGITS[dtype.name]


def test_uniform_never_returns_to():
    # float16 near 2048 has spacing 2: a + (b - a) * u rounds up to b often; those values must become a.
    v = f64(nbx.empty(4096, dtype=nbx.float16).uniform_(2040.0, 2048.0, generator=gen()))
    assert v.max() < 2048.0 and v.min() >= 2040.0


def test_uniform_from_keyword_and_noncontiguous():
    x = nbx.zeros(4, 6)
    xt = x.t()
    xt.uniform_(**{"from": 2.0, "to": 3.0}, generator=gen())
    v = f64(x)
    assert v.min() >= 2.0 and v.max() < 3.0
    # a non-contiguous tensor gets the same values, in its row-major order, as a contiguous one
    y = nbx.zeros(6, 4).uniform_(2.0, 3.0, generator=gen())
    assert np.array_equal(f64(xt), f64(y))


# ---------------------------------------------------------------------------------------------------------
# normal
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_randn_ks_and_moments(dtype):
    v = f64(nbx.randn(N, dtype=dtype, generator=gen(11)))
    rounding = 0.25 * 2.0 ** (1 - DIGITS[dtype.name])  # max over x of phi(x) * |x| * relative rounding
    assert ks_statistic(v, normal_cdf) < ks_bound(N, ALPHA) + rounding
    z = 5.5  # two-sided normal tail 4e-8
    assert abs(v.mean()) < z / math.sqrt(N)
    assert abs(v.var() - 1.0) < z * math.sqrt(2.0 / N) + 4 * rounding
    assert np.all(np.isfinite(v)) and np.abs(v).max() < 7.0  # sqrt(-2 ln 2**-32) = 6.66 (float64: 8.6)


def test_randn_pairs_are_independent():
    # Box-Muller's two outputs are independent normals: the correlation of even and odd elements is ~0.
    v = f64(nbx.randn(N, dtype=nbx.float64, generator=gen(12)))
    r = np.corrcoef(v[0::2], v[1::2])[0, 1]
    assert abs(r) < 5.5 / math.sqrt(N / 2)


@pytest.mark.parametrize("dtype", [nbx.float32, nbx.float64], ids=str)
def test_normal_mean_std(dtype):
    mean, std = 3.0, 0.5
    v = f64(nbx.empty(N, dtype=dtype).normal_(mean, std, generator=gen(13)))
    assert ks_statistic(v, lambda t: normal_cdf((t - mean) / std)) < ks_bound(N, ALPHA)
    assert f64(nbx.empty(8).normal_(2.0, 0.0, generator=gen())).tolist() == [2.0] * 8


# ---------------------------------------------------------------------------------------------------------
# integers
# ---------------------------------------------------------------------------------------------------------
def test_randint_chi_square():
    x = nbx.randint(3, 10, (N,), generator=gen(21))
    assert x.dtype is nbx.int64
    v = x.numpy()
    assert v.min() >= 3 and v.max() < 10
    counts = np.bincount(v - 3, minlength=7)
    assert chi_square_pvalue(counts, np.full(7, 1 / 7)) > ALPHA


def test_randint_full_int64_range():
    v = nbx.randint(-2**63, 2**63 - 1, (N,), generator=gen(22)).numpy()
    top = (v.view(np.uint64) >> np.uint64(61)).astype(np.int64)  # the top 3 bits: 8 equally likely values
    assert chi_square_pvalue(np.bincount(top, minlength=8), np.full(8, 1 / 8)) > ALPHA


@pytest.mark.parametrize("dtype", [nbx.uint8, nbx.int8, nbx.int16, nbx.int32, nbx.bool, nbx.float16, nbx.bfloat16,
                                   nbx.float32, nbx.float64], ids=str)
def test_randint_dtypes(dtype):
    hi = 2 if dtype is nbx.bool else 100
    x = nbx.randint(0, hi, (4000,), dtype=dtype, generator=gen(23))
    assert x.dtype is dtype
    v = f64(x)
    assert v.min() >= 0 and v.max() < hi and np.all(v == np.floor(v)) and len(np.unique(v)) == hi


def test_randint_signatures_and_errors():
    assert nbx.randint(5, (3,), generator=gen()).shape == (3,)
    assert nbx.randint(2, 5, (2, 2), generator=gen()).shape == (2, 2)
    assert nbx.randint(low=2, high=5, size=(3,), generator=gen()).numpy().min() >= 2
    with pytest.raises(RuntimeError, match="from' to be less than 'to'"):
        nbx.randint(5, 3, (3,))
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for uint8"):
        nbx.randint(0, 300, (3,), dtype=nbx.uint8)
    with pytest.raises(RuntimeError, match="from is out of bounds for uint8"):
        nbx.randint(-1, 3, (3,), dtype=nbx.uint8)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for bool"):
        nbx.randint(0, 3, (3,), dtype=nbx.bool)
    with pytest.raises(RuntimeError, match="2\\^11"):
        nbx.randint(0, 2**11 + 2, (3,), dtype=nbx.float16)
    with pytest.raises(TypeError):
        nbx.randint(0, 3, 3)


@not_interp
def test_randperm_is_a_uniform_permutation():
    g = gen(31)
    counts = {}
    trials = 12000
    for _ in range(trials):
        p = tuple(nbx.randperm(4, generator=g).tolist())
        counts[p] = counts.get(p, 0) + 1
    perms = list(itertools.permutations(range(4)))
    assert set(counts) <= set(perms)
    assert chi_square_pvalue([counts.get(p, 0) for p in perms], np.full(24, 1 / 24)) > ALPHA


@pytest.mark.parametrize("dtype", [nbx.int64, nbx.int32, nbx.float32, nbx.uint8], ids=str)
def test_randperm_dtypes(dtype):
    x = nbx.randperm(200, dtype=dtype, generator=gen())
    assert x.dtype is dtype and sorted(f64(x).tolist()) == list(range(200))
    assert nbx.randperm(0).shape == (0,)
    with pytest.raises(RuntimeError, match="negative dimension"):
        nbx.randperm(-1)
    with pytest.raises(RuntimeError, match="out of bounds"):
        nbx.randperm(300, dtype=nbx.uint8)


# ---------------------------------------------------------------------------------------------------------
# Bernoulli and dropout
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_bernoulli_frequencies(dtype):
    probs = [0.0, 1e-3, 0.25, 0.5, 0.9, 1.0]
    n = N // 8
    p = nbx.tensor(np.repeat(np.array(probs), n).reshape(len(probs), n), dtype=dtype)
    x = nbx.bernoulli(p, generator=gen(41))
    assert x.dtype is dtype and x.shape == p.shape
    v = f64(x)
    assert set(np.unique(v).tolist()) <= {0.0, 1.0}
    for row, q in zip(v, f64(p)[:, 0]):
        assert abs(row.mean() - q) < hoeffding_bound(n, ALPHA)
    assert v[0].sum() == 0 and v[-1].sum() == n


def test_bernoulli_scalar_and_inplace():
    v = f64(nbx.bernoulli(nbx.zeros(N), 0.3, generator=gen(42)))
    assert abs(v.mean() - 0.3) < hoeffding_bound(N, ALPHA)
    for dt in (nbx.int64, nbx.bool, nbx.uint8):
        x = nbx.zeros(4000, dtype=dt).bernoulli_(0.5, generator=gen(43))
        assert x.dtype is dt and abs(f64(x).mean() - 0.5) < hoeffding_bound(4000, ALPHA)
    t = nbx.zeros(2, 3).bernoulli_(nbx.tensor([0.0, 1.0, 0.0]), generator=gen())
    assert t.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]


def test_bernoulli_errors():
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        nbx.bernoulli(nbx.tensor([1.5, 0.0]))
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        nbx.bernoulli(nbx.tensor([float("nan")]))
    with pytest.raises(RuntimeError, match="expects p to be in \\[0, 1\\]"):
        nbx.bernoulli(nbx.zeros(2), p=1.3)
    with pytest.raises(NotImplementedError):
        nbx.bernoulli(nbx.tensor([1, 0]))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_dropout(dtype):
    F = nbx.nn.functional
    x = nbx.full((N,), 2.0, dtype=dtype)
    assert F.dropout(x, 0.5) is x and F.dropout(x, 0.5, training=False) is x
    p = 0.3
    y = F.dropout(x, p, training=True, generator=gen(51))
    v = f64(y)
    kept = v != 0
    assert abs((~kept).mean() - p) < hoeffding_bound(N, ALPHA)
    s64 = np.array([2.0 * (1.0 / (1.0 - p))])  # float64 arithmetic, then one rounding per narrower dtype
    scaled = float((s64 if dtype is nbx.float64 else s64.astype(np.float32).astype(dtype.numpy))[0])
    assert np.all(v[kept] == scaled)
    assert np.array_equal(f64(F.dropout(x, 0.0, training=True, generator=gen())), f64(x))
    assert np.all(f64(F.dropout(x, 1.0, training=True, generator=gen())) == 0)


def test_dropout_rules():
    F = nbx.nn.functional
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        F.dropout(nbx.ones(3), 1.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        F.dropout(nbx.ones(3, dtype=nbx.int64), 0.5, training=True)
    y = F.dropout(nbx.tensor([float("nan"), float("inf"), 1.0]), 1.0, training=True)
    assert np.isnan(f64(y)[:2]).all() and f64(y)[2] == 0.0  # x * 0, as PyTorch: NaN and inf stay NaN
    x = nbx.ones(64)
    r = F.dropout(x, 0.5, training=True, inplace=True, generator=gen())
    assert r is x and set(f64(x).tolist()) <= {0.0, 2.0}


# ---------------------------------------------------------------------------------------------------------
# multinomial
# ---------------------------------------------------------------------------------------------------------
W = np.array([0.5, 0.0, 2.0, 1.0, 0.25, 3.0])


@not_interp
def test_multinomial_with_replacement_chi_square():
    x = nbx.multinomial(nbx.tensor(W), N, replacement=True, generator=gen(61))
    assert x.dtype is nbx.int64 and x.shape == (N,)
    counts = np.bincount(x.numpy(), minlength=W.size)
    assert counts[1] == 0
    assert chi_square_pvalue(counts, W / W.sum()) > ALPHA


def test_multinomial_without_replacement():
    rows = 4000 if not interpreting() else 1000
    w = nbx.tensor(np.tile(W, (rows, 1)), dtype=nbx.float32)
    x = nbx.multinomial(w, 2, generator=gen(62)).numpy()
    assert x.shape == (rows, 2) and np.all(x[:, 0] != x[:, 1]) and not np.any(x == 1)
    # the first draw follows w; the ordered pair (i, j) has probability w_i/S * w_j/(S - w_i)
    assert chi_square_pvalue(np.bincount(x[:, 0], minlength=6), W / W.sum()) > ALPHA
    S = W.sum()
    pairs = [(i, j) for i in range(6) for j in range(6) if i != j and W[i] > 0 and W[j] > 0]
    probs = np.array([W[i] / S * W[j] / (S - W[i]) for i, j in pairs])
    idx = {p: k for k, p in enumerate(pairs)}
    counts = np.bincount([idx[(a, b)] for a, b in x.tolist()], minlength=len(pairs))
    assert chi_square_pvalue(counts, probs) > ALPHA


def test_multinomial_all_categories():
    x = nbx.multinomial(nbx.tensor([1.0, 2.0, 3.0]), 3, generator=gen()).tolist()
    assert sorted(x) == [0, 1, 2]
    assert nbx.multinomial(nbx.rand(2, 5, generator=gen()), 1, generator=gen()).shape == (2, 1)


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match="n_sample <= 0"):
        nbx.multinomial(nbx.tensor([0.5, 1.0]), 0)
    with pytest.raises(RuntimeError, match="without replacement"):
        nbx.multinomial(nbx.tensor([0.5, 1.0]), 3)
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        nbx.multinomial(nbx.tensor([0.5, 0.0]), 2)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        nbx.multinomial(nbx.tensor([0.0, 0.0]), 1)
    for bad in ([-1.0, 1.0], [float("nan"), 1.0], [float("inf"), 1.0]):
        with pytest.raises(RuntimeError, match="inf`, `nan` or element < 0"):
            nbx.multinomial(nbx.tensor(bad), 1)
    with pytest.raises(RuntimeError, match="floating-point"):
        nbx.multinomial(nbx.tensor([1, 1]), 1)
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        nbx.multinomial(nbx.ones(2, 2, 2), 1)


# ---------------------------------------------------------------------------------------------------------
# shapes, dtypes and argument rules shared by the factories
# ---------------------------------------------------------------------------------------------------------
def test_factory_arguments():
    assert nbx.rand(2, 3).shape == (2, 3) and nbx.rand((2, 3)).shape == (2, 3)
    assert nbx.rand(size=(2, 3)).shape == (2, 3) and nbx.rand([]).shape == ()
    assert nbx.rand(2).dtype is nbx.get_default_dtype()
    assert nbx.randn(2, 2, dtype=nbx.float64).dtype is nbx.float64
    like = nbx.zeros(3, 2, dtype=nbx.float16)
    assert nbx.rand_like(like).dtype is nbx.float16 and nbx.randn_like(like).shape == (3, 2)
    assert nbx.randint_like(like, 5).dtype is nbx.float16
    out = nbx.empty(4)
    assert nbx.rand(4, out=out, generator=gen()) is out
    a = nbx.rand(5, generator=gen(9))
    assert np.array_equal(a.numpy(), nbx.rand(5, generator=gen(9)).numpy())
    assert not np.array_equal(a.numpy(), nbx.rand(5, generator=gen(10)).numpy())


def test_dtype_errors_match_pytorch_types():
    with pytest.raises(NotImplementedError, match="check_uniform_bounds"):
        nbx.rand(2, dtype=nbx.int64)
    with pytest.raises(NotImplementedError, match="normal_kernel"):
        nbx.randn(2, dtype=nbx.int64)
    with pytest.raises(NotImplementedError):
        nbx.rand(2, dtype=nbx.complex64)
    with pytest.raises(NotImplementedError):
        nbx.rand(2, dtype=nbx.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="negative dimension"):
        nbx.rand(-1)
    with pytest.raises(RuntimeError, match="from=2 > to=1"):
        nbx.zeros(3).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="to is out of bounds for float32"):
        nbx.zeros(3).uniform_(0, float("inf"))
    with pytest.raises(RuntimeError, match="to is out of bounds for float16"):
        nbx.zeros(3, dtype=nbx.float16).uniform_(0, 1e6)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        nbx.zeros(3).normal_(0, -1)

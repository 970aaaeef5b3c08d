"""Statistics for the random tests, in NumPy (SciPy is not a dependency).

Every bound here holds with probability >= 1 - ALPHA for correct samples, so a correct implementation fails a
test with probability below 1e-6 whatever the seed (the tests use fixed seeds, so they are also repeatable).
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 1e-6


def ks_statistic(samples, cdf) -> float:
    """The one-sample Kolmogorov-Smirnov statistic ``sup |F_n - F|`` of ``samples`` against ``cdf`` (a
    vectorised callable). Ties are handled: the sup over the sorted points compares ``F`` with the empirical
    CDF just before (``(i-1)/n``) and at (``i/n``) each point, and ties only lower the inner terms."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = x.size
    f = cdf(x)
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))


def ks_bound(n: int, alpha: float = ALPHA) -> float:
    """``t`` with ``P(D_n > t) <= alpha`` for a continuous ``F``: the Dvoretzky-Kiefer-Wolfowitz inequality with
    Massart's constant, ``P(D_n > t) <= 2 exp(-2 n t^2)`` (Massart, Ann. Probab. 18, 1990). For a discrete
    ``F`` the test is conservative."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def hoeffding_bound(n: int, alpha: float = ALPHA) -> float:
    """``t`` with ``P(|mean - mu| >= t) <= alpha`` for n independent values in [0, 1] (Hoeffding, 1963)."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def normal_cdf(x):
    """Phi(x), from ``math.erfc``."""
    erfc = np.frompyfunc(math.erfc, 1, 1)
    return 0.5 * erfc(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0)).astype(np.float64)


def _gammq(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x) (series below a + 1, Lentz's continued fraction
    above; Numerical Recipes, 3rd ed., section 6.2)."""
    if x <= 0:
        return 1.0
    lg = math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(10000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return 1.0 - total * math.exp(-x + a * math.log(x) - lg)
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - lg) * h


def chi2_sf(stat: float, dof: int) -> float:
    """P(X >= stat) for X chi-square with ``dof`` degrees of freedom."""
    return _gammq(dof / 2.0, stat / 2.0)


def chi_square_pvalue(counts, probs) -> float:
    """Pearson's chi-square p-value of observed ``counts`` against probabilities ``probs`` (categories with zero
    probability must have zero counts; they are checked separately by the callers)."""
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    keep = probs > 0
    n = counts.sum()
    expected = n * probs[keep]
    stat = float(np.sum((counts[keep] - expected) ** 2 / expected))
    return chi2_sf(stat, int(keep.sum()) - 1)

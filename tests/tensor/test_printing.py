"""``repr`` as PyTorch prints (strings taken from PyTorch 2.13 with ``torch.`` -> ``nbx.``; the parity suite
compares live against PyTorch)."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx

F32_SEVENTHS = np.arange(30, dtype=np.float32) / np.float32(7)

CASES = [
    (lambda: nbx.tensor([0.5, -1.25, 3.0]), "tensor([ 0.5000, -1.2500,  3.0000])"),
    (lambda: nbx.tensor([1.0, 2.0, -3.0]), "tensor([ 1.,  2., -3.])"),
    (lambda: nbx.tensor([1e-5, 0.5]), "tensor([1.0000e-05, 5.0000e-01])"),
    (lambda: nbx.tensor([float("nan"), float("inf"), -float("inf"), 1.5]), "tensor([   nan,    inf,   -inf, 1.5000])"),
    (lambda: nbx.tensor([1.0, 2.5], dtype=nbx.float16), "tensor([1.0000, 2.5000], dtype=nbx.float16)"),
    (lambda: nbx.tensor([1, -2, 3], dtype=nbx.int8), "tensor([ 1, -2,  3], dtype=nbx.int8)"),
    (lambda: nbx.tensor([[1, 2], [30, 4]]), "tensor([[ 1,  2],\n        [30,  4]])"),
    (lambda: nbx.tensor([True, False]), "tensor([ True, False])"),
    (lambda: nbx.tensor([1 + 2j, -0.5j]), "tensor([1.+2.0000j, -0.-0.5000j])"),
    (lambda: nbx.zeros(0), "tensor([])"),
    (lambda: nbx.zeros(2, 0, dtype=nbx.int32), "tensor([], size=(2, 0), dtype=nbx.int32)"),
    (lambda: nbx.tensor(3.5), "tensor(3.5000)"),
    (lambda: nbx.tensor(7, dtype=nbx.int16), "tensor(7, dtype=nbx.int16)"),
    (lambda: nbx.arange(8).view(2, 2, 2), "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"),
    (lambda: nbx.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (lambda: nbx.tensor(F32_SEVENTHS),
     "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n"
     "        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n"
     "        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n"
     "        3.8571, 4.0000, 4.1429])"),
    (lambda: nbx.tensor(F32_SEVENTHS[:20], dtype=nbx.bfloat16),
     "tensor([0.0000, 0.1426, 0.2852, 0.4277, 0.5703, 0.7148, 0.8555, 1.0000, 1.1406,\n"
     "        1.2891, 1.4297, 1.5703, 1.7109, 1.8594, 2.0000, 2.1406, 2.2812, 2.4219,\n"
     "        2.5781, 2.7188], dtype=nbx.bfloat16)"),
    (lambda: nbx.arange(2000.0).view(40, 50),
     "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
     "         4.9000e+01],\n"
     "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
     "         9.9000e+01],\n"
     "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
     "         1.4900e+02],\n"
     "        ...,\n"
     "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
     "         1.8990e+03],\n"
     "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
     "         1.9490e+03],\n"
     "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
     "         1.9990e+03]])"),
]


@pytest.mark.parametrize("make,want", CASES)
def test_repr(make, want):
    x = make()
    assert repr(x) == want and str(x) == want


def test_dtype_suffix_rules_follow_the_default_dtype():
    assert repr(nbx.tensor([1.5], dtype=nbx.float64)) == "tensor([1.5000], dtype=nbx.float64)"
    try:
        nbx.set_default_dtype(nbx.float64)
        assert repr(nbx.tensor([1.5], dtype=nbx.float64)) == "tensor([1.5000])"
        assert repr(nbx.tensor([1.5], dtype=nbx.float32)) == "tensor([1.5000], dtype=nbx.float32)"
        assert repr(nbx.tensor([1j], dtype=nbx.complex128)) == "tensor([0.+1.j])"
        assert repr(nbx.zeros(0, dtype=nbx.float64)) == "tensor([])"
        assert repr(nbx.zeros(0, dtype=nbx.float32)) == "tensor([], dtype=nbx.float32)"
    finally:
        nbx.set_default_dtype(nbx.float32)


def test_views_print_their_values():
    x = nbx.arange(6).view(2, 3)
    assert repr(x.t()) == "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])"
    assert repr(x[:, 1]) == "tensor([1, 4])" and repr(x[1, 2]) == "tensor(5)"
    assert repr(nbx.tensor(2.0).expand(3)) == "tensor([2., 2., 2.])"


def test_every_dtype_prints():
    for d in nbx.dtypes.DTYPES:
        r = repr(nbx.ones(2, dtype=d))
        assert r.startswith("tensor([") and (d.name in r) == (d not in (nbx.float32, nbx.int64, nbx.bool,
                                                                         nbx.complex64))


def test_summarised_print_reads_only_the_edges():
    from nbxtensor.tensor import printing
    x = nbx.zeros(3000, 5, 4000, dtype=nbx.float16)
    a, cut = printing._edges(x)
    assert a.shape == (6, 5, 6) and cut == (True, False, True)
    calls = []
    real = nbx.tensor.core._download

    def spy(t):
        calls.append(t.numel())
        return real(t)
    try:
        printing_core = __import__("nbxtensor.tensor.core", fromlist=["_download"])
        printing_core._download = spy
        text = repr(x)
    finally:
        printing_core._download = real
    assert max(calls) <= 3 * 5 * 3 and len(calls) == 4
    assert text.startswith("tensor([[[0., 0., 0.,  ..., 0., 0., 0.],")

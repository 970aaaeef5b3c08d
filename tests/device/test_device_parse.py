"""``nbx.device`` parsed as ``torch.device`` (c10::Device's string grammar), and ``as_device``."""

from __future__ import annotations

import pickle

import pytest

import nbxtensor as nbx
from nbxtensor.device import as_device
from nbxtensor.device.base import KNOWN_TYPES


@pytest.mark.parametrize("args,type_,index", [
    (("cpu",), "cpu", None), (("cuda",), "cuda", None), (("cuda:1",), "cuda", 1), (("cuda", 1), "cuda", 1),
    (("cuda:0",), "cuda", 0), (("cpu:0",), "cpu", 0), (("cpu", 0), "cpu", 0), (("meta",), "meta", None),
    (("mps:0",), "mps", 0), (("hip:12",), "hip", 12), (("xla",), "xla", None), ((3,), "cuda", 3),
])
def test_forms(args, type_, index):
    d = nbx.device(*args)
    assert (d.type, d.index) == (type_, index)
    assert nbx.device(d) == d and nbx.device(str(d)) == d


@pytest.mark.parametrize("bad", ["CPU", " cuda", "cuda:", "cuda:1:2", "cuda:01", "cuda:+1", "cuda:-1", "foo",
                                 "cuda:1 ", "", "cuda:x"])
def test_invalid_strings_raise_runtime_error_naming_them(bad):
    with pytest.raises(RuntimeError, match="Invalid device string: '" + bad.replace("+", r"\+") + "'"):
        nbx.device(bad)


def test_other_errors():
    with pytest.raises(RuntimeError, match="must not be negative"):
        nbx.device("cuda", -1)
    with pytest.raises(RuntimeError, match="must not be negative"):
        nbx.device(-1)
    with pytest.raises(RuntimeError, match="must not include an index"):
        nbx.device("cuda:1", 1)
    for bad in (True, 1.0, None, [0]):
        with pytest.raises(TypeError, match="expected a string, an int or a device"):
            nbx.device(bad)
    with pytest.raises(TypeError, match="argument 'index'"):
        nbx.device("cuda", "1")


def test_equality_hash_str_repr():
    assert nbx.device("cuda") != nbx.device("cuda:0")  # as PyTorch: no index is not index 0
    assert nbx.device("cuda", 1) == nbx.device("cuda:1")
    assert hash(nbx.device("cuda:1")) == hash(nbx.device("cuda", 1))
    assert str(nbx.device("cuda", 1)) == "cuda:1" and str(nbx.device("cpu")) == "cpu"
    assert repr(nbx.device("cuda:2")) == "device(type='cuda', index=2)"
    assert repr(nbx.device("cpu")) == "device(type='cpu')"
    # Difference: comparing with a string parses it (PyTorch's torch.device("cpu") == "cpu" is False)
    assert nbx.device("cpu") == "cpu" and nbx.device("cuda:1") == "cuda:1" and nbx.device("cpu") != "cuda"
    assert nbx.device("cpu") != "not a device" and nbx.device("cpu") != 3
    assert {nbx.device("cpu"), nbx.device("cpu")} == {nbx.device("cpu")}


def test_immutable_and_picklable():
    d = nbx.device("cuda:1")
    with pytest.raises(AttributeError):
        d.index = 2
    assert pickle.loads(pickle.dumps(d)) == d


def test_known_types_cover_pytorchs_parser():
    for t in ("cpu", "cuda", "mps", "meta", "xpu", "hip", "xla", "lazy", "privateuseone"):
        assert t in KNOWN_TYPES


def test_as_device_resolves_cpu_and_refuses_types_without_backend():
    assert as_device(None) == nbx.device("cpu")
    assert as_device("cpu:0") == nbx.device("cpu")  # canonical form of the cpu device has no index
    assert as_device(nbx.device("cpu")) == nbx.device("cpu")
    with pytest.raises(RuntimeError, match="device type 'meta' has no backend"):
        as_device("meta")
    with pytest.raises(RuntimeError, match="cpu device index must be 0"):
        as_device("cpu:1")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        nbx.zeros(2, device="gpu")

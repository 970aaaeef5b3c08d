"""Against the reference ``safetensors`` package: files it writes load here bit-exactly, files written here load
there, the bytes written are identical, and the header rules agree (ours are a superset of its refusals).

Skipped where ``safetensors`` is not installed (it belongs to the test requirements; nbxtensor never imports it).
The tests marked ``parity`` also go through ``safetensors.torch`` and PyTorch.
"""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.dtypes.table import DTYPES
from nbxtensor.io import SafetensorError
from nbxtensor.io.header import parse_bytes

from st_helpers import raw_bytes

safetensors = pytest.importorskip("safetensors")

CODED = [d for d in DTYPES if d.safetensors]
RNG = np.random.default_rng(2)

# Rules by which we refuse files the reference accepts (documented in nbxtensor.io.header).
STRICTER = {"duplicate-name", "bool-value", "unsupported-dtype"}


def _bits(d, shape):
    n = int(np.prod(shape))
    if d.kind == "bool":
        return RNG.integers(0, 2, n).astype(np.bool_).reshape(shape)
    return RNG.integers(0, 256, n * d.itemsize, dtype=np.uint8).view(d.numpy).reshape(shape)


def _reference_write(arrays: dict, path=None, metadata=None):
    """Write host arrays (keyed by name; dtype from the table) with the reference's low-level serializer."""
    specs = {}
    keep = []
    for k, a in arrays.items():
        a = np.require(a, requirements='C')  # (ascontiguousarray would make a 0-d array 1-d)
        keep.append(a)
        d = nbx.dtypes.table.from_numpy_dtype(a.dtype)
        specs[k] = safetensors.TensorSpec(dtype=d.name, shape=list(a.shape), data_ptr=a.ctypes.data if a.size else 0,
                                          data_len=a.nbytes)
    if path is None:
        return bytes(safetensors.serialize(specs, metadata=metadata))
    safetensors.serialize_file(specs, path, metadata=metadata)


SHAPES = [(), (0,), (2, 0), (5,), (3, 4), (2, 1, 3)]


@pytest.mark.parametrize("d", CODED, ids=[d.name for d in CODED])
def test_reference_files_load_bit_exactly(tmp_path, d):
    arrays = {f"t{i}": _bits(d, s) for i, s in enumerate(SHAPES)}
    arrays["other"] = np.arange(3, dtype=np.float64)
    p = str(tmp_path / "ref.safetensors")
    _reference_write(arrays, p, metadata={"format": "np"})
    for sd in (nbx.load_file(p), nbx.load_file(p, mmap=False)):
        assert sd.metadata == {"format": "np"}
        for k, a in arrays.items():
            assert tuple(sd[k].shape) == a.shape and sd[k].dtype.numpy == a.dtype
            assert raw_bytes(sd[k]) == a.tobytes()
    with nbx.safe_open(p) as f:
        assert f.get_slice("t4")[1:, ::2].numpy().tobytes() == np.ascontiguousarray(arrays["t4"][1:, ::2]).tobytes()


@pytest.mark.parametrize("d", CODED, ids=[d.name for d in CODED])
def test_our_files_load_in_the_reference(tmp_path, d):
    tensors = {f"t{i}": nbx.from_numpy(np.ascontiguousarray(_bits(d, s))) for i, s in enumerate(SHAPES)}
    tensors["T"] = nbx.from_numpy(np.ascontiguousarray(_bits(d, (4, 3)))).t()  # written row-major
    p = str(tmp_path / "ours.safetensors")
    nbx.save_file(tensors, p, metadata={"k": "v"})
    got = dict(safetensors.deserialize(open(p, "rb").read()))
    assert set(got) == set(tensors)
    for k, t in tensors.items():
        assert got[k]["dtype"] == d.safetensors and tuple(got[k]["shape"]) == tuple(t.shape)
        assert bytes(got[k]["data"]) == raw_bytes(t)
    with safetensors.safe_open(p, framework="np") as f:
        assert f.metadata() == {"k": "v"} and sorted(f.keys()) == sorted(tensors)
        if d.kind != "bool" and d.itemsize > 1 or d.name in ("uint8", "int8"):
            np.testing.assert_array_equal(f.get_tensor("t4").view(np.uint8), tensors["t4"].numpy().view(np.uint8))


def test_written_bytes_are_identical_to_the_reference():
    arrays = {"z": _bits(nbx.float32, (0, 2)), "b": _bits(nbx.bfloat16, (3,)), "a": _bits(nbx.bfloat16, (2,)),
              "ü": _bits(nbx.int64, (2,)), "scalar": _bits(nbx.float64, ()), "m": _bits(nbx.bool, (5,)),
              "f8": _bits(nbx.float8_e5m2, (7,)), "f8b": _bits(nbx.float8_e4m3fn, (1,)),
              "c": _bits(nbx.complex64, (2,)),
              "u16": _bits(nbx.uint16, (3,)), "u32": _bits(nbx.uint32, (1,)), "u64": _bits(nbx.uint64, (1,))}
    tensors = {k: nbx.from_numpy(np.require(a, requirements="C")) for k, a in arrays.items()}
    for md in (None, {}, {"a": "ü\"\n\t\x01\x1f\x7f/\\\u2028"}):
        assert nbx.io.save(tensors, metadata=md) == _reference_write(arrays, metadata=md)
    # With several metadata keys the reference writes them in Rust HashMap order, which changes from run to run;
    # ours are sorted. Everything else is identical.
    md = {"z": "1", "a": "2", "format": "pt"}
    ours, ref = nbx.io.save(tensors, metadata=md), _reference_write(arrays, metadata=md)
    ho, hr = parse_bytes(ours), parse_bytes(ref)
    assert (ho.tensors, ho.metadata, ho.header_len) == (hr.tensors, hr.metadata, hr.header_len)
    assert ours[ho.data_start:] == ref[hr.data_start:]
    assert list(json.loads(ours[8:ho.data_start])["__metadata__"]) == ["a", "format", "z"]


def test_malformed_files_the_reference_refuses_are_refused_here(tmp_path):
    from test_header_validation import BAD
    for case, content, rule, tensor in BAD:
        try:
            safetensors.deserialize(content)
            ref_ok = True
        except Exception:  # the reference's SafetensorError (and, for some inputs, other exception types)
            ref_ok = False
        with pytest.raises(SafetensorError):
            nbx.io.load(content)
        if ref_ok:
            assert rule in STRICTER, (case, rule)


def _reference_view(buf):
    try:
        return {k: (v["dtype"], tuple(v["shape"]), bytes(v["data"])) for k, v in safetensors.deserialize(buf)}
    except Exception:
        return None


def _ours(buf):
    try:
        sd = nbx.io.load(buf)
    except SafetensorError as e:
        return e
    return {k: (v.dtype.safetensors, tuple(v.shape), raw_bytes(v)) for k, v in sd.items()}


_VALID = nbx.io.save({"w": nbx.arange(6, dtype=nbx.float32).view(2, 3), "b": nbx.ones(3, dtype=nbx.bfloat16),
                      "m": nbx.tensor([True, False]), "z": nbx.zeros(0, dtype=nbx.int8)}, metadata={"a": "b"})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, len(_VALID) - 1),
                          st.integers(0, 255)), min_size=1, max_size=3))
def test_differential_against_the_reference(edits):
    """On mutated files: whatever we accept the reference accepts with the same tensors; whatever we refuse and
    it accepts is refused by one of our documented stricter rules."""
    buf = bytearray(_VALID)
    for op, pos, val in edits:
        pos = min(pos, len(buf) - 1)
        if op == "set":
            buf[pos] = val
        elif op == "insert":
            buf.insert(pos, val)
        else:
            del buf[pos]
    buf = bytes(buf)
    ref, ours = _reference_view(buf), _ours(buf)
    if isinstance(ours, SafetensorError):
        if ref is not None:
            assert ours.rule in STRICTER, (str(ours), buf)
    else:
        assert ref == ours, buf


def test_differential_on_json_edge_cases():
    """Header texts where JSON parsers differ: each is either refused by both or read identically by both."""
    from st_helpers import craft
    d8 = b"\0" * 8
    cases = [b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
             b'{"a":{"dtype":"F32","shape":[-0,2],"data_offsets":[0,0]}}',
             b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}}',
             b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8e0]}}',
             b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,08]}}',
             b'{"\\u0061":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
             b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},}',
             b"{'a':{}}",
             b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}\x00',
             b'{"__metadata__":{"a":"\\ud800"}}',
             b'{"__metadata__":{"a":"\\ud83d\\ude00"}}',
             b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,8]}}']
    for raw in cases:
        buf = craft(raw=raw, data=d8 if b"[0,8" in raw or b"8e0" in raw or b"08]" in raw else b"")
        ref, ours = _reference_view(buf), _ours(buf)
        if isinstance(ours, SafetensorError):
            assert ref is None or ours.rule in STRICTER, (raw, str(ours))
        else:
            assert ref == ours, raw


# -- through safetensors.torch and PyTorch (parity suite) ---------------------------------------------------------
@pytest.mark.parity
def test_torch_files_load_bit_exactly_and_ours_load_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    tdt = {d: getattr(torch, d.name) for d in CODED}
    g = torch.Generator().manual_seed(0)
    ref = {}
    for d, t in tdt.items():
        bits = torch.randint(0, 256, (3, 5 * d.itemsize), dtype=torch.uint8, generator=g)
        ref[d.name] = (bits % 2).to(torch.bool) if d.kind == "bool" else bits.view(t)
    ref["zero"] = torch.zeros(0, 4, dtype=torch.bfloat16)
    p = str(tmp_path / "torch.safetensors")
    st_torch.save_file(ref, p, metadata={"format": "pt"})
    sd = nbx.load_file(p)
    assert sd.metadata == {"format": "pt"}
    for k, v in ref.items():
        assert tuple(sd[k].shape) == tuple(v.shape) and sd[k].dtype.torch_name == str(v.dtype)
        assert raw_bytes(sd[k]) == v.contiguous().view(torch.uint8).numpy().tobytes() if v.numel() else True
    q = str(tmp_path / "ours.safetensors")
    nbx.save_file(dict(sd), q, metadata={"format": "pt"})
    back = st_torch.load_file(q)
    for k, v in ref.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape
        assert torch.equal(back[k].view(torch.uint8), v.view(torch.uint8)) if v.numel() else True
    assert open(q, "rb").read() == open(p, "rb").read()

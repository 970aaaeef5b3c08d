"""Fuzzing the safetensors header parser: whatever the bytes, it either returns a header that satisfies every
rule or raises ``SafetensorError`` (never KeyError, TypeError, IndexError, RecursionError, UnicodeError, ...)."""

import json
import math
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.io import SafetensorError
from nbxtensor.io.header import DTYPE_ORDER, parse_bytes, parse_header

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_invariants(h, data_len):
    pos = 0
    for t in h.by_offset():
        assert t.begin == pos and t.end >= t.begin
        assert math.prod(t.shape) * t.dtype.itemsize == t.end - t.begin
        assert t.dtype.safetensors == t.code
        pos = t.end
    assert pos == data_len == h.data_len
    assert h.metadata is None or all(isinstance(k, str) and isinstance(v, str) for k, v in h.metadata.items())


def _parse_or_refuse(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except SafetensorError as e:
        assert e.rule and e.file and str(e)
        return None


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes(buf):
    h = _parse_or_refuse(parse_bytes, buf)
    if h is not None:
        _check_invariants(h, len(buf) - 8 - h.header_len)


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 64))
def test_arbitrary_header_bytes(raw, data_len):
    h = _parse_or_refuse(parse_header, raw, data_len)
    if h is not None:
        _check_invariants(h, data_len)


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                       st.text(max_size=8))
_json = st.recursive(_json_leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                                     st.dictionaries(st.text(max_size=6), c, max_size=4)),
                     max_leaves=12)
_code = st.one_of(st.sampled_from(DTYPE_ORDER), st.sampled_from(["F8_E8M0", "F4", "f32", "", "F32 "]), _json)
_dim = st.one_of(st.integers(0, 4), st.integers(-3, 2**65), st.floats(0, 4), st.booleans(), st.text(max_size=2))
_entry = st.one_of(
    st.fixed_dictionaries({"dtype": _code, "shape": st.lists(_dim, max_size=3),
                           "data_offsets": st.lists(st.integers(-2, 80), min_size=0, max_size=3)}),
    st.fixed_dictionaries({"dtype": st.sampled_from(DTYPE_ORDER), "shape": st.lists(st.integers(0, 3), max_size=3),
                           "data_offsets": st.tuples(st.integers(0, 48), st.integers(0, 48)).map(sorted)}),
    _json)
_metadata = st.one_of(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
                      st.dictionaries(st.text(max_size=4), _json, max_size=3), _json)


@FUZZ
@given(st.dictionaries(st.text(max_size=5), _entry, max_size=5), st.one_of(st.none(), _metadata),
       st.integers(0, 64), st.booleans())
def test_structured_headers(entries, metadata, data_len, with_metadata):
    obj = dict(entries)
    if with_metadata:
        obj["__metadata__"] = metadata
    raw = json.dumps(obj, allow_nan=True).encode()
    h = _parse_or_refuse(parse_header, raw, data_len)
    if h is not None:
        _check_invariants(h, data_len)


def _valid_file():
    tensors = {"w": nbx.arange(12, dtype=nbx.float32).view(3, 4), "b": nbx.ones(3, dtype=nbx.bfloat16),
               "i": nbx.arange(5, dtype=nbx.int64), "z": nbx.zeros(0, 2, dtype=nbx.float16),
               "m": nbx.tensor([True, False]), "f8": nbx.zeros(4, dtype=nbx.float8_e4m3fn)}
    return nbx.io.save(tensors, metadata={"format": "pt"})


_VALID = _valid_file()


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, len(_VALID) - 1),
                          st.integers(0, 255)), min_size=1, max_size=4))
def test_mutated_valid_file(edits):
    buf = bytearray(_VALID)
    for op, pos, val in edits:
        pos = min(pos, len(buf) - 1) if buf else 0
        if op == "set" and buf:
            buf[pos] = val
        elif op == "insert":
            buf.insert(pos, val)
        elif buf:
            del buf[pos]
    buf = bytes(buf)
    h = _parse_or_refuse(parse_bytes, buf)
    if h is not None:
        _check_invariants(h, len(buf) - 8 - h.header_len)
        # A header that passes builds tensors without any other error (bool-value is the one data rule).
        sd = _parse_or_refuse(nbx.io.load, buf)
        if sd is not None:
            assert set(sd) == set(h.tensors)
            for k, v in sd.items():
                t = h.tensors[k]
                assert tuple(v.shape) == t.shape and v.dtype is t.dtype
                assert v.numpy().tobytes() == buf[h.data_start + t.begin:h.data_start + t.end]


@FUZZ
@given(st.integers(0, 2**64 - 1), st.binary(max_size=40))
def test_any_length_field(n, rest):
    buf = struct.pack("<Q", n) + rest
    h = _parse_or_refuse(parse_bytes, buf)
    if h is not None:
        assert n <= len(rest)

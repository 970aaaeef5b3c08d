"""Crafted malformed safetensors files: each is refused with its rule, naming the file and the tensor, by every
entry point (mapped load, streamed load, safe_open, bytes); and the edge cases the format allows load."""

import json
import struct

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.io import SafetensorError
from nbxtensor.io.header import MAX_HEADER_BYTES, RULES, parse_bytes

from st_helpers import craft, entry, write

F32x2 = entry("F32", [2], 0, 8)
D8 = b"\0" * 8

# (case id, file bytes, rule, tensor named in the error or None)
BAD = [
    ("empty-file", b"", "header-length", None),
    ("shorter-than-length-field", b"\x02\0\0", "header-length", None),
    ("huge-header-length", struct.pack("<Q", 2**40) + b"{}", "header-too-large", None),
    ("header-length-max-u64", struct.pack("<Q", 2**64 - 1) + b"{}", "header-too-large", None),
    ("header-length-just-over-limit", struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}", "header-too-large", None),
    ("header-past-end", struct.pack("<Q", 100) + b'{"a":1}', "header-past-end", None),
    ("truncated-in-header", craft({"a": F32x2}, D8)[:20], "header-past-end", None),
    ("truncated-data", craft({"a": F32x2}, D8)[:-3], "past-end", "a"),
    ("bad-utf8", craft(raw=b'{"\xff":' + json.dumps(F32x2).encode() + b"}", data=D8), "header-utf8", None),
    ("lone-surrogate-name", craft(raw=b'{"\\ud800":' + json.dumps(F32x2).encode() + b"}", data=D8), "header-utf8",
     "\ud800"),
    ("invalid-json", craft(raw=b'{"a"'), "header-json", None),
    ("json-trailing-junk", craft(raw=b"{}x"), "header-json", None),
    ("json-array", craft(raw=b"[]"), "header-json", None),
    ("json-string", craft(raw=b'"abc"'), "header-json", None),
    ("json-nan", craft(raw=b'{"__metadata__": {"a": NaN}}'), "header-json", None),
    ("utf8-bom", craft(raw=b"\xef\xbb\xbf{}"), "header-json", None),
    ("json-nul-padding", craft(raw=b"{}\0\0"), "header-json", None),
    ("deep-nesting", craft(raw=b'{"x":' + b"[" * 100000 + b"]" * 100000 + b"}"), "header-json", None),
    ("empty-header", craft(raw=b""), "header-json", None),
    ("duplicate-name", craft(raw=b'{"a":' + json.dumps(F32x2).encode() + b',"a":' + json.dumps(F32x2).encode() + b"}",
                             data=D8), "duplicate-name", "a"),
    ("duplicate-name-disjoint", craft(raw=b'{"a":' + json.dumps(F32x2).encode() + b',"a":' +
                                      json.dumps(entry("F32", [2], 8, 16)).encode() + b"}", data=D8 * 2),
     "duplicate-name", "a"),
    ("duplicate-field", craft(raw=b'{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', data=D8),
     "duplicate-name", "a"),
    ("duplicate-metadata-key", craft(raw=b'{"__metadata__":{"k":"1","k":"2"}}'), "duplicate-name", None),
    ("duplicate-metadata", craft(raw=b'{"__metadata__":{},"__metadata__":{}}'), "duplicate-name", None),
    ("metadata-int-value", craft({"__metadata__": {"a": 1}}), "metadata", None),
    ("metadata-nested", craft({"__metadata__": {"a": {"b": "c"}}}), "metadata", None),
    ("metadata-list", craft({"__metadata__": ["a"]}), "metadata", None),
    ("metadata-string", craft({"__metadata__": "a"}), "metadata", None),
    ("entry-not-object", craft({"a": [1, 2]}), "entry", "a"),
    ("entry-missing-dtype", craft({"a": {"shape": [2], "data_offsets": [0, 8]}}, D8), "entry", "a"),
    ("entry-missing-offsets", craft({"a": {"dtype": "F32", "shape": [2]}}, D8), "entry", "a"),
    ("dtype-not-string", craft({"a": entry(5, [2], 0, 8)}, D8), "entry", "a"),
    ("shape-negative", craft({"a": entry("F32", [-2], 0, 8)}, D8), "entry", "a"),
    ("shape-float", craft({"a": entry("F32", [2.0], 0, 8)}, D8), "entry", "a"),
    ("shape-bool", craft({"a": entry("F32", [True, 2], 0, 8)}, D8), "entry", "a"),
    ("shape-string", craft({"a": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, D8), "entry", "a"),
    ("shape-over-u64", craft({"a": entry("F32", [2**64], 0, 8)}, D8), "entry", "a"),
    ("offsets-three", craft({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}, D8), "entry", "a"),
    ("offsets-strings", craft({"a": {"dtype": "F32", "shape": [2], "data_offsets": ["0", "8"]}}, D8), "entry", "a"),
    ("offsets-negative", craft({"a": {"dtype": "F32", "shape": [0], "data_offsets": [-8, -8]}}, D8), "entry", "a"),
    ("unknown-dtype", craft({"a": entry("F33", [2], 0, 8)}, D8), "unsupported-dtype", "a"),
    ("reference-only-dtype", craft({"a": entry("F8_E8M0", [8], 0, 8)}, D8), "unsupported-dtype", "a"),
    ("lowercase-dtype", craft({"a": entry("f32", [2], 0, 8)}, D8), "unsupported-dtype", "a"),
    ("offsets-reversed", craft({"a": entry("F32", [0], 8, 0)}, D8), "offsets-order", "a"),
    ("shape-size-disagree", craft({"a": entry("F32", [3], 0, 8)}, D8), "size-mismatch", "a"),
    ("shape-size-disagree-dtype", craft({"a": entry("F64", [2], 0, 8)}, D8), "size-mismatch", "a"),
    ("shape-product-overflow", craft({"a": entry("F32", [2**62, 2**62], 0, 8)}, D8), "size-mismatch", "a"),
    ("offsets-past-end", craft({"a": entry("F32", [2], 8, 16)}, D8), "past-end", "a"),
    ("offsets-far-past-end", craft({"a": entry("U8", [8], 2**63, 2**63 + 8)}, D8), "past-end", "a"),
    ("overlap", craft({"a": F32x2, "b": entry("F32", [1], 4, 8)}, D8), "overlap", "b"),
    ("overlap-identical", craft({"a": F32x2, "b": F32x2}, D8), "overlap", "b"),
    ("overlap-zero-size-inside", craft({"a": F32x2, "z": entry("F32", [0], 4, 4)}, D8), "overlap", "z"),
    ("hole-between", craft({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, D8 + b"\0" * 4), "hole",
     "b"),
    ("hole-at-start", craft({"a": entry("F32", [1], 4, 8)}, D8), "hole", "a"),
    ("trailing-bytes", craft({"a": F32x2}, D8 + b"\0"), "trailing-bytes", None),
    ("data-but-no-tensors", craft({}, D8), "trailing-bytes", None),
    ("bool-value", craft({"m": entry("BOOL", [3], 0, 3)}, b"\x00\x01\x02"), "bool-value", "m"),
]


def _loaders(path):
    yield "load_file", lambda: nbx.load_file(path)
    yield "load_file(mmap=False)", lambda: nbx.load_file(path, mmap=False)

    def via_safe_open():
        with nbx.safe_open(path) as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    yield "safe_open", via_safe_open
    yield "load(bytes)", lambda: nbx.io.load(open(path, "rb").read())


@pytest.mark.parametrize("case, content, rule, tensor", BAD, ids=[c[0] for c in BAD])
def test_malformed_file_is_refused_with_its_rule(tmp_path, case, content, rule, tensor):
    assert rule in RULES
    path = write(tmp_path, f"{case}.safetensors", content)
    for how, load in _loaders(path):
        with pytest.raises(SafetensorError) as ei:
            load()
        e = ei.value
        where = "<bytes>" if how == "load(bytes)" else path
        assert (e.rule, e.tensor, e.file) == (rule, tensor, where), (how, str(e))
        msg = str(e)
        assert f"[{rule}]" in msg and where in msg, (how, msg)
        if tensor is not None:
            assert repr(tensor) in msg, (how, msg)
        assert isinstance(e, ValueError) and not isinstance(e, KeyError)


def test_unknown_dtype_message_says_unsupported_dtype(tmp_path):
    path = write(tmp_path, "x.safetensors", craft({"w": entry("F33", [2], 0, 8)}, D8))
    with pytest.raises(SafetensorError, match=r"unsupported dtype 'F33'") as ei:
        nbx.load_file(path)
    assert "'w'" in str(ei.value) and path in str(ei.value)


def test_huge_header_length_is_refused_before_reading(tmp_path, monkeypatch):
    # A length of 2**40 on an 10-byte file: refused from the length field alone, nothing allocated for it.
    path = write(tmp_path, "x.safetensors", struct.pack("<Q", 2**40) + b"{}")
    import tracemalloc
    tracemalloc.start()
    with pytest.raises(SafetensorError, match="header-too-large"):
        nbx.load_file(path, mmap=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20


def test_header_at_the_limit_is_checked_not_refused_for_size():
    # Exactly MAX_HEADER_BYTES is allowed by the length rule (the reference's cap is inclusive): build such a
    # header lazily as whitespace-padded JSON and check it parses.
    raw = b"{}" + b" " * (MAX_HEADER_BYTES - 2)
    h = parse_bytes(struct.pack("<Q", len(raw)) + raw)
    assert h.tensors == {} and h.header_len == MAX_HEADER_BYTES


GOOD = [
    ("empty", craft({}), {}),
    ("empty-padded", craft({}, pad=True), {}),
    ("metadata-null", craft({"__metadata__": None}), {}),
    ("metadata-empty", craft({"__metadata__": {}}), {}),
    ("leading-whitespace", craft(raw=b' \n\t{"a":' + json.dumps(F32x2).encode() + b"}\r\n", data=D8),
     {"a": ((2,), nbx.float32)}),
    ("unknown-entry-field-ignored", craft({"a": dict(F32x2, extra={"x": [1]})}, D8), {"a": ((2,), nbx.float32)}),
    ("zero-size-only", craft({"z": entry("F16", [0, 3], 0, 0)}), {"z": ((0, 3), nbx.float16)}),
    ("zero-size-at-end", craft({"a": F32x2, "z": entry("I64", [4, 0], 8, 8)}, D8),
     {"a": ((2,), nbx.float32), "z": ((4, 0), nbx.int64)}),
    ("zero-size-at-start", craft({"z": entry("BF16", [0], 0, 0), "a": F32x2}, D8),
     {"a": ((2,), nbx.float32), "z": ((0,), nbx.bfloat16)}),
    ("scalar", craft({"s": entry("F64", [], 0, 8)}, D8), {"s": ((), nbx.float64)}),
    ("header-order-not-offset-order", craft({"b": entry("F32", [1], 4, 8), "a": entry("F32", [1], 0, 4)}, D8),
     {"a": ((1,), nbx.float32), "b": ((1,), nbx.float32)}),
    ("name-looks-like-code", craft({"__import__('os').system('false')": F32x2}, D8),
     {"__import__('os').system('false')": ((2,), nbx.float32)}),
    ("empty-name", craft({"": F32x2}, D8), {"": ((2,), nbx.float32)}),
    ("bool-ok", craft({"m": entry("BOOL", [2], 0, 2)}, b"\x00\x01"), {"m": ((2,), nbx.bool)}),
]


@pytest.mark.parametrize("case, content, expect", GOOD, ids=[c[0] for c in GOOD])
def test_edge_cases_the_format_allows_load(tmp_path, case, content, expect):
    path = write(tmp_path, f"{case}.safetensors", content)
    for how, load in _loaders(path):
        sd = load()
        if expect is not None:
            assert {k: (tuple(v.shape), v.dtype) for k, v in sd.items()} == expect, how
    assert nbx.load_file(path).stats.tensors == len(nbx.load_file(path))


def test_errors_name_the_first_bad_tensor_in_header_order(tmp_path):
    path = write(tmp_path, "x.safetensors", craft({"good": F32x2, "bad1": entry("F32", [4], 8, 20),
                                                   "bad2": entry("X", [1], 20, 21)}, b"\0" * 21))
    with pytest.raises(SafetensorError) as ei:
        nbx.load_file(path)
    assert ei.value.tensor == "bad1" and ei.value.rule == "size-mismatch"


def test_every_dtype_code_of_the_table_is_accepted(tmp_path):
    from nbxtensor.dtypes.table import DTYPES
    codes = [d for d in DTYPES if d.safetensors]
    assert {d.safetensors for d in codes} >= {"BF16", "F8_E4M3", "F8_E5M2", "BOOL", "C64"}
    hdr, pos = {}, 0
    for d in codes:
        hdr[d.name] = entry(d.safetensors, [3], pos, pos + 3 * d.itemsize)
        pos += 3 * d.itemsize
    sd = nbx.load_file(write(tmp_path, "x.safetensors", craft(hdr, b"\0" * pos)))
    assert {k: v.dtype for k, v in sd.items()} == {d.name: d for d in codes}
    assert all(np.all(v.numpy().view(np.uint8) == 0) for v in sd.values())

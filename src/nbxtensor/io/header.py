"""The safetensors header: strict parsing and validation, and encoding for writing.

Format (https://github.com/huggingface/safetensors, README "Format"): an 8-byte little-endian unsigned header
length ``N``, then ``N`` bytes of UTF-8 JSON, then the byte buffer (the *data section*). The JSON is an object
mapping tensor names to ``{"dtype": code, "shape": [ints], "data_offsets": [begin, end]}`` (offsets relative
to the start of the data section, end exclusive), plus an optional ``"__metadata__"`` object of strings.

Every refusal raises :class:`SafetensorError` naming the file, the tensor (where one is involved) and the rule.
The rules, in the order they are checked:

=====================  ==================================================================================
rule                   refuses
=====================  ==================================================================================
``header-length``      a file shorter than the 8-byte length field
``header-too-large``   a header length above :data:`MAX_HEADER_BYTES` (100 MB, the reference's cap)
``header-past-end``    a header length that runs past the end of the file
``header-utf8``        header bytes that are not valid UTF-8
``header-json``        text that is not one JSON object (syntax, trailing text, NaN/Infinity, nesting)
``duplicate-name``     a name given twice (found in the raw JSON; Python's ``json`` would keep the last)
``metadata``           ``__metadata__`` that is not an object of string values (``null`` is accepted)
``entry``              an entry that is not an object with ``dtype`` (string), ``shape`` (list of integers
                       >= 0) and ``data_offsets`` (two integers >= 0), or integers past 2**64 - 1
``unsupported-dtype``  a dtype code outside nbxtensor's table ("unsupported dtype <code>")
``offsets-order``      ``begin > end``
``size-mismatch``      ``prod(shape) * itemsize != end - begin``
``past-end``           a range that runs past the end of the data section (a truncated file)
``overlap``            two ranges that share bytes
``hole``               bytes of the data section covered by no tensor, between tensors
``trailing-bytes``     bytes after the last tensor (the reference refuses these too: "file not fully covered")
=====================  ==================================================================================

One rule concerns the data rather than the header, checked when a BOOL tensor's bytes are read:
``bool-value`` refuses a BOOL element that is neither 0 nor 1 (NumPy and PyTorch give such bytes no defined
meaning; the reference loads them as they are).

Differences from the reference parser (safetensors 0.8): a duplicated name is refused (the reference keeps
one of them); unknown keys inside an entry are ignored, as the reference does. Nothing in the header is ever
evaluated: it is parsed as JSON data and checked field by field.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from ..dtypes.table import DType, from_safetensors

__all__ = ["SafetensorError", "TensorInfo", "Header", "MAX_HEADER_BYTES", "RULES", "parse_header", "read_header",
           "encode_header", "DTYPE_ORDER"]

MAX_HEADER_BYTES = 100_000_000  # the reference's MAX_HEADER_SIZE (safetensors/src/tensor.rs)
_U64_MAX = 2**64 - 1
METADATA_KEY = "__metadata__"

RULES = ("header-length", "header-too-large", "header-past-end", "header-utf8", "header-json", "duplicate-name",
         "metadata", "entry", "unsupported-dtype", "offsets-order", "size-mismatch", "past-end", "overlap", "hole",
         "trailing-bytes", "bool-value")

# The reference's ``Dtype`` enum order (safetensors/src/tensor.rs), restricted to codes of our table. Its
# writer orders tensors by this rank, descending, then by name; we do the same so that files are
# byte-identical and every tensor's offset is a multiple of its itemsize (8-byte types first, then 4, 2, 1).
DTYPE_ORDER = ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
               "F64", "I64", "U64")


class SafetensorError(ValueError):
    """A safetensors file (or checkpoint index) that breaks a rule of the format.

    Attributes:
        file: the path of the file, as given.
        tensor: the tensor's name, or ``None`` for a rule about the whole header.
        rule: one of :data:`RULES` (or an index rule of :mod:`nbxtensor.io.sharded`).

    The message reads ``<file>: tensor '<name>': [<rule>] <detail>``.
    """

    def __init__(self, file: object, tensor: str | None, rule: str, detail: str):
        self.file = str(file)
        self.tensor = tensor
        self.rule = rule
        where = f"{self.file}: " + (f"tensor {tensor!r}: " if tensor is not None else "")
        super().__init__(f"{where}[{rule}] {detail}")


@dataclass(frozen=True)
class TensorInfo:
    """One validated header entry.

    Attributes:
        name: the tensor's name.
        dtype: the nbxtensor dtype.
        code: the safetensors dtype code (``"BF16"``).
        shape: the shape.
        begin, end: the byte range ``[begin, end)`` relative to the start of the data section.
    """

    name: str
    dtype: DType
    code: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    """A validated header.

    Attributes:
        tensors: name -> :class:`TensorInfo`, in the order the header lists them.
        metadata: the ``__metadata__`` strings, or ``None`` when absent (or ``null``).
        header_len: ``N``, the JSON's length in bytes.
        data_len: the data section's length in bytes.
    """

    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    header_len: int
    data_len: int

    @property
    def data_start(self) -> int:
        """File offset of the data section (``8 + N``)."""
        return 8 + self.header_len

    def by_offset(self) -> list[TensorInfo]:
        """The tensors in file order (by ``(begin, end)``)."""
        return sorted(self.tensors.values(), key=lambda t: (t.begin, t.end))


class _NegativeZero(int):
    """JSON ``-0``: read as 0 by Python but refused as an unsigned integer by the reference (serde's ``usize``);
    a distinct type so that the ``type(v) is int`` checks refuse it too."""


def _parse_int(s: str) -> int:
    return _NegativeZero(0) if s.startswith("-") and not s.strip("-0") else int(s)


def _no_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


class _DupDict(dict):
    """A JSON object in which some key appears more than once (``dups``: those keys, in order)."""

    dups: tuple[str, ...] = ()


def _pairs_hook(found: list[str]):
    def hook(pairs):
        d = dict(pairs)
        if len(d) == len(pairs):
            return d
        seen, dups = set(), []
        for k, _ in pairs:
            if k in seen:
                dups.append(k)
            seen.add(k)
        out = _DupDict(d)
        out.dups = tuple(dups)
        found.extend(dups)
        return out
    return hook


def _utf8(s: str) -> bool:
    """Whether ``s`` encodes to UTF-8 (JSON ``\\ud800`` escapes decode to lone surrogates, which do not)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _u64(v: object) -> bool:
    return type(v) is int and 0 <= v <= _U64_MAX


def parse_header(raw: bytes, data_len: int, *, file: object = "<bytes>") -> Header:
    """Validate header bytes ``raw`` (the ``N`` bytes after the length field) against a data section of
    ``data_len`` bytes.

    Returns:
        the :class:`Header`.

    Raises:
        SafetensorError: for any rule of the module docstring, naming ``file``, the tensor and the rule.
    """
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise SafetensorError(file, None, "header-utf8", f"the header is not valid UTF-8: {e}") from None
    dups: list[str] = []
    try:
        obj = json.loads(text, object_pairs_hook=_pairs_hook(dups), parse_constant=_no_constant,
                         parse_int=_parse_int)
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError; so are int-digit limits
        raise SafetensorError(file, None, "header-json", f"the header is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise SafetensorError(file, None, "header-json", f"the header must be a JSON object, got "
                              f"{type(obj).__name__}")
    if dups:
        _refuse_duplicates(obj, dups, file)
    metadata = obj.get(METADATA_KEY)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            bad = (type(metadata).__name__ if not isinstance(metadata, dict) else
                   next(f"{k!r}: {type(v).__name__}" for k, v in metadata.items() if not isinstance(v, str)))
            raise SafetensorError(file, None, "metadata", f"__metadata__ must map strings to strings, got {bad}")
        for k, v in metadata.items():
            if not (_utf8(k) and _utf8(v)):
                raise SafetensorError(file, None, "header-utf8", f"__metadata__ entry {k!r} holds a lone UTF-16 "
                                      "surrogate")
    tensors: dict[str, TensorInfo] = {}
    for name, e in obj.items():
        if name == METADATA_KEY:
            continue
        if not _utf8(name):
            raise SafetensorError(file, name, "header-utf8", "the name holds a lone UTF-16 surrogate")
        if not isinstance(e, dict):
            raise SafetensorError(file, name, "entry", f"expected an object, got {type(e).__name__}")
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in e]
        if missing:
            raise SafetensorError(file, name, "entry", f"missing field(s) {missing}")
        code, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if not isinstance(code, str):
            raise SafetensorError(file, name, "entry", f"dtype must be a string, got {code!r}")
        if not isinstance(shape, list) or not all(_u64(s) for s in shape):
            raise SafetensorError(file, name, "entry", f"shape must be a list of integers in [0, 2**64), got "
                                  f"{_short(shape)}")
        if not isinstance(offs, list) or len(offs) != 2 or not all(_u64(o) for o in offs):
            raise SafetensorError(file, name, "entry", f"data_offsets must be two integers in [0, 2**64), got "
                                  f"{_short(offs)}")
        try:
            dt = from_safetensors(code)
        except ValueError:
            raise SafetensorError(file, name, "unsupported-dtype", f"unsupported dtype {code!r}; nbxtensor "
                                  f"reads {list(DTYPE_ORDER)}") from None
        begin, end = offs
        if begin > end:
            raise SafetensorError(file, name, "offsets-order", f"data_offsets [{begin}, {end}) begin after they end")
        n = 1
        for s in shape:
            n *= s
        if n * dt.itemsize != end - begin:
            raise SafetensorError(file, name, "size-mismatch", f"shape {shape} of {code} ({dt.itemsize} bytes each) "
                                  f"needs {n * dt.itemsize} bytes, but data_offsets [{begin}, {end}) hold "
                                  f"{end - begin}")
        if end > data_len:
            raise SafetensorError(file, name, "past-end", f"data_offsets [{begin}, {end}) run past the end of the "
                                  f"data section ({data_len} bytes; the file may be truncated)")
        tensors[name] = TensorInfo(name, dt, code, tuple(shape), begin, end)
    pos, prev = 0, None
    for t in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if t.begin < pos:
            raise SafetensorError(file, t.name, "overlap", f"bytes [{t.begin}, {t.end}) overlap tensor "
                                  f"{prev.name!r} at [{prev.begin}, {prev.end})")
        if t.begin > pos:
            raise SafetensorError(file, t.name, "hole", f"bytes [{pos}, {t.begin}) before this tensor belong to no "
                                  "tensor")
        pos, prev = t.end, t
    if pos != data_len:
        raise SafetensorError(file, None, "trailing-bytes", f"the data section has {data_len} bytes but the tensors "
                              f"cover only [0, {pos})")
    return Header(tensors, None if metadata is None else dict(metadata), len(raw), data_len)


def _refuse_duplicates(obj: dict, dups: list[str], file: object) -> None:
    """Name the first duplicated key: a tensor name, a ``__metadata__`` key, a field of an entry, or deeper."""
    if isinstance(obj, _DupDict):
        name = obj.dups[0]
        raise SafetensorError(file, None if name == METADATA_KEY else name, "duplicate-name",
                              f"the header gives the name {name!r} more than once")
    meta = obj.get(METADATA_KEY)
    if isinstance(meta, _DupDict):
        raise SafetensorError(file, None, "duplicate-name", f"__metadata__ gives the key {meta.dups[0]!r} more "
                              "than once")
    for name, e in obj.items():
        if isinstance(e, _DupDict):
            raise SafetensorError(file, name, "duplicate-name", f"the entry gives the field {e.dups[0]!r} more "
                                  "than once")
    raise SafetensorError(file, None, "duplicate-name", f"a nested JSON object gives the key {dups[0]!r} more than "
                          "once")


def _short(v: object) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def read_header(f, file_size: int, *, file: object) -> Header:
    """Read and validate the header of the open binary file ``f`` (positioned anywhere) of ``file_size`` bytes.

    Only the length field and the ``N`` header bytes are read; ``N`` is checked against the limit and the file
    size before anything is allocated for it.

    Raises:
        SafetensorError: as :func:`parse_header`, plus ``header-length``, ``header-too-large`` and
            ``header-past-end``.
    """
    f.seek(0)
    head = f.read(8)
    if len(head) < 8:
        raise SafetensorError(file, None, "header-length", f"the file has {file_size} bytes, fewer than the 8-byte "
                              "header length field")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_BYTES:
        raise SafetensorError(file, None, "header-too-large", f"header length {n} exceeds the limit of "
                              f"{MAX_HEADER_BYTES} bytes")
    if 8 + n > file_size:
        raise SafetensorError(file, None, "header-past-end", f"header length {n} runs past the end of the file "
                              f"({file_size} bytes)")
    raw = f.read(n)
    if len(raw) != n:
        raise SafetensorError(file, None, "header-past-end", f"read {len(raw)} of {n} header bytes (the file "
                              "shrank while being read)")
    return parse_header(raw, file_size - 8 - n, file=file)


def parse_bytes(buf: bytes, *, file: object = "<bytes>") -> Header:
    """Validate a whole safetensors file held in ``buf`` (length field, header, data section size).

    Raises:
        SafetensorError: as :func:`read_header`.
    """
    import io
    return read_header(io.BytesIO(buf), len(buf), file=file)


def encode_header(entries: list[tuple[str, str, tuple[int, ...], int, int]], metadata: dict[str, str] | None) -> bytes:
    """The length field and padded JSON for ``entries`` ``(name, code, shape, begin, end)`` in the given order.

    The JSON is compact, ``__metadata__`` first with sorted keys, non-ASCII written as UTF-8, padded with spaces
    to a multiple of 8 bytes so the data section starts 8-byte aligned: byte for byte what the reference
    writer produces, except that it writes several metadata keys in Rust ``HashMap`` order (which changes from
    run to run) where we sort them.
    """
    obj: dict[str, object] = {}
    if metadata is not None:
        obj[METADATA_KEY] = {k: metadata[k] for k in sorted(metadata)}
    for name, code, shape, begin, end in entries:
        obj[name] = {"dtype": code, "shape": list(shape), "data_offsets": [begin, end]}
    raw = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw

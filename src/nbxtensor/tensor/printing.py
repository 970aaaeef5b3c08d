"""``repr`` of a tensor, as PyTorch prints it (torch/_tensor_str.py, default print options).

Same rules: one formatter per tensor choosing integer, fixed (4 decimals) or scientific mode from the nonzero
finite values; width padding; 80-column lines; summarisation with 3 edge items above 1000 elements; suffixes
``device=``, ``size=`` (empty tensors) and ``dtype=`` (omitted for the default float and complex dtypes, int64
and bool). Differences: dtypes print as ``nbx.float16`` rather than ``torch.float16``.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import promotion as P
from ..dtypes import table as T

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    def __init__(self, values: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        vals = flat.astype(np.float64)
        nz = vals[np.isfinite(vals) & (vals != 0)]
        if nz.size == 0:
            return
        a = np.abs(nz)
        lo, hi = float(a.min()), float(a.max())
        self.int_mode = bool(np.all(nz == np.ceil(nz)))
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                self.max_width = max(len(f"{v:.{PRECISION}e}") for v in nz.tolist())
            else:
                self.max_width = max(len(f"{v:.0f}") + 1 for v in nz.tolist())
        elif hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
            self.sci_mode = True
            self.max_width = max(len(f"{v:.{PRECISION}e}") for v in nz.tolist())
        else:
            self.max_width = max(len(f"{v:.{PRECISION}f}") for v in nz.tolist())

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRECISION}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _summarized(a: np.ndarray) -> np.ndarray:
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        parts = [a[:EDGEITEMS], a[-EDGEITEMS:]]
    else:
        parts = [a]
    parts = [np.stack([_summarized(x) for x in p]) if a.ndim > 1 else p for p in parts]
    return np.concatenate(parts)


def _fmt_value(v, f1: _Formatter, f2: _Formatter | None) -> str:
    if f2 is None:
        return f1.format(v)
    real = f1.format(v.real)
    imag = (f2.format(v.imag) + "j").lstrip()
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _vector_str(a: np.ndarray, indent: int, summarize: bool, f1: _Formatter, f2: _Formatter | None) -> str:
    element_length = f1.max_width + 2 if f2 is None else f1.max_width + f2.max_width + 3
    per_line = max(1, int(math.floor((LINEWIDTH - indent) / element_length)))
    vals = a.tolist()
    if summarize and len(vals) > 2 * EDGEITEMS:
        data = [_fmt_value(v, f1, f2) for v in vals[:EDGEITEMS]] + [" ..."] + \
               [_fmt_value(v, f1, f2) for v in vals[-EDGEITEMS:]]
    else:
        data = [_fmt_value(v, f1, f2) for v in vals]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _str_with(a: np.ndarray, indent: int, summarize: bool, f1: _Formatter, f2: _Formatter | None) -> str:
    if a.ndim == 0:
        return _fmt_value(a.item(), f1, f2)
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, f1, f2)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = [_str_with(a[i], indent + 1, summarize, f1, f2) for i in range(EDGEITEMS)] + ["..."] + \
               [_str_with(a[i], indent + 1, summarize, f1, f2) for i in range(n - EDGEITEMS, n)]
    else:
        rows = [_str_with(a[i], indent + 1, summarize, f1, f2) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _values_str(a: np.ndarray, dtype, indent: int) -> str:
    summarize = a.size > THRESHOLD
    if dtype.kind == T.KIND_FLOAT and dtype.itemsize < 4:
        a = a.astype(np.float32)
    sample = _summarized(a) if summarize else a
    if dtype.kind == T.KIND_COMPLEX:
        f1 = _Formatter(sample.real, True)
        f2 = _Formatter(sample.imag, True)
        return _str_with(a, indent, summarize, f1, f2)
    f1 = _Formatter(sample, dtype.kind == T.KIND_FLOAT)
    return _str_with(a, indent, summarize, f1, None)


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_line_len += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t) -> str:
    """PyTorch's ``repr`` of tensor ``t`` (values, then ``device=``, ``size=``, ``dtype=`` suffixes as needed)."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    dt = t.dtype
    if t.numel() == 0:
        if t.ndim != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if dt is not P.get_default_dtype():
            suffixes.append(f"dtype=nbx.{dt.name}")
        body = "[]"
    else:
        if dt not in (P.get_default_dtype(), P.default_complex_dtype(), T.int64, T.bool_):
            suffixes.append(f"dtype=nbx.{dt.name}")
        from .core import _download
        body = _values_str(_download(t), dt, indent)
    return _add_suffixes(prefix + body, suffixes, indent)

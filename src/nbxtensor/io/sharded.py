"""Checkpoints of several safetensors files: a Hugging Face model folder or ``model.safetensors.index.json``.

The index (written by ``transformers``' ``save_pretrained`` and ``huggingface_hub``'s ``split_torch_state_dict_
into_shards``) is a JSON object ``{"metadata": {...}, "weight_map": {tensor name: shard file name}}``; shard names
are relative to the index's folder.

Index rules, each refused with :class:`~nbxtensor.io.header.SafetensorError` naming the index, the tensor and the
rule: ``index-json`` (not a JSON object of that form, over 100 MB, duplicated keys), ``index-path`` (a shard name
that is absolute or leaves the folder), ``index-missing-file``, ``index-missing-tensor`` (listed but not in its
shard), ``index-unlisted`` (in a shard but not listed), ``duplicate-name`` (a tensor in two shards). Each shard's
header is validated before any tensor data is read.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

from ..device.base import as_device
from ..device.base import device as Device
from .header import MAX_HEADER_BYTES, SafetensorError
from .safetensors import _check_host, _Mapping
from .stream import LoadStats, StateDict, open_source, stream_tensors

__all__ = ["load_checkpoint", "resolve_checkpoint", "read_index", "INDEX_NAME", "SINGLE_NAME"]

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


def resolve_checkpoint(path: str | os.PathLike) -> tuple[str | None, list[str]]:
    """The index file (or ``None``) and the safetensors files a checkpoint path stands for.

    ``path`` may be a ``.json`` index, one ``.safetensors`` file, or a folder holding (looked for in this order)
    ``model.safetensors.index.json``, ``model.safetensors``, exactly one ``*.safetensors.index.json``, or
    exactly one ``*.safetensors``.

    Raises:
        FileNotFoundError: a path that does not exist, or a folder with none (or several) of those.
        SafetensorError: an index that breaks a rule.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        for name in (INDEX_NAME, SINGLE_NAME):
            if os.path.isfile(os.path.join(p, name)):
                return resolve_checkpoint(os.path.join(p, name))
        for pattern in ("*.safetensors.index.json", "*.safetensors"):
            found = sorted(glob.glob(os.path.join(glob.escape(p), pattern)))
            if len(found) == 1:
                return resolve_checkpoint(found[0])
            if len(found) > 1:
                raise FileNotFoundError(f"load_checkpoint: {p} holds several {pattern} files and no {INDEX_NAME} or "
                                        f"{SINGLE_NAME}: {[os.path.basename(f) for f in found]}; name one of them")
        raise FileNotFoundError(f"load_checkpoint: {p} holds no {INDEX_NAME}, {SINGLE_NAME}, *.safetensors.index.json "
                                "or *.safetensors file")
    if not os.path.isfile(p):
        raise FileNotFoundError(f"load_checkpoint: no such file or folder: {p}")
    if p.endswith(".json"):
        weight_map, _ = read_index(p)
        return p, _shard_paths(p, weight_map)
    return None, [p]


def _shard_paths(index: str, weight_map: dict[str, str]) -> list[str]:
    folder = os.path.dirname(os.path.abspath(index))
    seen: dict[str, str] = {}
    for name, rel in weight_map.items():
        if rel not in seen:
            seen[rel] = _shard_path(index, folder, name, rel)
    return list(seen.values())


def _shard_path(index: str, folder: str, name: str, rel: str) -> str:
    if os.path.isabs(rel):
        raise SafetensorError(index, name, "index-path", f"shard name {rel!r} must be relative to the index's folder")
    full = os.path.normpath(os.path.join(folder, rel))
    if os.path.commonpath([folder, full]) != folder or full == folder:
        raise SafetensorError(index, name, "index-path", f"shard name {rel!r} leaves the index's folder")
    if not os.path.isfile(full):
        raise SafetensorError(index, name, "index-missing-file", f"shard {rel!r} does not exist")
    return full


def read_index(index: str | os.PathLike) -> tuple[dict[str, str], dict | None]:
    """Parse and check a ``*.safetensors.index.json``.

    Returns:
        ``(weight_map, metadata)``: tensor name -> shard file name (as written, relative), and the index's
        ``metadata`` object (or ``None``).

    Raises:
        SafetensorError: ``index-json``, ``duplicate-name``.
    """
    p = os.fspath(index)
    with open(p, "rb") as f:
        raw = f.read(MAX_HEADER_BYTES + 1)
    if len(raw) > MAX_HEADER_BYTES:
        raise SafetensorError(p, None, "index-json", f"the index is larger than {MAX_HEADER_BYTES} bytes")
    dups: list[str] = []

    def hook(pairs):
        d = dict(pairs)
        if len(d) != len(pairs):
            keys = [k for k, _ in pairs]
            dups.extend(k for i, k in enumerate(keys) if k in keys[:i])
        return d

    try:
        obj = json.loads(raw.decode("utf-8"), object_pairs_hook=hook,
                         parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not valid JSON")))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise SafetensorError(p, None, "index-json", f"the index is not valid UTF-8 JSON: {e}") from None
    if dups:
        raise SafetensorError(p, dups[0], "duplicate-name", f"the index gives the key {dups[0]!r} more than once")
    if not isinstance(obj, dict) or not isinstance(obj.get("weight_map"), dict):
        raise SafetensorError(p, None, "index-json", "the index must be a JSON object with a \"weight_map\" object")
    wm = obj["weight_map"]
    for name, rel in wm.items():
        if not isinstance(rel, str) or not rel:
            raise SafetensorError(p, name, "index-json", f"weight_map values must be shard file names, got {rel!r}")
    md = obj.get("metadata")
    if md is not None and not isinstance(md, dict):
        raise SafetensorError(p, None, "index-json", f"\"metadata\" must be an object, got {type(md).__name__}")
    return dict(wm), md


def load_checkpoint(path: str | os.PathLike, device: str | Device | int = "cpu", *, mmap: bool = True,
                    progress: bool | None = None, verbose: bool = False) -> StateDict:
    """Load every tensor of a checkpoint: a Hugging Face model folder, a ``model.safetensors.index.json``, or
    one ``.safetensors`` file (see :func:`resolve_checkpoint`).

    All shard headers are validated and checked against the index before any tensor data is read. To a device
    other than the CPU, every shard streams through one pipeline with one progress bar.

    Args:
        path: folder, index or file.
        device, mmap, progress, verbose: as :func:`nbxtensor.load_file`.

    Returns:
        a :class:`~nbxtensor.io.stream.StateDict` name -> Tensor (in the index's order) with ``stats`` (files,
        bytes, seconds, GB/s) and ``metadata`` (the index's ``metadata``, or a single file's ``__metadata__``).

    Raises:
        FileNotFoundError: see :func:`resolve_checkpoint`.
        SafetensorError: a shard or the index breaks a rule (see this module and :mod:`nbxtensor.io.header`).
        nbxtensor.OutOfMemoryError: the device cannot hold the tensors (before any byte is read).

    Example:
        >>> import nbxtensor as nbx
        >>> sd = nbx.io.load_checkpoint("path/to/Llama-3-8B", device="cuda", verbose=True)  # doctest: +SKIP
        loaded 291 tensors, 16.061 GB in 4.120 s (3.90 GB/s) to cuda:0
    """
    _check_host()
    dev = as_device(device)
    t0 = time.perf_counter()
    index, files = resolve_checkpoint(path)
    if index is None:
        from .safetensors import load_file
        return load_file(files[0], dev, mmap=mmap, progress=progress, verbose=verbose)
    weight_map, md = read_index(index)
    folder = os.path.dirname(os.path.abspath(index))
    use_map = dev.type == "cpu" and mmap
    opened = []
    try:
        for f in files:
            opened.append(_Mapping(f) if use_map else open_source(f))
        by_path = {os.path.normpath(o.path): o for o in opened}
        where: dict[str, str] = {}
        for o in opened:
            for name in o.header.tensors:
                if name in where:
                    raise SafetensorError(o.path, name, "duplicate-name", f"the tensor is also in {where[name]}")
                where[name] = o.path
        for name, rel in weight_map.items():
            o = by_path[os.path.normpath(os.path.join(folder, rel))]
            if name not in o.header.tensors:
                raise SafetensorError(index, name, "index-missing-tensor", f"the index puts it in {rel!r}, which has "
                                      "no tensor of that name")
        unlisted = [n for n in where if n not in weight_map]
        if unlisted:
            raise SafetensorError(where[unlisted[0]], unlisted[0], "index-unlisted", f"the tensor is missing from "
                                  f"the index's weight_map ({len(unlisted)} such tensors)")
        if use_map:
            out, stats = {}, LoadStats(device="cpu", mode="mmap", files=len(opened))
            for name, rel in weight_map.items():
                o = by_path[os.path.normpath(os.path.join(folder, rel))]
                out[name], copied = o.tensor(o.header.tensors[name])
                stats.copied_bytes += copied
                stats.nbytes += o.header.tensors[name].nbytes
            stats.tensors = len(out)
        else:
            requests = [(o, list(o.header.tensors.values())) for o in opened]
            tensors, stats = stream_tensors(requests, dev, progress=progress,
                                            desc=os.path.basename(os.path.dirname(os.path.abspath(index))) or "loading")
            flat = dict(zip((t.name for _, ts in requests for t in ts), tensors))
            out = {name: flat[name] for name in weight_map}
    finally:
        for o in opened:
            if not use_map:
                o.close()
    stats.seconds = time.perf_counter() - t0
    if verbose:
        print(str(stats), file=sys.stderr)
    return StateDict(out, stats=stats, metadata=md)

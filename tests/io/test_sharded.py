"""Sharded checkpoints: Hugging Face model folders and ``model.safetensors.index.json``."""

import gc
import json
import os

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import base
from nbxtensor.io import SafetensorError, load_checkpoint, stream
from nbxtensor.io.sharded import resolve_checkpoint

from st_helpers import FakeBackend, craft, entry, raw_bytes


def _tensors():
    rng = np.random.default_rng(1)
    t = {}
    for i in range(3):
        t[f"model.layers.{i}.self_attn.q_proj.weight"] = nbx.from_numpy(rng.standard_normal((8, 8)).astype(np.float32))
        t[f"model.layers.{i}.input_layernorm.weight"] = nbx.ones(8, dtype=nbx.bfloat16)
    t["model.embed_tokens.weight"] = nbx.from_numpy(rng.standard_normal((16, 8)).astype(np.float16))
    t["lm_head.scales"] = nbx.zeros(0, dtype=nbx.float8_e4m3fn)
    return t


def _write_sharded(folder, t, nshards=3, extra_index=None):
    """Split ``t`` over ``nshards`` files named as transformers names them, and write the index."""
    os.makedirs(folder, exist_ok=True)
    names = list(t)
    weight_map = {}
    for s in range(nshards):
        fname = f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"
        part = {n: t[n] for n in names[s::nshards]}
        nbx.save_file(part, os.path.join(folder, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    index = {"metadata": {"total_size": sum(v.nbytes for v in t.values())},
             "weight_map": {n: weight_map[n] for n in names}}
    index.update(extra_index or {})
    path = os.path.join(folder, "model.safetensors.index.json")
    with open(path, "w") as f:
        json.dump(index, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write("{}")
    return path


@pytest.fixture
def ckpt(tmp_path):
    t = _tensors()
    index = _write_sharded(str(tmp_path / "model"), t)
    return str(tmp_path / "model"), index, t


def _same(sd, t):
    assert list(sd) == list(t)
    for k, v in t.items():
        assert sd[k].dtype is v.dtype and tuple(sd[k].shape) == tuple(v.shape)
        assert raw_bytes(sd[k]) == raw_bytes(v)


def test_folder_and_index_load(ckpt):
    folder, index, t = ckpt
    for sd in (load_checkpoint(folder), load_checkpoint(index)):
        _same(sd, t)
        assert sd.stats.files == 3 and sd.stats.mode == "mmap" and sd.stats.tensors == len(t)
        assert sd.metadata == {"total_size": sum(v.nbytes for v in t.values())}


@pytest.mark.parametrize("readers", [0, 2])
def test_streamed_across_shards(ckpt, monkeypatch, readers, capsys):
    folder, index, t = ckpt
    monkeypatch.setattr(stream, "CHUNK_BYTES", 100)
    monkeypatch.setattr(stream, "READERS", readers)
    sd = load_checkpoint(folder, mmap=False, verbose=True)
    _same(sd, t)
    assert sd.stats.files == 3 and sd.stats.nbytes == sum(v.nbytes for v in t.values())
    assert f"loaded {len(t)} tensors" in capsys.readouterr().err


def test_to_a_non_cpu_device_and_failure_frees_everything(ckpt, monkeypatch):
    folder, index, t = ckpt
    fake = FakeBackend()
    monkeypatch.setitem(base._BACKENDS, "xpu", fake)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 64)
    sd = load_checkpoint(folder, device="xpu")
    assert all(v.device.type == "xpu" for v in sd.values())
    _same(sd, t)
    del sd
    gc.collect()
    assert fake.live == 0
    fake.fail_after = fake.writes + 7
    with pytest.raises(RuntimeError, match="write failed"):
        load_checkpoint(folder, device="xpu")
    gc.collect()
    assert fake.live == 0


def test_folder_with_one_file(tmp_path):
    t = {"w": nbx.arange(4, dtype=nbx.float32)}
    d1 = tmp_path / "a"
    d1.mkdir()
    nbx.save_file(t, str(d1 / "model.safetensors"))
    (d1 / "other.safetensors").write_bytes(b"junk")  # model.safetensors wins
    _same(load_checkpoint(str(d1)), t)
    d2 = tmp_path / "b"
    d2.mkdir()
    nbx.save_file(t, str(d2 / "diffusion_pytorch_model.safetensors"))
    _same(load_checkpoint(str(d2)), t)
    _same(load_checkpoint(str(d2 / "diffusion_pytorch_model.safetensors")), t)


def test_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no"):
        load_checkpoint(str(tmp_path))
    nbx.save_file({"a": nbx.ones(1)}, str(tmp_path / "x.safetensors"))
    nbx.save_file({"b": nbx.ones(1)}, str(tmp_path / "y.safetensors"))
    with pytest.raises(FileNotFoundError, match="several"):
        load_checkpoint(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such"):
        load_checkpoint(str(tmp_path / "missing"))


def _index(folder, obj=None, raw=None):
    p = os.path.join(folder, "model.safetensors.index.json")
    with open(p, "wb") as f:
        f.write(raw if raw is not None else json.dumps(obj).encode())
    return p


def _shard(folder, name, tensors):
    nbx.save_file(tensors, os.path.join(folder, name))


@pytest.mark.parametrize("case, setup, rule, tensor", [
    ("not-json", lambda d: _index(d, raw=b"{"), "index-json", None),
    ("no-weight-map", lambda d: _index(d, {"metadata": {}}), "index-json", None),
    ("weight-map-list", lambda d: _index(d, {"weight_map": ["a"]}), "index-json", None),
    ("value-not-string", lambda d: _index(d, {"weight_map": {"a": 1}}), "index-json", "a"),
    ("metadata-not-object", lambda d: (_shard(d, "s.safetensors", {"a": nbx.ones(1)}),
                                       _index(d, {"metadata": 3, "weight_map": {"a": "s.safetensors"}})),
     "index-json", None),
    ("duplicate-key", lambda d: _index(d, raw=b'{"weight_map":{"a":"s.safetensors","a":"t.safetensors"}}'),
     "duplicate-name", "a"),
    ("absolute-path", lambda d: _index(d, {"weight_map": {"a": "/etc/passwd"}}), "index-path", "a"),
    ("leaves-folder", lambda d: _index(d, {"weight_map": {"a": "../x.safetensors"}}), "index-path", "a"),
    ("missing-file", lambda d: _index(d, {"weight_map": {"a": "nope.safetensors"}}), "index-missing-file", "a"),
    ("missing-tensor", lambda d: (_shard(d, "s.safetensors", {"a": nbx.ones(1)}),
                                  _index(d, {"weight_map": {"a": "s.safetensors", "b": "s.safetensors"}})),
     "index-missing-tensor", "b"),
    ("unlisted-tensor", lambda d: (_shard(d, "s.safetensors", {"a": nbx.ones(1), "b": nbx.ones(1)}),
                                   _index(d, {"weight_map": {"a": "s.safetensors"}})), "index-unlisted", "b"),
    ("tensor-in-two-shards", lambda d: (_shard(d, "s.safetensors", {"a": nbx.ones(1)}),
                                        _shard(d, "t.safetensors", {"a": nbx.ones(1), "b": nbx.ones(1)}),
                                        _index(d, {"weight_map": {"a": "s.safetensors", "b": "t.safetensors"}})),
     "duplicate-name", "a"),
    ("bad-shard-header", lambda d: (open(os.path.join(d, "s.safetensors"), "wb").write(
        craft({"a": entry("F32", [3], 0, 8)}, b"\0" * 8)), _index(d, {"weight_map": {"a": "s.safetensors"}})),
     "size-mismatch", "a"),
])
def test_index_rules(tmp_path, case, setup, rule, tensor):
    d = str(tmp_path / case)
    os.makedirs(d)
    setup(d)
    for mmap in (True, False):
        with pytest.raises(SafetensorError) as ei:
            load_checkpoint(d, mmap=mmap)
        assert (ei.value.rule, ei.value.tensor) == (rule, tensor), str(ei.value)
        assert f"[{rule}]" in str(ei.value) and d in ei.value.file


def test_index_checked_before_any_data_is_read(ckpt, monkeypatch):
    folder, index, t = ckpt
    with open(index) as f:
        obj = json.load(f)
    obj["weight_map"]["ghost"] = next(iter(obj["weight_map"].values()))
    with open(index, "w") as f:
        json.dump(obj, f)
    reads = []
    monkeypatch.setattr(stream, "_pread_into", lambda *a: reads.append(a) or 0)
    with pytest.raises(SafetensorError, match="index-missing-tensor"):
        load_checkpoint(folder, mmap=False)
    assert reads == []


def test_resolve_checkpoint(ckpt):
    folder, index, t = ckpt
    idx, files = resolve_checkpoint(folder)
    assert idx == index and [os.path.basename(f) for f in files] == [
        f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]

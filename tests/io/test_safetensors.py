"""load_file / safe_open / save_file: round trips of every dtype, zero-copy mapping, misaligned data, slices,
the streamed pipeline (overlap, chunking, failures leave nothing behind), progress and statistics."""

import gc
import io
import mmap
import os
import sys
import threading

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import base
from nbxtensor.device.cpu import memory_allocated
from nbxtensor.dtypes.table import DTYPES
from nbxtensor.io import SafetensorError, stream
from nbxtensor.io.header import parse_bytes

from st_helpers import FakeBackend, craft, entry, raw_bytes, write

CODED = [d for d in DTYPES if d.safetensors]
RNG = np.random.default_rng(0)


def _random(d, shape):
    """Values of dtype ``d``: for floats, random bit patterns (NaN, inf, -0 and subnormals included)."""
    n = int(np.prod(shape))
    if d.kind == "bool":
        return nbx.from_numpy(RNG.integers(0, 2, n).astype(np.bool_).reshape(shape))
    bits = RNG.integers(0, 256, n * d.itemsize, dtype=np.uint8)
    return nbx.from_numpy(bits.view(d.numpy).reshape(shape).copy())


@pytest.fixture
def xpu(monkeypatch):
    """A fake non-CPU device: exercises the streamed (GPU) path."""
    fake = FakeBackend()
    monkeypatch.setitem(base._BACKENDS, "xpu", fake)
    return fake


# -- round trips --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", CODED, ids=[d.name for d in CODED])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (7,), (5, 3), (2, 1, 3, 1, 2)], ids=str)
def test_round_trip_every_dtype_bit_exact(tmp_path, d, shape):
    x = _random(d, shape)
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"x": x, "pad": nbx.ones(3, dtype=nbx.uint8)}, p)
    for sd in (nbx.load_file(p), nbx.load_file(p, mmap=False), nbx.io.load(open(p, "rb").read())):
        y = sd["x"]
        assert y.dtype is d and tuple(y.shape) == shape and y.is_contiguous()
        assert raw_bytes(y) == raw_bytes(x)


def test_all_float8_bit_patterns_round_trip(tmp_path):
    p = str(tmp_path / "f8.safetensors")
    bits = np.arange(256, dtype=np.uint8)
    t = {n: nbx.from_numpy(bits.view(getattr(ml_dtypes, n)).copy()) for n in ("float8_e4m3fn", "float8_e5m2")}
    t["bf16"] = nbx.from_numpy(np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16))
    nbx.save_file(t, p)
    sd = nbx.load_file(p)
    for k in t:
        assert raw_bytes(sd[k]) == raw_bytes(t[k])


def test_complex128_has_no_code_and_is_refused(tmp_path):
    with pytest.raises(ValueError, match="complex128"):
        nbx.save_file({"c": nbx.zeros(2, dtype=nbx.complex128)}, str(tmp_path / "c.safetensors"))
    assert not os.listdir(tmp_path)


def test_save_non_contiguous_writes_row_major(tmp_path):
    base_ = nbx.arange(24, dtype=nbx.float32).view(4, 6)
    t = {"t": base_.t(), "s": nbx.arange(40, dtype=nbx.int16).view(5, 8)[1:4, 2:7:2],
         "e": nbx.arange(3, dtype=nbx.float64).view(3, 1).expand(3, 4)}
    p = str(tmp_path / "x.safetensors")
    nbx.save_file(t, p)
    sd = nbx.load_file(p)
    for k, v in t.items():
        np.testing.assert_array_equal(sd[k].numpy(), np.ascontiguousarray(v.numpy()))
        assert sd[k].is_contiguous()


def test_save_layout_is_aligned_and_padded(tmp_path):
    t = {n: _random(d, (3,)) for n, d in zip("abcdefghijklmnop", CODED)}
    b = nbx.io.save(t)
    h = parse_bytes(b)
    assert h.header_len % 8 == 0
    for v in h.tensors.values():
        assert v.begin % v.dtype.itemsize == 0
    assert b[8 + h.header_len - 1:8 + h.header_len] in (b" ", b"}")


def test_save_refuses_tensors_sharing_memory(tmp_path):
    w = nbx.arange(12, dtype=nbx.float32).view(3, 4)
    p = str(tmp_path / "x.safetensors")
    for t in ({"w": w, "tied": w}, {"w": w, "row": w[1]}, {"w": w, "t": w.t()},
              {"a": w.view(-1)[0:7], "b": w.view(-1)[6:9]}, {"a": w.view(-1)[:10], "b": w.view(-1)[3:4],
                                                              "c": w.view(-1)[8:9]}):
        with pytest.raises(RuntimeError, match="share memory"):
            nbx.save_file(t, p)
    assert not os.path.exists(p)
    # Disjoint views of one buffer do not share bytes: allowed, as the reference allows them.
    nbx.save_file({"a": w[0], "b": w[1:]}, p)
    sd = nbx.load_file(p)
    np.testing.assert_array_equal(sd["b"].numpy(), w[1:].numpy())


@pytest.mark.parametrize("tensors, metadata, exc, match", [
    ([("x", 1)], None, ValueError, "dict"),
    ({"x": np.zeros(2)}, None, ValueError, "expected Tensor"),
    ({1: nbx.zeros(2)}, None, ValueError, "names must be strings"),
    ({"__metadata__": nbx.zeros(2)}, None, ValueError, "reserved"),
    ({"x": nbx.zeros(2)}, {"a": 1}, TypeError, "metadata"),
    ({"x": nbx.zeros(2)}, {1: "a"}, TypeError, "metadata"),
    ({"x": nbx.zeros(2)}, ["a"], TypeError, "metadata"),
])
def test_save_argument_errors(tmp_path, tensors, metadata, exc, match):
    p = str(tmp_path / "x.safetensors")
    with pytest.raises(exc, match=match):
        nbx.save_file(tensors, p, metadata=metadata)
    assert not os.listdir(tmp_path)


def test_save_is_atomic_and_leaves_caller_objects_alone(tmp_path, monkeypatch):
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"old": nbx.ones(2)}, p)
    before = open(p, "rb").read()
    w = nbx.arange(6, dtype=nbx.float32)
    t = {"w": w, "v": nbx.zeros(3)}
    snapshot = (list(t), [id(v) for v in t.values()], raw_bytes(w))
    from nbxtensor.io import safetensors as S
    calls = []

    def failing(v):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return np.ascontiguousarray(v.numpy()).reshape(-1).view(np.uint8)
    monkeypatch.setattr(S, "_host_bytes", failing)
    with pytest.raises(OSError, match="disk full"):
        nbx.save_file(t, p)
    assert open(p, "rb").read() == before and os.listdir(tmp_path) == ["x.safetensors"]
    monkeypatch.undo()
    nbx.save_file(t, p, metadata={"k": "v"})
    assert (list(t), [id(v) for v in t.values()], raw_bytes(w)) == snapshot
    assert nbx.load_file(p).metadata == {"k": "v"}


def test_save_from_another_device(tmp_path, xpu):
    x = nbx.arange(10, dtype=nbx.bfloat16).to("xpu").view(2, 5).t()
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"x": x}, p)
    np.testing.assert_array_equal(nbx.load_file(p)["x"].numpy(), x.numpy())


# -- the CPU mapping ------------------------------------------------------------------------------------------------
def test_cpu_load_is_zero_copy_and_copy_on_write(tmp_path):
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"w": nbx.arange(16, dtype=nbx.float32).view(4, 4), "b": nbx.ones(3, dtype=nbx.float16)}, p)
    before = open(p, "rb").read()
    allocated = memory_allocated()
    sd = nbx.load_file(p)
    assert memory_allocated() == allocated  # no host buffer was allocated: the tensors wrap the mapping
    assert sd.stats.mode == "mmap" and sd.stats.copied_bytes == 0
    w = sd["w"]
    owner = w.untyped_storage().owner
    assert isinstance(owner, np.ndarray) and isinstance(owner.base.obj, mmap.mmap)
    lo = owner.ctypes.data
    assert lo <= w.data_ptr() < lo + owner.nbytes and w.data_ptr() % 4 == 0
    assert not w.is_readonly
    w[0, 0] = 100.0  # writable, copy-on-write: the file never changes
    assert float(w[0, 0]) == 100.0
    del sd, w, owner
    gc.collect()
    assert open(p, "rb").read() == before
    assert float(nbx.load_file(p)["w"][0, 0]) == 0.0


def test_mapping_outlives_the_loader_and_the_file_name(tmp_path):
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"w": nbx.arange(1000, dtype=nbx.int32)}, p)
    with nbx.safe_open(p) as f:
        w = f.get_tensor("w")
    os.unlink(p)
    gc.collect()
    assert int(w.numpy().sum()) == sum(range(1000))
    # A NumPy view outlives its tensor and the loader: it keeps the mapping alive by itself.
    a = nbx.load_file(str(tmp_path / "y.safetensors") if _save_y(tmp_path) else None)["w"].numpy()
    b = nbx.safe_open(str(tmp_path / "y.safetensors")).get_slice("w")[...].numpy()
    gc.collect()
    assert int(a.sum()) == int(b.sum()) == sum(range(1000))


def _save_y(tmp_path):
    nbx.save_file({"w": nbx.arange(1000, dtype=nbx.int32)}, str(tmp_path / "y.safetensors"))
    return True


def test_readonly_mapping_when_copy_on_write_is_refused(tmp_path, monkeypatch):
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"w": nbx.arange(4, dtype=nbx.float32)}, p)
    real = mmap.mmap

    def no_cow(fileno, length, access=mmap.ACCESS_WRITE, **kw):
        if access == mmap.ACCESS_COPY:
            raise OSError(12, "Cannot allocate memory")
        return real(fileno, length, access=access, **kw)
    from nbxtensor.io import safetensors as S
    monkeypatch.setattr(S.mmap, "mmap", no_cow)
    w = nbx.load_file(p)["w"]
    assert w.is_readonly
    with pytest.raises(RuntimeError, match="read-only"):
        w.fill_(1)
    c = w.clone()
    c.fill_(1)
    assert c.tolist() == [1, 1, 1, 1] and w.tolist() == [0, 1, 2, 3]


def _misaligned_file():
    """Header of 9 bytes' JSON-padding so the data section starts at byte 8 + N with N odd: every tensor is
    misaligned for its dtype (except 1-byte types)."""
    vals = {"f32": np.arange(5, dtype=np.float32) * 1.5, "f64": np.array([np.pi, -0.0, np.inf]),
            "bf16": np.array([1.5, -2, 3], dtype=ml_dtypes.bfloat16), "i64": np.array([-1, 2**40], dtype=np.int64),
            "c64": np.array([1 + 2j], dtype=np.complex64), "u8": np.arange(3, dtype=np.uint8)}
    codes = {"f32": "F32", "f64": "F64", "bf16": "BF16", "i64": "I64", "c64": "C64", "u8": "U8"}
    hdr, data = {}, b""
    for k, a in vals.items():
        hdr[k] = entry(codes[k], a.shape, len(data), len(data) + a.nbytes)
        data += a.tobytes()
    import json
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    raw += b" " * ((-len(raw) % 8) + 1)  # an odd header length: data_start = 8 + N is odd
    return craft(raw=raw, data=data), vals


def test_misaligned_offsets_load_correctly_by_copy(tmp_path):
    content, vals = _misaligned_file()
    p = write(tmp_path, "mis.safetensors", content)
    sd = nbx.load_file(p)
    assert sd.stats.copied_bytes == sum(a.nbytes for k, a in vals.items() if k != "u8")
    for k, a in vals.items():
        t = sd[k]
        assert t.data_ptr() % t.element_size() == 0
        assert t.numpy().tobytes() == a.tobytes()
        assert not t.is_readonly
    for sd2 in (nbx.load_file(p, mmap=False), nbx.io.load(content)):
        for k, a in vals.items():
            assert sd2[k].numpy().tobytes() == a.tobytes()
    with nbx.safe_open(p) as f:
        assert f.get_slice("f64")[1:].numpy().tobytes() == vals["f64"][1:].tobytes()
        assert f.get_tensor("bf16").numpy().tobytes() == vals["bf16"].tobytes()


# -- safe_open -------------------------------------------------------------------------------------------------------
@pytest.fixture
def sample(tmp_path):
    p = str(tmp_path / "s.safetensors")
    t = {"w": nbx.from_numpy(np.arange(120, dtype=np.float32).reshape(4, 5, 6)),
         "b": nbx.from_numpy(np.arange(7, dtype=ml_dtypes.bfloat16)), "s": nbx.tensor(3.5),
         "z": nbx.zeros(0, 3, dtype=nbx.int8)}
    nbx.save_file(t, p, metadata={"format": "pt", "note": "x"})
    return p, t


def test_safe_open_api(sample):
    p, t = sample
    with nbx.safe_open(p, framework="nbx") as f:
        assert f.keys() == sorted(t)
        assert f.offset_keys() == ["s", "w", "b", "z"]  # F32 (by name), BF16, I8
        assert f.metadata() == {"format": "pt", "note": "x"}
        for k in t:
            assert raw_bytes(f.get_tensor(k)) == raw_bytes(t[k])
        sl = f.get_slice("w")
        assert sl.get_shape() == [4, 5, 6] and sl.get_dtype() == "F32" and sl.dtype is nbx.float32 and len(sl) == 4
        assert f.get_slice("b").get_dtype() == "BF16"
        with pytest.raises(KeyError, match="nope"):
            f.get_tensor("nope")
        with pytest.raises(KeyError, match="nope"):
            f.get_slice("nope")
        assert f.stats.tensors == len(t)
    with pytest.raises(RuntimeError, match="closed"):
        f.get_tensor("w")
    with pytest.raises(ValueError, match="framework"):
        nbx.safe_open(p, framework="pt")
    f2 = nbx.safe_open(p)  # usable without a with-block
    assert f2.get_tensor("s").item() == 3.5
    f2.close()


def test_metadata_absent_is_none(tmp_path):
    p = str(tmp_path / "x.safetensors")
    nbx.save_file({"a": nbx.ones(1)}, p)
    with nbx.safe_open(p) as f:
        assert f.metadata() is None
    assert nbx.load_file(p).metadata is None


IDX = [np.s_[0], np.s_[-1], np.s_[1:3], np.s_[:, 1:], np.s_[..., 2], np.s_[..., -2:], np.s_[:, ::2], np.s_[1:, 2:4, 3],
       np.s_[0, 0, 0], np.s_[2:1], np.s_[5:], np.s_[-10:10], np.s_[:, -3:-1, ::4], np.s_[...], np.s_[()],
       np.s_[1, ..., 1], np.s_[np.int64(2)], np.s_[nbx.tensor(1)]]


@pytest.mark.parametrize("idx", IDX, ids=[str(i) for i in IDX])
def test_get_slice_matches_numpy_basic_indexing(sample, idx):
    p, t = sample
    want = t["w"].numpy()[idx if not isinstance(idx, nbx.Tensor) else int(idx)]
    with nbx.safe_open(p) as f:
        got = f.get_slice("w")[idx]
    assert tuple(got.shape) == want.shape and got.is_contiguous()
    np.testing.assert_array_equal(got.numpy(), want)


def test_get_slice_of_scalars_zero_size_and_bf16(sample):
    p, t = sample
    with nbx.safe_open(p) as f:
        assert f.get_slice("s")[...].item() == 3.5 and f.get_slice("s")[()].item() == 3.5
        assert tuple(f.get_slice("z")[:, 1:].shape) == (0, 2)
        assert f.get_slice("b")[2:5].numpy().tobytes() == t["b"].numpy()[2:5].tobytes()


@pytest.mark.parametrize("idx, exc", [
    (np.s_[4], IndexError), (np.s_[-5], IndexError), (np.s_[0, 0, 0, 0], IndexError), (np.s_[..., ...], IndexError),
    (np.s_[::-1], ValueError), (np.s_[::0], ValueError), (np.s_[None], TypeError), (np.s_[[0, 1]], TypeError),
    (np.s_[True], TypeError), (np.s_[0.5], TypeError), (np.s_["a":], TypeError), (np.s_[:, 5], IndexError),
])
def test_get_slice_errors(sample, idx, exc):
    p, _ = sample
    with nbx.safe_open(p) as f:
        with pytest.raises(exc):
            f.get_slice("w")[idx]


# -- the streamed pipeline -----------------------------------------------------------------------------------------
@pytest.fixture
def big(tmp_path):
    """A file of a few tensors spanning several small chunks (chunk size set to 1000 bytes by the tests)."""
    p = str(tmp_path / "big.safetensors")
    t = {"a": _random(nbx.float32, (1000,)), "b": _random(nbx.bfloat16, (3, 7)), "c": _random(nbx.int64, (501,)),
         "z": nbx.zeros(0, dtype=nbx.float32), "d": _random(nbx.uint8, (2999,)), "m": nbx.tensor([True, False] * 9)}
    nbx.save_file(t, p)
    return p, t


@pytest.mark.parametrize("readers", [0, 1, 2, 3])
@pytest.mark.parametrize("chunk", [1000, 7, 1 << 20])
def test_streamed_load_is_exact_for_any_chunking(big, monkeypatch, readers, chunk):
    p, t = big
    monkeypatch.setattr(stream, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(stream, "READERS", readers)
    sd = nbx.load_file(p, mmap=False)
    assert list(sd) == list(nbx.load_file(p))
    for k in t:
        assert raw_bytes(sd[k]) == raw_bytes(t[k]) and sd[k].dtype is t[k].dtype
    s = sd.stats
    assert s.mode == "stream" and s.tensors == len(t) and s.nbytes == sum(v.nbytes for v in t.values())
    assert s.overlapped == (readers > 0 and chunk < s.nbytes) and s.staging == "pageable"


def test_streamed_load_to_a_non_cpu_device(big, xpu, monkeypatch):
    p, t = big
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)
    sd = nbx.load_file(p, device="xpu")
    for k in t:
        assert sd[k].device == nbx.device("xpu:0")
        assert raw_bytes(sd[k]) == raw_bytes(t[k])
    assert xpu.writes > len(t)  # chunked
    with nbx.safe_open(p, device="xpu") as f:
        b = f.get_tensor("b")
        assert b.device.type == "xpu" and raw_bytes(b) == raw_bytes(t["b"])
        s = f.get_slice("c")[10:20]
        assert s.device.type == "xpu" and s.tolist() == t["c"][10:20].tolist()


def test_pinned_staging_when_the_device_offers_it(big, xpu, monkeypatch):
    p, t = big
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)
    pinned, sources = [], []

    def pin(cpu_tensor):  # stands in for nbxtensor.cuda.pin_memory
        out = cpu_tensor.clone()
        pinned.append(out.data_ptr())
        return out
    monkeypatch.setattr(stream, "_pinner", lambda dev: pin)
    real_write = xpu.write

    def write(dst, off, src):
        sources.append(src.ctypes.data)
        return real_write(dst, off, src)
    monkeypatch.setattr(xpu, "write", write)
    sd = nbx.load_file(p, device="xpu")
    assert sd.stats.staging == "pinned" and len(pinned) == stream.READERS + 1
    assert all(any(b <= s < b + 1000 for b in pinned) for s in sources)  # every upload reads a pinned buffer
    assert all(raw_bytes(sd[k]) == raw_bytes(t[k]) for k in t)

    def no_pin(cpu_tensor):
        raise nbx.OutOfMemoryError("pinned host memory exhausted")
    monkeypatch.setattr(stream, "_pinner", lambda dev: no_pin)
    sd = nbx.load_file(p, device="xpu")
    assert sd.stats.staging == "pageable" and all(raw_bytes(sd[k]) == raw_bytes(t[k]) for k in t)


def test_reading_overlaps_writing(big, monkeypatch):
    """While the first chunk is being written, a reader thread has already read the next one."""
    p, t = big
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(stream, "READERS", 1)
    reads, second_read = [], threading.Event()
    real_pread = stream._pread_into

    def pread(fd, buf, off):
        reads.append(threading.get_ident())
        if len(reads) >= 2:
            second_read.set()
        return real_pread(fd, buf, off)
    monkeypatch.setattr(stream, "_pread_into", pread)
    from nbxtensor.device.cpu import cpu_backend
    real_write, seen = cpu_backend.write, []

    def write(dst, off, src):
        if not seen:
            seen.append(second_read.wait(timeout=10))
        return real_write(dst, off, src)
    monkeypatch.setattr(cpu_backend, "write", write)
    sd = nbx.load_file(p, mmap=False)
    assert seen == [True] and threading.get_ident() not in reads
    assert raw_bytes(sd["a"]) == raw_bytes(t["a"]) and sd.stats.overlapped


@pytest.mark.parametrize("readers", [0, 2])
def test_failed_stream_leaves_nothing_behind(big, monkeypatch, readers):
    p, t = big
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(stream, "READERS", readers)
    real_pread, n = stream._pread_into, []

    def pread(fd, buf, off):
        n.append(1)
        if len(n) == 4:
            raise OSError(5, "Input/output error")
        return real_pread(fd, buf, off)
    monkeypatch.setattr(stream, "_pread_into", pread)
    gc.collect()
    before, threads = memory_allocated(), threading.active_count()
    with pytest.raises(OSError, match="Input/output"):
        nbx.load_file(p, mmap=False)
    gc.collect()
    assert memory_allocated() == before and threading.active_count() == threads


def test_failed_upload_frees_every_device_allocation(big, xpu, monkeypatch):
    p, t = big
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)
    xpu.fail_after = 5
    with pytest.raises(RuntimeError, match="write failed"):
        nbx.load_file(p, device="xpu")
    gc.collect()
    assert xpu.live == 0


def test_file_shrinking_after_header_is_reported(big, monkeypatch):
    p, t = big
    monkeypatch.setattr(stream, "_pread_into", lambda fd, buf, off: 0)
    with pytest.raises(SafetensorError, match="past-end") as ei:
        nbx.load_file(p, mmap=False)
    assert ei.value.file == p


def test_bool_bytes_other_than_0_1_are_refused_everywhere(tmp_path, xpu):
    p = write(tmp_path, "b.safetensors", craft({"m": entry("BOOL", [2, 2], 0, 4)}, b"\x00\x01\x01\x07"))
    for load in (lambda: nbx.load_file(p), lambda: nbx.load_file(p, mmap=False), lambda: nbx.load_file(p, "xpu")):
        with pytest.raises(SafetensorError, match="bool-value"):
            load()
    with nbx.safe_open(p) as f:
        assert f.get_slice("m")[0].tolist() == [False, True]
        with pytest.raises(SafetensorError, match="bool-value"):
            f.get_slice("m")[1]


# -- progress and statistics ---------------------------------------------------------------------------------------
def test_verbose_reports_the_read_rate(big, capsys):
    p, t = big
    sd = nbx.load_file(p, mmap=False, verbose=True)
    err = capsys.readouterr().err
    s = sd.stats
    assert f"loaded {len(t)} tensors, " in err and "GB/s" in err and "GB in" in err
    assert s.nbytes == sum(v.nbytes for v in t.values()) and s.seconds > 0 and s.gb_per_s > 0
    nbx.load_file(p, verbose=True)
    assert "mapped" in capsys.readouterr().err


def test_progress_line_without_tqdm(big, monkeypatch, capsys):
    p, t = big
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    nbx.load_file(p, mmap=False, progress=True)
    err = capsys.readouterr().err
    assert "big.safetensors:" in err and "(100.0%)" in err and err.endswith("\n")
    nbx.load_file(p, mmap=False)  # progress=None: stderr is not a TTY here, so nothing
    nbx.load_file(p, mmap=False, progress=False)
    assert capsys.readouterr().err == ""


def test_progress_auto_shows_only_for_large_loads_on_a_tty(monkeypatch):
    class TTY(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.setitem(sys.modules, "tqdm", None)
    out = TTY()
    small = stream.Progress(1000, "x", None, stream=out)
    large = stream.Progress(stream.PROGRESS_MIN_BYTES, "x", None, stream=out)
    assert not small.enabled and large.enabled
    large.update(stream.PROGRESS_MIN_BYTES)
    large.close()
    assert "100.0%" in out.getvalue()
    assert not stream.Progress(stream.PROGRESS_MIN_BYTES, "x", None, stream=io.StringIO()).enabled


def test_progress_uses_tqdm_when_importable(monkeypatch):
    calls = []

    class FakeTqdm:
        def __init__(self, **kw):
            calls.append(("init", kw["total"]))

        def update(self, n):
            calls.append(("update", n))

        def close(self):
            calls.append(("close",))
    import types
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    pr = stream.Progress(10, "x", True, stream=io.StringIO())
    pr.update(4)
    pr.update(6)
    pr.close()
    assert calls == [("init", 10), ("update", 4), ("update", 6), ("close",)]


def test_load_from_bytes_and_save_to_bytes():
    t = {"a": nbx.from_numpy(np.arange(3, dtype=np.uint8).view(ml_dtypes.float8_e5m2)),
         "b": nbx.tensor([[1, 2]], dtype=nbx.uint16)}
    b = nbx.io.save(t, metadata={"m": "1"})
    sd = nbx.io.load(b)
    assert sd.metadata == {"m": "1"} and all(raw_bytes(sd[k]) == raw_bytes(t[k]) for k in t)


def test_many_tensors_load_quickly(tmp_path):
    t = {f"layer.{i}.weight": nbx.full((4,), float(i)) for i in range(2000)}
    p = str(tmp_path / "many.safetensors")
    nbx.save_file(t, p)
    sd = nbx.load_file(p)
    assert len(sd) == 2000 and sd["layer.1234.weight"].tolist() == [1234.0] * 4

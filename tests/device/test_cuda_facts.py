"""Architecture facts files: every architecture loads with every key; values are coherent; a missing file or key
is an error naming the architecture and the key; on a GPU, the file agrees with what the driver reports."""

from __future__ import annotations

import json

import pytest

import nbxtensor as nbx
from nbxtensor.device.facts import ARCHES, REQUIRED_KEYS, MissingFactError, arch_name, fact, facts

POW2 = {1 << k for k in range(16)}


@pytest.mark.parametrize("arch", ARCHES)
def test_every_architecture_has_a_coherent_facts_file(arch):
    f = facts(arch)
    assert set(REQUIRED_KEYS) <= set(f) and f["arch"] == arch
    major, minor = f["compute_capability"]
    assert arch_name(major, minor) == arch
    assert f["warp_size"] == 32 and f["max_threads_per_block"] == 1024
    assert f["smem_per_block_default"] == 48 * 1024 <= f["smem_per_block_optin"] <= f["smem_per_sm"]
    assert f["registers_per_sm"] == 65536 and f["max_registers_per_thread"] == 255
    assert f["max_threads_per_sm"] in (1536, 2048) and f["max_blocks_per_sm"] in (16, 24, 32)
    mu = f["matrix_unit"]
    assert mu["name"] and mu["dtypes"] and "float16" in mu["dtypes"]
    for family, ladder in f["tile_ladders"].items():
        for knob, values in ladder.items():
            assert values == sorted(values) and all(isinstance(v, int) and v > 0 for v in values), (arch, knob)
            if knob != "num_stages":
                assert all(v in POW2 for v in values), (arch, family, knob)
    assert f["tma"] == (major >= 9) and f["async_copy"] == (major >= 8)


def test_matrix_unit_dtypes_grow_with_the_architecture():
    assert "bfloat16" not in fact("sm70", "matrix_unit.dtypes")
    assert "bfloat16" in fact("sm80", "matrix_unit.dtypes")
    assert "float8_e4m3fn" not in fact("sm86", "matrix_unit.dtypes")
    for a in ("sm89", "sm90", "sm100", "sm120"):
        assert {"float8_e4m3fn", "float8_e5m2"} <= set(fact(a, "matrix_unit.dtypes"))
    assert "fp4_e2m1" in fact("sm100", "matrix_unit.dtypes") and "fp4_e2m1" not in fact("sm90", "matrix_unit.dtypes")


def test_dotted_keys():
    assert fact("sm90", "smem_per_block_optin") == 232448
    assert fact("sm90", "tile_ladders.matmul.BLOCK_M") == [64, 128, 256]


def test_a_missing_architecture_is_an_error_naming_it():
    with pytest.raises(MissingFactError, match="no facts file for architecture 'sm75'"):
        facts("sm75")
    with pytest.raises(KeyError):          # a MissingFactError is a KeyError
        fact("sm61", "warp_size")


def test_a_missing_key_is_an_error_naming_architecture_and_key():
    with pytest.raises(MissingFactError, match="architecture 'sm90' has no key 'matrix_unit.fp64_rate'"):
        fact("sm90", "matrix_unit.fp64_rate")
    with pytest.raises(MissingFactError, match="'sm80' has no key 'l2_bytes'"):
        fact("sm80", "l2_bytes")


def test_a_file_lacking_a_required_key_is_refused(tmp_path):
    f = dict(facts("sm90"))
    del f["smem_per_block_optin"]
    (tmp_path / "sm90.json").write_text(json.dumps(f))
    with pytest.raises(MissingFactError, match=r"'sm90' .* lacks key\(s\) \['smem_per_block_optin'\]"):
        facts("sm90", directory=str(tmp_path))
    f["smem_per_block_optin"] = 1
    f["arch"] = "sm80"
    (tmp_path / "sm90.json").write_text(json.dumps(f))
    with pytest.raises(MissingFactError, match="says arch 'sm80', expected 'sm90'"):
        facts("sm90", directory=str(tmp_path))


@pytest.mark.gpu
@pytest.mark.skipif(not nbx.cuda.is_available(), reason="no CUDA device")
def test_facts_agree_with_the_driver():
    for i in range(nbx.cuda.device_count()):
        p = nbx.cuda.get_device_properties(i)
        f = nbx.cuda.get_device_facts(i)
        assert f["arch"] == p.arch
        assert f["smem_per_block_optin"] == p.shared_memory_per_block_optin
        assert f["smem_per_sm"] == p.shared_memory_per_multiprocessor
        assert f["smem_per_block_default"] == p.shared_memory_per_block
        assert f["max_threads_per_sm"] == p.max_threads_per_multi_processor
        assert f["registers_per_sm"] == p.regs_per_multiprocessor
        assert f["warp_size"] == p.warp_size

"""runtime/configs.py: rule matching and the sweep override."""

import pytest

from nbxtensor.device.base import device as parse_device
from nbxtensor.runtime import configs
from nbxtensor.runtime.configs import bucket, launch_config, override

CPU = parse_device("cpu")


def test_bucket_is_next_power_of_two():
    assert [bucket(n) for n in (0, 1, 2, 3, 1000, 1024, 1025)] == [1, 1, 2, 4, 1024, 1024, 2048]


def test_unknown_op_names_op_and_arch():
    with pytest.raises(KeyError, match="no config for op 'no_such_op' on architecture 'interpret'"):
        launch_config("no_such_op", CPU)


def test_override_lays_settings_over_the_rule_and_restores():
    base = launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)
    with override("gemv", BLOCK_N=7, num_warps=2):
        got = launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)
        assert got["BLOCK_N"] == 7 and got["num_warps"] == 2
        assert {k: v for k, v in got.items() if k not in ("BLOCK_N", "num_warps")} == \
            {k: v for k, v in base.items() if k not in ("BLOCK_N", "num_warps")}
        with override("gemv", BLOCK_N=9):
            assert launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)["BLOCK_N"] == 9
        assert launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)["BLOCK_N"] == 7
    assert launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096) == base
    assert configs._OVERRIDES == {}


def test_override_restores_after_an_error():
    with pytest.raises(RuntimeError):
        with override("gemv", BLOCK_N=7):
            raise RuntimeError("boom")
    assert configs._OVERRIDES == {}


def test_override_needs_a_setting():
    with pytest.raises(TypeError, match="at least one setting"):
        with override("gemv"):
            pass

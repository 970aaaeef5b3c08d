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


def test_override_refuses_an_op_no_table_has():
    # (a newcomer's run: override("softmax", ...) ran with no effect; the table's entry is "softmax_rows")
    with pytest.raises(KeyError, match="op 'softmax' is not an entry of any config table.*softmax_rows"):
        with override("softmax", BLOCK_N=64):
            pass
    assert configs._OVERRIDES == {}


def test_override_needs_a_setting():
    with pytest.raises(TypeError, match="at least one setting"):
        with override("gemv"):
            pass


# -- the memo of answers ----------------------------------------------------------------------------------
def test_a_repeated_question_is_answered_from_the_memo_with_a_fresh_dict():
    first = launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)
    key = ("gemv", "cpu", None, ("bfloat16",), ("m", 1), ("n", 4096), ("k", 4096))
    assert key in configs._MEMO
    first["BLOCK_N"] = -1                       # callers pop and change their copy
    again = launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)
    assert again["BLOCK_N"] != -1 and again is not first


def test_the_memo_answers_each_question_as_the_rules_do():
    for n in (1, 100, 4096, 1 << 20, 1 << 24):
        for dt in ("float16", "float32"):
            got = launch_config("pointwise", CPU, dtypes=(dt,), numel=n)
            assert got == configs._launch_config("pointwise", CPU, (dt,), {"numel": n})


def test_an_override_is_seen_although_the_question_was_memoised():
    base = launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)
    g = configs.state()
    with override("gemv", BLOCK_N=3):
        assert configs.state() != g
        assert launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096)["BLOCK_N"] == 3
    assert configs.state() != g                 # plans made under the override are not reused after it
    assert launch_config("gemv", CPU, dtypes=("bfloat16",), m=1, n=4096, k=4096) == base


def test_replacing_arch_of_drops_the_memo(monkeypatch):
    launch_config("pointwise", CPU, dtypes=("float32",), numel=1000)
    before = configs.state()
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    assert configs.state() != before
    got = launch_config("pointwise", CPU, dtypes=("float32",), numel=1000)
    assert got == configs._launch_config("pointwise", CPU, ("float32",), {"numel": 1000})
    assert all(k[0] == "pointwise" for k in configs._MEMO)  # the interpret-table answers were dropped

"""Smoke test of benchmarks/host_proxy.py: the null tier runs the decode-shaped product cases (linear, int4_linear,
with and without out=) up to the no-op launcher and prints a row per case."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_null_tier_prints_the_product_rows():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    env.pop("NBX_TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "host_proxy.py"), "--only", "linear,int4",
                        "--calls", "20"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {ln.split()[0]: ln.split()[1:] for ln in p.stdout.splitlines() if ln[:1].isalpha()}
    for name in ("linear_1x4096->1024", "linear_bias_residual", "linear_out=", "int4_linear_1x4096->1024",
                 "int4_linear_out="):
        assert name in rows, p.stdout
        us, nbx_calls = float(rows[name][0]), int(rows[name][1])
        assert us > 0 and nbx_calls > 0, (name, rows[name])


def test_null_tier_prints_the_launch_rows_with_the_c_and_the_python_path():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    env.pop("NBX_TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "host_proxy.py"), "--only", "launch",
                        "--calls", "20"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "C fast path built" in p.stdout, p.stdout
    rows = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines() if ln.startswith("launch.")}
    for name in ("launch.launcher", "launch.launch_tail", "launch.cuda_launch"):
        c_us, py_us = float(rows[name][-3]), float(rows[name][-2])
        assert 0 < c_us and 0 < py_us, rows[name]
    assert float(rows["launch.fn_floor"][-1]) > 0, p.stdout

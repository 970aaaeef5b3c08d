"""benchmarks/bench_pdl.py and probe_pdl.py on a CPU machine: the A/B script runs its modes on the tiny model
on the CPU device (PDL is off there) and checks tokens and logits across them; the probe's chain kernel
compiles for sm_90 with the grid-dependency instructions where its switches ask for them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_pdl_smoke(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NBX_TRITON_INTERPRET"}   # the NumPy device: seconds
    env["PYTHONPATH"] = os.path.join(ROOT, "src")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_pdl.py"), "--smoke", "--rounds",
                        "1", "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "tokens and logits equal across modes" in r.stdout
    assert (tmp_path / "pdl.json").exists()


@pytest.mark.skipif(INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
def test_probe_pdl_kernel_compiles_for_sm90():
    import triton
    from triton.backends.compiler import GPUTarget
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import probe_pdl
    sig = {"X": "*fp32", "Y": "*fp32", "n": "i32", "BLOCK": "constexpr", "WAIT": "constexpr", "TRIGGER": "constexpr",
           "TRIGGER_FIRST": "constexpr"}
    for (wait, trig, first) in probe_pdl.MODES.values():
        cx = {"BLOCK": 1024, "WAIT": wait, "TRIGGER": trig, "TRIGGER_FIRST": first}
        c = triton.compile(triton.compiler.ASTSource(fn=probe_pdl._chain_kernel, signature=sig, constexprs=cx),
                           target=GPUTarget("cuda", 90, 32), options={"launch_pdl": wait})
        ptx = c.asm["ptx"]
        assert ("griddepcontrol.wait" in ptx) is wait and ("griddepcontrol.launch_dependents" in ptx) is trig

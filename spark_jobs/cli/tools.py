"""The tooling's commands of ``python -m spark_jobs``: ``bench``, ``trial`` and ``sample-data``.

Their code lives in the top-level ``tools`` package, which the product never imports (``.importlinter``;
``tests/test_layers.py``) and never ships to executors. These commands keep working: the command line loads the
tool's module by name only when one of them runs, and hands it the rest of the command line; every other command,
``run`` first, loads nothing of ``tools``. Each tool's ``main(argv, prog)`` parses its own arguments, so
``python -m spark_jobs bench --help`` lists them.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Mapping

# command -> (the tool's module, which has ``main(argv, prog) -> int``, and one line of help)
TOOL_COMMANDS: Mapping[str, tuple[str, str]] = {
    "sample-data": ("tools.sample_data", "write generated CloudTrail sample files"),
    "bench": ("tools.bench.benchmark", "benchmark the pipeline against bare Spark (JSON report)"),
    "trial": ("tools.bench.recovery", "trials: recovery after kill -9, a soak without restarts, kill -9 in queue mode, rollouts (their handover gap, kill -9 during them)"),
}


def add_parsers(commands) -> None:
    """List the tool commands in ``python -m spark_jobs --help`` (their arguments are the tool's to parse)."""
    for name, (_module, help_text) in TOOL_COMMANDS.items():
        parser = commands.add_parser(name, help=help_text, add_help=False)
        parser.add_argument("argv", nargs=argparse.REMAINDER, help=f"see python -m spark_jobs {name} --help")


def run_tool(name: str, argv: list[str]) -> int:
    """Run tool command ``name`` with the arguments that followed it."""
    module, _help = TOOL_COMMANDS[name]
    return importlib.import_module(module).main(list(argv), prog=f"python -m spark_jobs {name}") or 0

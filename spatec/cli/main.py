"""The `spatec` command: one sub-command per module in this folder.

Each command module exposes ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; this file only wires them together.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("check", "explain", "replay", "sql", "live", "serve", "feed", "datasets")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spatec", description="SpaTeC: spatio-temporal composite events "
                                     "over GPS positions, in batch on Spark and live.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"spatec.cli.{name}_cmd")
        except ModuleNotFoundError as e:
            if e.name != f"spatec.cli.{name}_cmd":
                raise
            continue
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from spatec.errors import ProgramError, SpatecError

    try:
        return int(args._run(args) or 0)
    except ProgramError as e:
        print(str(e), file=sys.stderr)
        n = len(e.diagnostics)
        print(f"{n} error{'s' if n != 1 else ''}", file=sys.stderr)
        return 1
    except SpatecError as e:
        print(f"spatec: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

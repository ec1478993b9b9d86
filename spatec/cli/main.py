"""The `spatec` command: one sub-command per module in this folder.

Each command module exposes ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; this file only wires them together.
"""
from __future__ import annotations

import argparse
import errno
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
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        from spatec.errors import ProgramError, SpatecError
    except KeyboardInterrupt:      # Ctrl-C while the commands' modules are imported: one line too
        print("spatec: interrupted", file=sys.stderr)
        return 130
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
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
        _quiet_exit()
        print("spatec: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        # (what a user's machine can cause: a full disk, a file made unreadable meanwhile)
        where = f"{e.filename}: " if e.filename else ""
        hint = "; free some space and run again (outputs already there are as they were)" \
            if e.errno == errno.ENOSPC else ""
        print(f"spatec: error: {where}{e.strerror or e}{hint}", file=sys.stderr)
        return 1


def _quiet_exit() -> None:
    """After Ctrl-C: nothing more from the threads of a Spark session being torn down."""
    import logging

    for name in ("py4j", "py4j.java_gateway", "py4j.clientserver", "pyspark"):
        logging.getLogger(name).disabled = True


if __name__ == "__main__":
    sys.exit(main())

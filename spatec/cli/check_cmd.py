"""`spatec check FILE...`: report every error of each program, or summarise it."""
from __future__ import annotations

import json
import sys

from spatec.errors import ProgramError, SpatecError

NAME = "check"
HELP = "check programs (with their includes) and report every error, without running anything"


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="a .spatec program")
    p.add_argument("--schema", action="store_true",
                   help="print {phrase: JSON Schema of its output records} as JSON on stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(path: str, program) -> str:
    """One line: what a checked program declares."""
    text = (f"{path}: ok: {_plural(len(program.phrases), 'phrase')}, "
            f"{_plural(len(program.events), 'event type')}, {_plural(len(program.places), 'place')}")
    sets = getattr(program, "place_sets", {})
    if sets:
        n = sum(len(s) for s in sets.values())
        text += f", {_plural(len(sets), 'place set')} ({n:,} place{'' if n == 1 else 's'})"
    return text


class _Out:
    """Plain text, or rich colour when the output is a terminal."""

    def __init__(self):
        self.rich = sys.stdout.isatty()
        if self.rich:
            from rich.console import Console

            self.out, self.err = Console(highlight=False), Console(stderr=True, highlight=False)

    def info(self, text: str, to_stderr: bool = False) -> None:
        if self.rich:
            (self.err if to_stderr else self.out).print(text, style="green", markup=False, soft_wrap=True)
        else:
            print(text, file=sys.stderr if to_stderr else sys.stdout)

    def error(self, text: str, style: str = "bold red") -> None:
        if self.rich:
            self.err.print(text, style=style, markup=False, soft_wrap=True)  # keep carets under their line
        else:
            print(text, file=sys.stderr)

    def diagnostic(self, d) -> None:
        if not self.rich:
            print(d.render(), file=sys.stderr)
            return
        head, *rest = d.render().split("\n")
        self.error(head)
        for line in rest:
            style = "red" if set(line.strip()) == {"^"} else "yellow" if line.lstrip().startswith("hint:") else ""
            self.error(line, style=style)


def run(args) -> int:
    from spatec.frontend.check import check_file
    from spatec.frontend.schema import json_schemas

    out = _Out()
    errors = 0
    schemas: dict = {}
    for path in args.files:
        try:
            program = check_file(path)
        except ProgramError as e:
            for d in e.diagnostics:
                out.diagnostic(d)
            errors += len(e.diagnostics)
            continue
        except SpatecError as e:     # the file cannot be read at all
            out.error(str(e))
            errors += 1
            continue
        if not args.quiet:
            # with --schema, stdout carries only the JSON
            out.info(summary(path, program), to_stderr=args.schema)
        if args.schema:
            for name, schema in json_schemas(program).items():
                if name in schemas:
                    out.error(f"{path}: phrase {name} is also in another file; its schema is the last one")
                schemas[name] = schema
    if errors:
        out.error(_plural(errors, "error"))
        return 1
    if args.schema:
        # the schemas are the machine-readable output: stdout, after nothing else
        sys.stdout.write(json.dumps(schemas, indent=2) + "\n")
    return 0

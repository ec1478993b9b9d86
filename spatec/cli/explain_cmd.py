"""`spatec explain`: show how a program's phrases are planned and detected."""
from __future__ import annotations

import sys

NAME = "explain"
HELP = "Show a phrase's operator tree, placements, partition key and automaton."


def add_arguments(p) -> None:
    p.add_argument("program")
    p.add_argument("--phrase", default=None)
    p.add_argument("--format", choices=("text", "json", "dot", "svg"), default="text",
                   help="svg: rendered by Graphviz's dot (on PATH)")


def run(args) -> int:
    from spatec.frontend.check import check_file
    from spatec.plan.explain import explain

    program = check_file(args.program)
    sys.stdout.write(explain(program, args.phrase, args.format))
    return 0

"""`spatec explain`: show how a program's phrases are planned and detected."""
from __future__ import annotations

import sys

NAME = "explain"
HELP = "Show a phrase's operator tree, placements, partition key, estimates and automaton."


def add_arguments(p) -> None:
    p.add_argument("program")
    p.add_argument("--phrase", default=None)
    p.add_argument("--format", choices=("text", "json", "dot", "svg"), default="text",
                   help="svg: rendered by Graphviz's dot (on PATH)")
    p.add_argument("--events", action="append", default=[], metavar="TYPE=PATH",
                   help="input events of a declared type (as for replay; repeatable): the planner's "
                        "estimates come from a sample of them; without, from the declared defaults")


def run(args) -> int:
    from spatec.frontend.check import check_file
    from spatec.plan.explain import explain

    program = check_file(args.program)
    frames = None
    if args.events:
        from spatec.cli.replay_cmd import parse_events
        from spatec.events.read import read_events

        frames = {}
        for type_name, path in parse_events(args.events, program):
            frames.setdefault(type_name, []).append(
                read_events(path, program.events[type_name], tz=program.timezone).events)
        import pandas as pd

        frames = {t: pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0] for t, fs in frames.items()}
    sys.stdout.write(explain(program, args.phrase, args.format, frames=frames))
    return 0

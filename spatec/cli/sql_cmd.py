"""`spatec sql`: SQL (DuckDB) over a replay's output folder, a table per phrase."""
from __future__ import annotations

import sys

NAME = "sql"
HELP = ("Query a replay's outputs with SQL (DuckDB): a table per phrase, times in the program's zone, "
        "the hull a geometry.")


def add_arguments(p) -> None:
    p.add_argument("out", metavar="OUT", help="the --out folder of a `spatec replay`")
    p.add_argument("query", metavar="QUERY", nargs="?", default=None,
                   help='e.g. "SELECT line, median(minutes) FROM HospitalToStation GROUP BY line"; '
                        "without it, the tables and their columns")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (for a terminal), csv or json (one object a line)")
    p.add_argument("--tz", default=None, metavar="ZONE",
                   help="the zone times are shown in (default: the program's); UTC or an IANA name")
    p.add_argument("--max-rows", type=int, default=40, help="rows a table shows (csv and json: all)")


def run(args) -> int:
    from spatec.sinks.sql import connect, run_query

    con, info = connect(args.out, tz=args.tz)
    for note in info.notes:
        print(f"spatec sql: note: {note}", file=sys.stderr)
    if args.query is None:
        for name in info.tables:
            cols = con.execute(f'DESCRIBE "{name}"').fetchall()
            print(f"{name}: " + ", ".join(f"{c[0]} {c[1]}" for c in cols))
        return 0
    rel = run_query(con, args.query, info)
    if rel is None:            # a statement with no result (SET, CREATE VIEW ...)
        return 0
    import duckdb

    from spatec.sinks.sql import SqlError

    try:
        _print(rel, args)
    except duckdb.Error as e:      # an error found while the rows are made (a cast that fails ...)
        raise SqlError(f"the query does not run: {str(e).strip()}") from None
    return 0


def _print(rel, args) -> None:
    if args.format == "table":
        rel.show(max_rows=args.max_rows, max_width=10_000)
    elif args.format == "csv":
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(rel.columns)
        for row in rel.fetchall():
            w.writerow(["" if v is None else v for v in row])
    else:
        import json

        cols = rel.columns
        for row in rel.fetchall():
            print(json.dumps(dict(zip(cols, row)), default=str, ensure_ascii=False))

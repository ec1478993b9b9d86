"""`spatec datasets`: the dataset registry, fetching, and synthetic traces."""
from __future__ import annotations

import sys

NAME = "datasets"
HELP = "List, locate, fetch and verify registered datasets; generate synthetic traces."


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="the registered datasets")
    s = sub.add_parser("path", help="where a dataset is on this machine (fetching it if needed)")
    s.add_argument("name")
    s.add_argument("--no-download", action="store_true")
    s = sub.add_parser("fetch", help="download a dataset into the cache and verify its checksum")
    s.add_argument("name")
    s.add_argument("--url", default=None, help="download from here instead of the registry's origin")
    s = sub.add_parser("synth", help="write a synthetic bus trace (columns as the Cambridge CSV)")
    s.add_argument("--vehicles", type=int, default=50)
    s.add_argument("--hours", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--bad-fraction", type=float, default=0.0)
    s.add_argument("--out", required=True, help="CSV (.csv or .csv.gz) to write")
    s = sub.add_parser("replicate", help="time-shifted copies of a trace (e.g. the hour → a bus-day)")
    s.add_argument("input")
    s.add_argument("--copies", type=int, default=24)
    s.add_argument("--shift", type=int, default=3600, help="seconds between copies")
    s.add_argument("--out", required=True)
    s = sub.add_parser("gtfs", help="write a GTFS static feed made from the Cambridge stops and hour "
                                    "(stops, and a route, trip and shape per line and direction)")
    s.add_argument("--out", required=True, help="the feed: a .zip, or a folder")
    s.add_argument("--stops", default=None, help="stops CSV (default: the registry's cambridge-stops)")
    s.add_argument("--trace", default=None, help="positions CSV (default: the registry's cambridge-sirivm-hour)")


def run(args) -> int:
    from spatec.datasets import registry as D

    if args.action == "list":
        for name, ds in sorted(D.registry().items()):
            desc = (ds.description or "").split(". ")[0]
            print(f"{name:34} {ds.file:36} {ds.licence or '':12} {desc[:70]}")
        return 0
    if args.action == "path":
        print(D.resolve(args.name, download=not args.no_download))
        return 0
    if args.action == "fetch":
        print(D.fetch(args.name, url=args.url))
        return 0
    if args.action == "gtfs":
        from spatec.datasets import gtfsfeed

        counts = gtfsfeed.build(args.stops or D.resolve("cambridge-stops"),
                                args.trace or D.resolve("cambridge-sirivm-hour"), args.out)
        print(f"{counts['stops']:,} stops, {counts['routes']} routes, {counts['trips']} trips and shapes "
              f"-> {args.out}", file=sys.stderr)
        return 0
    import pandas as pd

    from spatec.datasets import synth

    if args.action == "synth":
        df = synth.synthetic_trace(args.vehicles, args.hours * 3600, seed=args.seed,
                                   bad_fraction=args.bad_fraction)
    else:
        df = synth.replicate(pd.read_csv(args.input), args.copies, shift_s=args.shift)
    df.to_csv(args.out, index=False)
    print(f"{len(df):,} rows -> {args.out}", file=sys.stderr)
    return 0

"""Late records: a live runner writing the fixes behind its watermark to ``late/<TYPE>.jsonl``.

With a small lateness (``--lateness 0s``: about a tenth of the recorded hour's fixes arrive
behind the watermark) the detector of ``spatec serve`` spent a sixth of its time making each
late row a run-time event (projected, its hull built) and formatting its five times one call
each. :func:`spatec.runtime.keyed.late_texts` formats them a column at a time. This prints
both on the same rows, in this process, and asserts the texts are the same::

    .venv/bin/python bench/bench_late.py [--rows 20000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spatec.runtime.events import to_evs  # noqa: E402
from spatec.runtime.keyed import late_record, late_text, late_texts  # noqa: E402
from spatec.spatial.crs import Projector  # noqa: E402
from tests.automata.automata_support import CRS, compile_text, frames, row  # noqa: E402

PROGRAM = "phrase Silent per vehicle = Bus -> A ; not Bus -> X within 2 min emit last = A.t\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    args = ap.parse_args()
    c = compile_text(PROGRAM)
    proj = Projector(CRS)
    df = frames([row("Bus", f"V{i % 50}", i * 0.5, x=i) for i in range(args.rows)])["Bus"]
    df = df.assign(_file="feed.csv", _row=np.arange(len(df), dtype=np.int64))
    wm = 1_569_916_800_000_000
    started = time.perf_counter()
    evs = to_evs(df, c.program, proj)
    each = [late_text(late_record(e, wm, {"_file": f, "_row": int(r)}))
            for e, f, r in zip(evs, df["_file"].tolist(), df["_row"].tolist())]
    per_event = time.perf_counter() - started
    started = time.perf_counter()
    columns = late_texts(df, c.program, wm)
    by_column = time.perf_counter() - started
    assert each == columns
    print(f"{len(df):,} late rows: per event {per_event:.3f} s ({1e6 * per_event / len(df):.1f} us/row), "
          f"a column at a time {by_column:.3f} s ({1e6 * by_column / len(df):.1f} us/row): "
          f"{per_event / by_column:.1f}x")


if __name__ == "__main__":
    main()

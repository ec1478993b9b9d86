"""How long does `check_file` take on a 1,000-phrase program?

Generates a program of varied phrases (every operator, both absence forms,
patterns, where functions, units, per, emit), then times, in this process:

- the baseline: parsing alone (`parse_text`, the Lark LALR parser + AST);
- `check_file`: load, parse and check.

Each is the median of 5 runs after one warm-up. Run:

    .venv/bin/python bench/bench_check.py [--phrases N] [--profile]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spatec.frontend.check import check_file  # noqa: E402
from spatec.frontend.parse import parse_text  # noqa: E402

DECLARATIONS = (ROOT / "lang" / "corpus" / "common.spatec").read_text(encoding="utf-8")

# Phrase templates, like the examples; {i} keeps names unique.
TEMPLATES = [
    """phrase HospitalToStation{i} per vehicle =
      (BusGPS -> A and at hospital)
    ; not (BusGPS -> X and (at hospital or at station))
    ; (BusGPS -> B and at station)
  within 90 min
  emit vehicle = A.vehicle, line = A.line, minutes = duration(A, B) / 1 min""",
    """phrase Silent{i} per vehicle =
    BusGPS -> A ; not BusGPS -> X within 5 min
  emit vehicle = A.vehicle, last_seen = A.t""",
    """phrase Bunching{i} =
    (BusGPS -> A and not (at station or at centre or at hospital)) || BusGPS -> B
  where A.line == B.line and A.operator == B.operator and A.vehicle < B.vehicle
    and distance(A, B) < 100 m
  emit line = A.line, first = A.vehicle, second = B.vehicle""",
    """phrase Stuck{i} per vehicle =
    BusGPS -> A ;= BusGPS -> B ;= BusGPS -> C ;= BusGPS -> D
  where successive(A, B, C, D) and overlap(A, C) and overlap(A, D) and overlap(B, D)
  emit vehicle = A.vehicle, since = A.t, until = D.t""",
    """phrase Rainy{i} per vehicle =
      ( (BusGPS -> A and at hospital) ; not BusGPS -> X ; (BusGPS -> B and at station) )
    and Rain -> R1 and Rain -> R2
  where concurrent(A, R1) and overlap(A, R1) and R1.mm_h > 0
    and concurrent(B, R2) and overlap(B, R2) and duration(A, B) > 20 min
  within 2 h
  emit vehicle = A.vehicle, rain = R1.mm_h + R2.mm_h""",
    """phrase Moved{i} per vehicle =
    BusGPS -> A ;<> BusGPS -> B
  where successive(A, B) and speed(A, B) < 80 km/h and distance(A, B) < 1.5 km
  emit vehicle = A.vehicle, pace = speed(A, B), gap = duration(A, B)""",
    """phrase Together{i} =
    BusGPS -> A ||= BusGPS -> B ‖≠ BusGPS -> C
  where A.vehicle < B.vehicle and B.line == C.line""",
    """phrase Peak{i} =
    BusGPS -> A and certainly at centre and weekday and between 07:00 and 09:30
      and not (on 2026-12-25 or from 2026-12-31 to 2027-01-01)
  emit vehicle = A.vehicle""",
    """phrase Meet{i} =
    BusGPS -> A = BusGPS -> B or BusGPS -> A <> BusGPS -> B
  where A.line != B.line
  within 10 min""",
    """phrase Near{i} per vehicle =
    (BusGPS -> A and within 300 m of depot and in circle(0.1404, 52.1751, 200 m))
    ;= not BusGPS -> X ;= (BusGPS -> B and in polygon((0.12, 52.20), (0.13, 52.20), (0.13, 52.21)))
  within 1 h
  emit vehicle = A.vehicle, area = hull_area(A, B)""",
]


def program(n: int) -> str:
    phrases = [TEMPLATES[i % len(TEMPLATES)].format(i=i) for i in range(n)]
    return DECLARATIONS + "\n\n" + "\n\n".join(phrases) + "\n"


def median_time(fn, runs: int = 5) -> float:
    fn()  # warm-up: imports, the parser's tables
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phrases", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="profile one check with pyinstrument")
    args = ap.parse_args(argv)

    text = program(args.phrases)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.spatec"
        path.write_text(text, encoding="utf-8")
        if args.profile:
            from pyinstrument import Profiler

            with Profiler() as prof:
                check_file(path)
            prof.print()
        checked = check_file(path)
        assert len(checked.phrases) == args.phrases
        base = median_time(lambda: parse_text(text, str(path)))
        check = median_time(lambda: check_file(path))
    print(f"{args.phrases} phrases, {len(text.splitlines())} lines")
    print(f"check: {check:.2f} s  parse-only baseline: {base:.2f} s  ratio {check / base:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""SPEC §9's `at nearest` and §8's `as event` on the Cambridge hour, each against the phrase
it replaces, in the same process (the events read once, untimed):

- dwell: ``certainly at nearest stops -> S`` (one row per dwell) against ``certainly at
  stops -> S`` (one row per stop the dwell lies inside), the same runs (examples/dwell_at_stops);
- headway: calls ``as event source line, direction time arrived`` with ``successive(C1, C2)``
  (examples/headway) against calls without a source and an absence between them
  (``C1 ; not StationCall -> X ; C2`` with X of the same line and direction), the old example.

Each timing is the best of ``--repeat`` local replays (``replay_frames``); the ratio is
new / old. The rows are counted too: the point of the new phrases is fewer, right ones.

    .venv/bin/python bench/bench_nearest_as_event.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOUR = HERE.parent.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
DWELL = HERE.parent / "examples" / "dwell_at_stops" / "dwell_at_stops.spatec"
HEADWAY = HERE.parent / "examples" / "headway" / "headway.spatec"

OLD_HEADWAY = '''include "{bus}"

phrase StationCall per vehicle =
    run (BusGPS and at station) -> R gap 5 min
  emit vehicle = R.vehicle, line = R.line, direction = R.direction, arrived = R.first.t, left = R.last.t

phrase Headway =
    StationCall -> C1 ; not StationCall -> X ; StationCall -> C2
  where C1.line == C2.line and C1.direction == C2.direction and C1.vehicle != C2.vehicle
    and X.line == C1.line and X.direction == C1.direction
  within 2 h
  emit line = C1.line, minutes = (C2.arrived - C1.arrived) / 1 min
'''


def best(run, repeat: int) -> tuple[float, object]:
    times, got = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        got = run()
        times.append(time.perf_counter() - t0)
    return round(min(times), 3), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from spatec.events.read import read_events
    from spatec.plan.program import compile_program
    from spatec.runners.local import replay_frames

    new_dwell = compile_program(DWELL)
    old_dwell = compile_program(DWELL, DWELL.read_text().replace("certainly at nearest stops", "certainly at stops"))
    new_headway = compile_program(HEADWAY)
    old_headway = compile_program(HERE / "old_headway.spatec",
                                  OLD_HEADWAY.format(bus=HERE.parent / "examples" / "bus.spatec"))
    decl = new_dwell.program.events["BusGPS"]
    frames = {"BusGPS": read_events(HOUR, decl, tz=new_dwell.program.timezone).events}
    out = {"events": len(frames["BusGPS"]), "load_before": os.getloadavg()[0]}
    for name, old, new, phrase in (("dwell", old_dwell, new_dwell, "DwellAtStop"),
                                   ("headway", old_headway, new_headway, "Headway")):
        t_old, r_old = best(lambda c=old: replay_frames(c, frames), args.repeat)
        t_new, r_new = best(lambda c=new: replay_frames(c, frames), args.repeat)
        out[name] = {"old_s": t_old, "new_s": t_new, "ratio": round(t_new / t_old, 2),
                     "old_rows": r_old.counts[phrase], "new_rows": r_new.counts[phrase]}
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

"""A/B of Stuck's hull texts: this tree's ``fastpath.hulls_wkt`` against another tree's
(main's, by default), in one process, on the matches of Stuck over a bus-day.

    .venv/bin/python bench/bench_hulls.py [--old /work/main] [--rounds 5] [--scale 1]

The matches (their disc centres, one row each per variable) are captured once from a
replay of ``bench/three_phrases.spatec``'s Stuck over ``bench_replay.bus_day(scale)``
and cached (``~/.cache/spatec/bench/stuck_centres_x{scale}.npz``). The old tree's
``stamps``, ``wkt``, ``smallhull``, ``hullcol`` and ``fastpath`` are loaded from its files
(and ``wkb``) under other names; while the old code runs, ``spatec.spatial``'s attributes point at
them (``_hulls_wkt`` imports ``stamps`` inside the function). Rounds alternate old and
new; the best of each is kept; every form's output is checked equal, then the ratios
new/old are printed (below 1: the new code is faster).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: The modules the A/B swaps, in the order they are loaded (each sees the old ones before it).
SWAPPED = ("spatec.spatial.wkb", "spatec.spatial.hullcol", "spatec.spatial.smallhull", "spatec.spatial.wkt", "spatec.spatial.stamps",
           "spatec.vector.fastpath")


def capture(scale: int) -> Path:
    """Stuck's matches over the bus-day as disc centres: ``x, y`` of shape ``(k, n)``, ``r``."""
    from bench_replay import CACHE, bus_day

    path = CACHE / f"stuck_centres_x{scale}.npz"
    if path.exists():
        return path
    import tempfile

    from spatec.plan.program import compile_program
    from spatec.runners.serial import replay_streamed
    from spatec.vector import fastpath

    got = []
    real = fastpath.hulls_wkt

    def record(m, projector, chunk=4096, arrow=False):
        rows = [m.rows[v] for v in m.fp.vars]
        if len(m) and len(rows) == 4:
            every = np.concatenate(rows)
            x, y, _ = m.cols.centres(every)
            got.append((x.reshape(4, -1), y.reshape(4, -1), np.asarray(m.cols.r[every]).reshape(4, -1), projector.crs))
        return real(m, projector, chunk=chunk, arrow=arrow)

    fastpath.hulls_wkt = record
    try:
        with tempfile.TemporaryDirectory() as d:
            replay_streamed(compile_program(HERE / "three_phrases.spatec"), [("BusGPS", str(bus_day(scale)))],
                            Path(d), phrases=["Stuck"])
    finally:
        fastpath.hulls_wkt = real
    crs = {g[3] for g in got}
    assert len(crs) == 1, crs
    np.savez(path, x=np.concatenate([g[0] for g in got], axis=1), y=np.concatenate([g[1] for g in got], axis=1),
             r=np.concatenate([g[2] for g in got], axis=1), crs=np.array(crs.pop()))
    return path


def load_old(root: Path) -> dict:
    """The old tree's :data:`SWAPPED` modules, loaded under other names."""
    old: dict = {}
    saved = {name: sys.modules[name] for name in SWAPPED}
    try:
        for name in SWAPPED:
            file = root / (name.replace(".", "/") + ".py")
            spec = importlib.util.spec_from_file_location(name, file)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod       # (its imports of the modules before it: the old ones)
            spec.loader.exec_module(mod)
            old[name] = mod
    finally:
        sys.modules.update(saved)
    return old


@contextlib.contextmanager
def swapped(mods: dict):
    """``spatec.spatial.*`` and ``sys.modules`` pointing at ``mods`` meanwhile."""
    import spatec.spatial
    import spatec.vector

    saved = {name: sys.modules[name] for name in mods}
    try:
        for name, mod in mods.items():
            sys.modules[name] = mod
            pkg, attr = name.rsplit(".", 1)
            setattr(sys.modules[pkg], attr, mod)
        yield
    finally:
        for name, mod in saved.items():
            sys.modules[name] = mod
            pkg, attr = name.rsplit(".", 1)
            setattr(sys.modules[pkg], attr, mod)


@dataclass
class _Fp:
    vars: tuple


class _Cols:
    """What ``hulls_wkt`` reads of a match's columns: disc centres and radii."""

    def __init__(self, x, y, r):
        self.x, self.y, self.r = x, y, r

    def centres(self, rows):
        return self.x[rows], self.y[rows], np.ones(len(rows), dtype=bool)


def matches(fastpath, data):
    """The captured matches as ``fastpath.Matches`` (each variable its own rows)."""
    k, n = data["x"].shape
    cols = _Cols(data["x"].ravel(), data["y"].ravel(), data["r"].ravel())
    rows = {v: np.arange(i * n, (i + 1) * n) for i, v in enumerate("ABCD"[:k])}
    return fastpath.Matches(_Fp(tuple(rows)), cols, rows, np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))


def same(a, b) -> bool:
    if isinstance(a, list):
        return a == b
    import pyarrow as pa

    if pa.types.is_struct(a.type):     # (a hull column: its boxes NaN where no WKB, and NaN != NaN)
        return a.type == b.type and all(same(x, y) if not pa.types.is_floating(x.type) else
                                        np.array_equal(x.to_numpy(zero_copy_only=False),
                                                       y.to_numpy(zero_copy_only=False), equal_nan=True)
                                        for x, y in zip(a.flatten(), b.flatten()))
    return a.equals(b)


def stages(old: dict, data: dict, proj, rounds: int) -> None:
    """The A/B per stage of Stuck's hulls, 4096 matches at a time as ``hulls_wkt``: the
    grown hulls (``grown_point_hulls``), their text (``polygon_wkts``, ``arrow=True``) and
    their WKB (``arrow="wkb"``), old and new on the same lon/lat (PROJ's, for the timing).
    The unprojection between (``stamps._unproject_grown``) is not timed apart: its
    arithmetic is unchanged, only the coordinates it no longer needs are not made."""
    from spatec.spatial import stamps as S
    from spatec.spatial import wkt as W

    OS, OW = old["spatec.spatial.stamps"], old["spatec.spatial.wkt"]
    xy = np.stack([data["x"], data["y"]], axis=-1)
    ring = S.wkt_ring(float(data["r"].flat[0]))
    chunks = [np.ascontiguousarray(xy[:, a:a + 4096]) for a in range(0, xy.shape[1], 4096)]
    lonlat = []
    for c in chunks:
        coords, offsets, _ = S.grown_point_hulls(c, ring)
        lonlat.append((np.column_stack(proj.inverse(coords[:, 0], coords[:, 1])), offsets))     # (near enough)
    table = {
        "grown hulls": (lambda: [OS.grown_point_hulls(c, ring) for c in chunks],
                        lambda: [S.grown_point_hulls(c, ring, coords=False) for c in chunks]),
        "text (arrow)": (lambda: [OW.polygon_wkts(ll, o, arrow=True) for ll, o in lonlat],
                         lambda: [W.polygon_wkts(ll, o, arrow=True) for ll, o in lonlat]),
        "wkb": (lambda: [OW.polygon_wkts(ll, o, arrow="wkb") for ll, o in lonlat],
                lambda: [W.polygon_wkts(ll, o, arrow="wkb") for ll, o in lonlat]),
    }
    for name, (f_old, f_new) in table.items():
        best = [float("inf")] * 2
        for _ in range(rounds):
            for i, f in enumerate((f_old, f_new)):
                t = time.process_time()
                f()
                best[i] = min(best[i], time.process_time() - t)
        print(f"stage {name:13s}: old {best[0]:.3f} s, new {best[1]:.3f} s CPU (best of {rounds}), "
              f"new/old {best[1] / best[0]:.3f}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="/work/main", help="the tree to compare against (default /work/main)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="only the first N matches (0: all)")
    ap.add_argument("--forms", default="arrow,wkb", help="of list, arrow, wkb")
    ap.add_argument("--stages", action="store_true", help="also each stage apart (grown hulls, text, WKB)")
    a = ap.parse_args(argv)

    from spatec.spatial.crs import Projector
    from spatec.vector import fastpath as new_fp

    data = dict(np.load(capture(a.scale)))
    if a.limit:
        data = {**data, **{c: data[c][:, :a.limit] for c in "xyr"}}
    proj = Projector(str(data["crs"]))
    old = load_old(Path(a.old))
    m = matches(new_fp, data)
    forms = {"list": False, "arrow": True, "wkb": "wkb"}
    print(f"{m.__len__()} matches of {data['x'].shape[0]} discs (r = {sorted(set(data['r'].ravel().tolist()))[:5]}); "
          f"load {os.getloadavg()[0]:.2f} (uptime)")
    for form in a.forms.split(","):
        arrow = forms[form]
        best = {"old": float("inf"), "new": float("inf")}
        outs = {}
        for _ in range(a.rounds):
            for side in ("old", "new"):
                ctx = swapped(old) if side == "old" else contextlib.nullcontext()
                with ctx:
                    fp = sys.modules["spatec.vector.fastpath"]
                    t = time.process_time()
                    outs[side] = fp.hulls_wkt(m, proj, arrow=arrow)
                    best[side] = min(best[side], time.process_time() - t)
        ok = same(outs["old"], outs["new"])
        print(f"{form:5s}: old {best['old']:.3f} s, new {best['new']:.3f} s CPU (best of {a.rounds}), "
              f"new/old {best['new'] / best['old']:.3f}; outputs equal: {ok}")
        if not ok:
            sys.exit(f"{form}: outputs differ")
    if a.stages:
        stages(old, data, proj, a.rounds)


if __name__ == "__main__":
    main()

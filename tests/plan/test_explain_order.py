"""`spatec explain` shows the planner's estimates and the join access it chose (SPEC §10):
from the declared defaults without input (and says so), from a sample of the input with
``--events``; in text and JSON."""
from __future__ import annotations

import json
from pathlib import Path

from spatec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "bench" / "two_stuck.spatec"


def _csv(path: Path) -> Path:
    """Three buses, 40 fixes each, 20 s apart, two of them 30 m apart."""
    lines = ["vehicle,operator,line,direction,ts,lon,lat"]
    for i in range(40):
        for v, dx in (("V1", 0.0), ("V2", 0.0004), ("V3", 0.05)):
            lines.append(f"{v},WP,1,INBOUND,{1569916800 + 20 * i + int(v[1])},{0.12 + dx:.6f},{52.2 + 0.00001 * i:.6f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_explain_without_input_uses_the_defaults_and_says_so(capsys):
    assert main(["explain", str(PROGRAM), "--format", "json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    ph = d["physical"]
    assert ph["estimates"]["from"] == "defaults" and "no input given" in ph["estimates"]["about"]
    joins = {j["join"]: j for j in ph["joins"]}
    assert [j["access"] for j in ph["joins"]].count("source") == 6
    assert joins[1]["access"] == "near" and "80 m grid cell of A/E" in joins[1]["how"]
    conds = {c["where"]: c["selectivity"] for c in joins[1]["conditions"]}
    assert set(conds) == {"A.vehicle < E.vehicle", "distance(A, E) < 50 m"}
    assert 0 < conds["distance(A, E) < 50 m"] < conds["A.vehicle < E.vehicle"] < 1
    assert set(ph["estimates"]["rate_per_s"]) == {str(i) for i in range(1, 16)}
    assert main(["explain", str(PROGRAM)]) == 0
    text = capsys.readouterr().out
    assert "estimates from declared defaults (no input given)" in text
    assert "join [4]: by source of A/B (successive(A, B))" in text
    assert "join [1]: by 80 m grid cell of A/E (distance(A, E) < 50 m)" in text


def test_explain_with_input_estimates_from_a_sample(tmp_path, capsys):
    csv = _csv(tmp_path / "fixes.csv")
    assert main(["explain", str(PROGRAM), "--format", "json", "--events", f"BusGPS={csv}"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    est = d["physical"]["estimates"]
    assert est["from"] == "sample" and est["about"].startswith("a sample of 120 rows")
    (t,) = est["types"]
    assert t["type"] == "BusGPS" and t["sources"] == 3
    assert 0.1 < t["rate_per_s"] < 0.2          # 120 fixes over ~780 s
    assert main(["explain", str(PROGRAM), "--events", f"BusGPS={csv}"]) == 0
    text = capsys.readouterr().out
    assert "estimates from a sample of 120 rows of the input" in text and "BusGPS: 0.15" in text

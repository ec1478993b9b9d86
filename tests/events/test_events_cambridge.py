"""The real Cambridge hour: the CSV export and the raw SIRI-VM polls it was made from."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from events_cases import BUS, CAMBRIDGE_CSV, CAMBRIDGE_POLLS, attrs

from spatec.events.read import read_events

pytestmark = pytest.mark.skipif(not CAMBRIDGE_CSV.exists(), reason="Cambridge data not available")

LONDON = "Europe/London"
# Every CSV column the feed also carries (recorded_at is the text of RecordedAtTime, read as ts).
FULL = dataclasses.replace(BUS, name="Bus", attrs=attrs(
    vehicle="str", operator="str", line="str", direction="str", origin_ref="str", origin_name="str",
    destination_ref="str", destination_name="str", ts="time", lon="float", lat="float", bearing="float",
    delay="str", journey_ref="str", received="time"))


@pytest.fixture(scope="module")
def csv_bus():
    return read_events(CAMBRIDGE_CSV, BUS, tz=LONDON)


@pytest.fixture(scope="module")
def csv_full():
    return read_events(CAMBRIDGE_CSV, FULL, tz=LONDON)


@pytest.fixture(scope="module")
def polls_full():
    return read_events(CAMBRIDGE_POLLS, FULL, tz=LONDON)


def test_csv_every_row_read_none_lost(csv_bus):
    assert (csv_bus.read, csv_bus.used, csv_bus.rejected) == (60390, 60390, 0)
    ev = csv_bus.events
    assert ev["_row"].tolist() == list(range(1, 60391))
    assert ev["_id"].is_unique and ev["_source"].nunique() == 411


def test_csv_known_events(csv_bus):
    ev = csv_bus.events.set_index("_row")
    first, middle, last = ev.loc[1], ev.loc[30000], ev.loc[60390]
    assert first["_id"] == "BusGPS:WP-101:2019-10-01T07:59:38Z"
    assert (first["_lo"], first["_hi"], first["_t"]) == (1569916748_000000, 1569916778_000000, 1569916778_000000)
    assert (first["_lon"], first["_lat"], first["line"], first["operator"]) == (-0.1845219, 52.3288345, "401", "WP")
    assert middle["_id"] == "BusGPS:SCNH-11130:2019-10-01T08:29:47Z" and middle["line"] == "X4"
    assert last["_id"] == "BusGPS:SCCM-15659:2019-10-01T08:59:55Z"
    assert (last["_hi"] - last["_lo"]) == 30_000_000 and last["_r"] == 15.0
    assert (ev["_source"] == "SCCM-37438").sum() == 252


def test_polls_duplicates_counted(polls_full):
    r = polls_full
    assert (r.read, r.used, r.rejected, r.duplicates) == (60607, 60390, 217, 217)
    assert r.rejects["reason"].str.startswith("duplicate of Bus:").all()


def test_polls_and_csv_are_the_same_events(csv_full, polls_full):
    """The CSV export holds the first copy of each record in the polls, field for field,
    including when it was received (the poll's file name)."""
    key = ["_id"]
    a = csv_full.events.drop(columns=["_file", "_row"]).sort_values(key).reset_index(drop=True)
    b = polls_full.events.drop(columns=["_file", "_row"]).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_polls_repeat_some_fixes_with_other_content(polls_full):
    """Three (vehicle, ts) pairs come twice with a different position or delay; identity is
    (type, source, t), so the later ones are still duplicates (SPEC §4), first copy kept."""
    dup = polls_full.rejects
    recs = pd.DataFrame([json.loads(r) for r in dup["record"]])
    ev = polls_full.events.set_index("_id")
    kept = ev.loc[dup["reason"].str.removeprefix("duplicate of ")]
    differs = (recs["Longitude"].astype(float).to_numpy() != kept["lon"].to_numpy()) | \
              (recs["Delay"].to_numpy() != kept["delay"].to_numpy())
    assert sorted(set(recs.loc[differs, "VehicleRef"])) == ["ATS-3619", "SCCM-21235", "UNIB-59"]

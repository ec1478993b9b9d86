"""`spatec datasets`: list, path, synth, replicate."""
from pathlib import Path

import pandas as pd

from spatec.cli.main import main

SHARED = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "cambridge"


def test_list_names_every_dataset(capsys):
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    assert "cambridge-sirivm-hour" in out and "cubg-rain-daily" in out


def test_path_finds_the_shared_copy(capsys):
    assert main(["datasets", "path", "cambridge-sirivm-hour", "--no-download"]) == 0
    assert Path(capsys.readouterr().out.strip()).samefile(SHARED / "sirivm_2019-10-01_0854-1000.csv.gz")


def test_unknown_dataset_is_a_clear_error(capsys):
    assert main(["datasets", "path", "cambridge-sirivm-hours", "--no-download"]) == 1
    assert "did you mean cambridge-sirivm-hour" in capsys.readouterr().err


def test_synth_and_replicate(tmp_path):
    out = tmp_path / "syn.csv"
    assert main(["datasets", "synth", "--vehicles", "3", "--hours", "0.25", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert df["vehicle"].nunique() == 3 and len(df) > 50
    rep = tmp_path / "rep.csv"
    assert main(["datasets", "replicate", str(out), "--copies", "3", "--shift", "900", "--out", str(rep)]) == 0
    r = pd.read_csv(rep)
    assert len(r) > 2 * len(df) and r["ts"].max() - r["ts"].min() > 1800

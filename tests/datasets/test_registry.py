"""The dataset registry: every entry complete, checksums those of the shared files."""
import re
import shutil

import pytest

from spatec.datasets import registry as datasets
from spatec.errors import DataError

REQUIRED = ("file", "format", "sha256", "origin", "homepage", "licence", "description")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    monkeypatch.delenv(datasets.MIRROR_ENV, raising=False)
    monkeypatch.delenv(datasets.REGISTRY_ENV, raising=False)
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))


def shared_or_skip(name):
    try:
        return datasets.resolve(name, download=False, check=False)
    except DataError:
        pytest.skip(f"{name} is not available locally")


def test_registry_has_the_cambridge_datasets():
    reg = datasets.registry()
    for name in ("cambridge-sirivm-hour", "cambridge-sirivm-polls", "cambridge-stops",
                 "cambridge-zones", "cubg-rain-daily"):
        assert name in reg


@pytest.mark.parametrize("name", sorted(datasets.registry()))
def test_entry_is_complete(name):
    ds = datasets.entry(name)
    for field in REQUIRED:
        assert getattr(ds, field), f"{name} lacks {field}"
    assert re.fullmatch(r"[0-9a-f]{64}", ds.sha256)
    assert ds.size and ds.size > 0
    assert ds.url == "" or ds.url.startswith(("http://", "https://"))


@pytest.mark.parametrize("name", sorted(datasets.registry()))
def test_checksum_and_size_match_the_shared_file(name):
    path = shared_or_skip(name)
    ds = datasets.entry(name)
    assert path.stat().st_size == ds.size
    assert datasets.sha256_of(path) == ds.sha256


def test_row_counts_of_tables():
    for name in ("cambridge-sirivm-hour", "cambridge-stops", "cubg-rain-daily"):
        shared_or_skip(name)
        assert len(datasets.load(name)) == datasets.entry(name).rows


def test_unknown_name_suggests_close_ones():
    with pytest.raises(DataError, match="did you mean cambridge-stops"):
        datasets.entry("cambridge-stop")


def test_spatec_data_dir_is_searched_first(monkeypatch, tmp_path):
    src = shared_or_skip("cambridge-stops")
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(src, mine / src.name)
    monkeypatch.setenv(datasets.DATA_ENV, str(mine))
    assert datasets.resolve("cambridge-stops") == mine / src.name


def test_a_tampered_copy_is_refused(monkeypatch, tmp_path):
    src = shared_or_skip("cambridge-stops")
    bad = tmp_path / "bad"
    bad.mkdir()
    text = src.read_bytes().replace(b"Drummer St", b"Xrummer St", 1)
    (bad / src.name).write_bytes(text)
    monkeypatch.setenv(datasets.DATA_ENV, str(bad))
    with pytest.raises(datasets.ChecksumError, match="sha256 mismatch"):
        datasets.resolve("cambridge-stops")
    assert (bad / src.name).exists(), "a file that is not ours is never removed"


def test_not_found_without_download_lists_where_it_looked(monkeypatch, tmp_path):
    reg = tmp_path / "registry.toml"
    reg.write_text('[datasets.ghost]\nfile = "ghost.csv"\nformat = "csv"\nsha256 = "' + "0" * 64 + '"\n')
    monkeypatch.setenv(datasets.REGISTRY_ENV, str(reg))
    with pytest.raises(DataError, match="not found; looked in"):
        datasets.resolve("ghost", download=False)
    with pytest.raises(DataError, match="no download URL"):
        datasets.resolve("ghost")


def test_archives_are_read_member_by_member():
    shared_or_skip("cambridge-sirivm-polls")
    name, data = next(datasets.members("cambridge-sirivm-polls", suffix=".json"))
    assert name.startswith("01/") and data.startswith(b"{")
    with pytest.raises(DataError, match="archive"):
        datasets.load("cambridge-sirivm-polls")

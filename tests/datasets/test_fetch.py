"""fetch(): streaming download into the cache, sha256 verified; served from 127.0.0.1."""
import functools
import hashlib
import http.server
import threading

import pytest

from spatec.datasets import registry as datasets
from spatec.errors import DataError

BODY = b"stop_id,name,lat,lon\nX1,Somewhere,52.2,0.12\n" * 5000  # ~220 kB: several chunks


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "tiny.csv").write_bytes(BODY)
    (root / "corrupt.csv").write_bytes(BODY[:-1] + b"!")
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def registry(tmp_path, monkeypatch, server):
    """A registry with one small dataset whose url points at the local server."""
    sha = hashlib.sha256(BODY).hexdigest()
    reg = tmp_path / "registry.toml"
    reg.write_text(
        "[datasets.tiny]\n"
        'file = "tiny.csv"\nformat = "csv"\n'
        f'sha256 = "{sha}"\nsize = {len(BODY)}\n'
        f'url = "{server}/tiny.csv"\n'
        "[datasets.nourl]\n"
        'file = "tiny.csv"\nformat = "csv"\n'
        f'sha256 = "{sha}"\n')
    monkeypatch.setenv(datasets.REGISTRY_ENV, str(reg))
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    monkeypatch.delenv(datasets.MIRROR_ENV, raising=False)
    return tmp_path / "cache"


def test_fetch_downloads_into_the_cache_and_reports_progress(registry):
    seen = []
    path = datasets.fetch("tiny", progress=lambda done, total: seen.append((done, total)))
    assert path == registry / "tiny.csv"
    assert path.read_bytes() == BODY
    assert seen[0] == (0, len(BODY)) and seen[-1] == (len(BODY), len(BODY))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert list(registry.iterdir()) == [path], "no temporary file is left behind"


def test_checksum_mismatch_removes_the_download(registry, server):
    with pytest.raises(datasets.ChecksumError) as err:
        datasets.fetch("tiny", url=f"{server}/corrupt.csv")
    assert "sha256 mismatch" in str(err.value) and "removed" in str(err.value)
    assert err.value.expected == hashlib.sha256(BODY).hexdigest()
    assert not any(registry.iterdir())


def test_a_failed_download_keeps_an_earlier_good_copy(registry, server):
    good = datasets.fetch("tiny")
    with pytest.raises(datasets.ChecksumError):
        datasets.fetch("tiny", url=f"{server}/corrupt.csv")
    assert good.read_bytes() == BODY


def test_missing_file_on_the_server_is_a_data_error(registry, server):
    with pytest.raises(DataError, match="cannot download"):
        datasets.fetch("tiny", url=f"{server}/absent.csv")
    assert not any(registry.iterdir())


def test_mirror_variable_supplies_the_url(registry, server, monkeypatch):
    with pytest.raises(DataError, match="no download URL"):
        datasets.fetch("nourl")
    monkeypatch.setenv(datasets.MIRROR_ENV, server + "/")
    assert datasets.fetch("nourl").read_bytes() == BODY


def test_resolve_fetches_once_then_uses_the_cache(registry, server, monkeypatch):
    first = datasets.resolve("tiny")
    assert first == registry / "tiny.csv"
    # The cached copy is found without the network: point the url nowhere.
    monkeypatch.setenv(datasets.MIRROR_ENV, "http://127.0.0.1:9/none")
    assert datasets.resolve("tiny") == first


def test_resolve_replaces_a_corrupt_cached_copy(registry, server):
    registry.mkdir(parents=True)
    (registry / "tiny.csv").write_bytes(b"garbage")
    assert datasets.resolve("tiny").read_bytes() == BODY


def test_dest_dir(registry, tmp_path):
    out = datasets.fetch("tiny", dest_dir=tmp_path / "elsewhere")
    assert out == tmp_path / "elsewhere" / "tiny.csv"

"""Whole files or nothing; names safe for files."""
from __future__ import annotations

import pytest

from spatec.storage.atomic import (
    atomic_bytes,
    atomic_write,
    safe_name,
    temporary_name,
    write_synced,
)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "out" / "f.txt"
    atomic_bytes(p, b"old")

    def fail(tmp):
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(p, fail)
    assert p.read_bytes() == b"old" and not temporary_name(p).exists()


def test_append_at_cuts_what_a_crash_left(tmp_path):
    p = tmp_path / "log"
    n = write_synced(p, b"abc", "wb")
    p.write_bytes(b"abcGARBAGE")
    n += write_synced(p, b"de", "ab", at=n)
    assert p.read_bytes() == b"abcde" and n == 5


def test_safe_name():
    assert safe_name("sirivm+http://127.0.0.1:8080/x") == "sirivm_http___127.0.0.1_8080_x"
    assert len(safe_name("x" * 500)) == 120


def test_a_folder_removed_soon_is_gone_from_its_name_at_once_and_then_entirely(tmp_path):
    import threading

    from spatec.storage.atomic import remove_soon

    d = tmp_path / "exchange"
    (d / "sub").mkdir(parents=True)
    for i in range(50):
        (d / "sub" / f"f{i}").write_bytes(b"x" * 1000)
    remove_soon(d)
    assert not d.exists()                       # its name free at once
    for t in threading.enumerate():
        if t.name == "spatec-remove":
            t.join()
    assert list(tmp_path.iterdir()) == []       # and then nothing left aside
    remove_soon(tmp_path / "missing")           # (a folder already gone: nothing to do, no error)

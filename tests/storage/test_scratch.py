"""Scratch files in a memory twin of the staging folder while the machine has room (spatec.storage.scratch)."""
import errno
import os
from pathlib import Path

import pytest

from spatec.storage import scratch

GIB = 1 << 30


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A staging folder paired with a stand-in memory file system, 16 GiB of memory, 12 available."""
    root, mem = tmp_path / "stage" / "run", tmp_path / "shm"
    mem.mkdir()
    scratch.pair(str(root), str(mem))
    memory = {"MemTotal": 16 * GIB, "MemAvailable": 12 * GIB}
    monkeypatch.setattr(scratch, "_meminfo", lambda: dict(memory))
    twin = (root / scratch.MARK).read_text()
    return root, mem, twin, memory


def test_files_go_to_the_twin_under_the_same_names(folders):
    root, mem, twin, _ = folders
    assert os.path.dirname(twin) == str(mem)
    assert scratch.place(str(root / "raw-0.arrow"), 1 << 20) == os.path.join(twin, "raw-0.arrow")
    # a subfolder's file (a task's part) too, its folder made in the twin
    got = scratch.place(str(root / "rows-Stuck" / "g3.jsonl"), 1 << 20)
    assert got == os.path.join(twin, "rows-Stuck", "g3.jsonl") and os.path.isdir(os.path.dirname(got))


def test_memory_the_processes_need_is_kept(folders):
    root, _, twin, memory = folders
    # the reserve is a quarter of the memory (4 GiB of 16): 12 GiB available leaves room for 8
    assert scratch.reserve(16 * GIB) == 4 * GIB
    assert scratch.place(str(root / "a"), 7 * GIB).startswith(twin)
    assert scratch.place(str(root / "a"), 9 * GIB) == str(root / "a")
    memory["MemAvailable"] = 4 * GIB + 100
    assert scratch.place(str(root / "a"), 200) == str(root / "a")
    assert scratch.place(str(root / "a"), 50).startswith(twin)
    memory.pop("MemAvailable")          # unknown: on disk
    assert scratch.place(str(root / "a"), 1) == str(root / "a")


def test_a_full_twin_is_not_written(folders, monkeypatch):
    root, _, twin, _ = folders
    free = {"bavail": 10 * GIB}

    class Stat:
        f_frsize = 4096
        f_blocks = 20 * GIB // 4096

        @property
        def f_bavail(self):
            return free["bavail"] // 4096

    monkeypatch.setattr(scratch.os, "statvfs", lambda p: Stat())
    assert scratch.place(str(root / "a"), 5 * GIB).startswith(twin)
    free["bavail"] = 5 * GIB + (1 << 29)        # less than 1 GiB would be left
    assert scratch.place(str(root / "a"), 5 * GIB) == str(root / "a")


def test_a_write_the_twin_refuses_is_made_on_disk(folders):
    root, _, twin, _ = folders
    tried = []

    def write(p):
        tried.append(p)
        with open(p, "wb") as f:
            f.write(b"partial")
        if p.startswith(twin):
            raise OSError(errno.ENOSPC, "No space left on device")
        return len(tried)

    value, where = scratch.written(str(root / "g1.jsonl"), 10, write)
    assert (value, where) == (2, str(root / "g1.jsonl"))
    assert tried[0].startswith(twin) and not os.path.exists(tried[0])      # what it wrote is gone
    # any other error is the caller's
    with pytest.raises(OSError) as e:
        scratch.written(str(root / "g2.jsonl"), 10, lambda p: (_ for _ in ()).throw(OSError(errno.EIO, "io")))
    assert e.value.errno == errno.EIO


def test_top_files_and_remove_cover_both_folders(folders):
    root, _, twin, _ = folders
    a = scratch.written(str(root / "raw-0.arrow"), 1, lambda p: open(p, "wb").close())[1]
    (root / "c0-keys.npz").write_bytes(b"k")
    part = scratch.place(str(root / "rows-X" / "g0.jsonl"), 1)
    open(part, "wb").close()
    assert sorted(scratch.top_files(str(root))) == sorted([a, str(root / "c0-keys.npz")])
    scratch.remove(str(root))
    assert not os.path.exists(root) and not os.path.exists(twin)


def test_without_a_twin_every_file_is_on_disk(tmp_path):
    root = tmp_path / "run"
    scratch.pair(str(root), None)
    assert root.is_dir() and not (root / scratch.MARK).exists()
    assert scratch.place(str(root / "a"), 1) == str(root / "a")


def test_memory_dir_is_a_tmpfs_mount(tmp_path):
    assert scratch.memory_dir(str(tmp_path)) is None          # a folder on the disk
    mounts = Path("/proc/mounts").read_text().splitlines() if os.path.exists("/proc/mounts") else []
    if any(len(f) > 2 and f[1] == "/dev/shm" and f[2] == "tmpfs" for f in (m.split() for m in mounts)):
        assert scratch.memory_dir("/dev/shm") == "/dev/shm"


def test_a_control_groups_limit_counts(folders, monkeypatch):
    """In a container the machine's memory is not the process's: its group's limit bounds both."""
    root, _, twin, _ = folders
    monkeypatch.setattr(scratch, "_cgroup_memory", lambda: (8 * GIB, 5 * GIB))
    # 3 GiB left in the group, 2 GiB of it kept (a quarter of 8 is less than 2 GiB)
    assert scratch.place(str(root / "a"), GIB - 100).startswith(twin)
    assert scratch.place(str(root / "a"), GIB + 100) == str(root / "a")


def test_the_control_group_is_read(tmp_path, monkeypatch):
    """cgroup v1's files under its memory controller's path (v2: memory.max, memory.current)."""
    base = tmp_path / "memory" / "job"
    base.mkdir(parents=True)
    (base / "memory.limit_in_bytes").write_text("1073741824\n")
    (base / "memory.usage_in_bytes").write_text("1000\n")
    real_open, real_exists = open, os.path.exists

    def fake_open(p, *a, **k):
        p = str(p)
        if p == "/proc/self/cgroup":
            p = str(tmp_path / "cgroup")
        elif p.startswith("/sys/fs/cgroup/"):
            p = str(tmp_path) + p[len("/sys/fs/cgroup"):]
        return real_open(p, *a, **k)

    (tmp_path / "cgroup").write_text("9:cpu:/\n4:memory:/job\n")
    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(scratch.os.path, "exists", lambda p: real_exists(str(tmp_path) + p[len("/sys/fs/cgroup"):]
                                                                          if p.startswith("/sys/fs/cgroup/") else p))
    scratch._cgroup_files.cache_clear()
    assert scratch._cgroup_memory() == (1 << 30, 1000)
    (base / "memory.limit_in_bytes").write_text("9223372036854771712\n")       # no limit
    assert scratch._cgroup_memory() is None
    scratch._cgroup_files.cache_clear()


def test_a_killed_runs_twin_is_removed_by_the_next(tmp_path):
    """A twin whose process has ended is removed when the next twin is made; a live
    process's twin and other files are left alone."""
    import subprocess
    import sys

    mem = tmp_path / "shm"
    mem.mkdir()
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = mem / f"{scratch.PREFIX}{int(done.stdout)}-abc"
    (dead / "rows-X").mkdir(parents=True)
    (dead / "rows-X" / "g0.jsonl").write_bytes(b"x")
    alive = mem / f"{scratch.PREFIX}{os.getpid()}-def"
    alive.mkdir()
    other = mem / "someone-else"
    other.mkdir()
    scratch.pair(str(tmp_path / "run"), str(mem))
    left = sorted(p.name for p in mem.iterdir())
    assert dead.name not in left and alive.name in left and other.name in left
    assert len(left) == 3           # and the new twin

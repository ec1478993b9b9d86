"""Scratch files in a memory twin of the exchange's folder while the machine has room (spatec.storage.scratch)."""
import errno
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from spatec.exec.tasks import Files, unipc
from spatec.storage import scratch

GIB = 1 << 30


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """An exchange folder with a twin in a stand-in memory file system, 16 GiB of memory, 12 available."""
    root, mem = tmp_path / "exchange", tmp_path / "shm"
    root.mkdir()
    mem.mkdir()
    twin = scratch.twin_folder(str(mem))
    memory = {"MemTotal": 16 * GIB, "MemAvailable": 12 * GIB}
    monkeypatch.setattr(scratch, "_meminfo", lambda: dict(memory))
    monkeypatch.setattr(scratch, "_cgroup_memory", lambda: None)
    return root, mem, twin, memory


def _where(root, twin, size, write=lambda p: open(p, "wb").close()):
    return scratch.written(str(root / "a"), os.path.join(twin, "a"), size, write)[1]


def test_memory_the_processes_need_is_kept(folders):
    root, _, twin, memory = folders
    # the reserve is a quarter of the memory (4 GiB of 16): 12 GiB available leaves room for 8
    assert scratch.reserve(16 * GIB) == 4 * GIB
    assert _where(root, twin, 7 * GIB).startswith(twin)
    assert _where(root, twin, 9 * GIB) == str(root / "a")
    memory["MemAvailable"] = 4 * GIB + 100
    assert _where(root, twin, 200) == str(root / "a")
    assert _where(root, twin, 50).startswith(twin)
    memory.pop("MemAvailable")          # unknown: on disk
    assert _where(root, twin, 1) == str(root / "a")


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
    assert _where(root, twin, 5 * GIB).startswith(twin)
    free["bavail"] = 5 * GIB + (1 << 29)        # less than 1 GiB would be left
    assert _where(root, twin, 5 * GIB) == str(root / "a")


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

    value, where = scratch.written(str(root / "g1"), os.path.join(twin, "g1"), 10, write)
    assert (value, where) == (2, str(root / "g1"))
    assert tried[0].startswith(twin) and not os.path.exists(tried[0])      # what it wrote is gone
    # any other error is the caller's
    with pytest.raises(OSError) as e:
        scratch.written(str(root / "g2"), os.path.join(twin, "g2"), 10,
                        lambda p: (_ for _ in ()).throw(OSError(errno.EIO, "io")))
    assert e.value.errno == errno.EIO


def test_the_exchange_files_go_to_memory_while_there_is_room_and_read_back_alike(folders):
    root, _, twin, memory = folders
    store = Files(str(root), twin)
    table = pa.table({"x": list(range(1000)), "s": [f"v{i}" for i in range(1000)]})
    in_memory = store.table(table)
    blob = store.put(b"\x01" * 100)
    memory["MemAvailable"] = 4 * GIB            # nothing to spare: on disk
    on_disk = store.table(table)
    names = [v[len(b"\x00spatec-file\x00"):].decode() for v in (in_memory, blob, on_disk)]
    assert names[0].startswith(twin) and names[1].startswith(twin) and names[2].startswith(str(root))
    assert unipc(in_memory).equals(table) and unipc(on_disk).equals(table)
    assert Path(names[1]).read_bytes() == b"\x01" * 100
    # without a twin every file is on disk
    assert Files(str(root)).put(b"x")[len(b"\x00spatec-file\x00"):].decode().startswith(str(root))


def test_the_setting_chooses_the_memory_file_system(tmp_path):
    assert scratch.chosen_memory("off") is None
    assert scratch.chosen_memory(str(tmp_path / "m")) == str(tmp_path / "m") and (tmp_path / "m").is_dir()
    assert scratch.chosen_memory("auto") == scratch.memory_dir()
    # executors on other machines: their /dev/shm is not this one's
    assert scratch.chosen_memory("auto", here=False) is None


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
    assert _where(root, twin, GIB - 100).startswith(twin)
    assert _where(root, twin, GIB + 100) == str(root / "a")


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
    mem = tmp_path / "shm"
    mem.mkdir()
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = mem / f"{scratch.PREFIX}{int(done.stdout)}-abc"
    dead.mkdir()
    (dead / "g0.arrow").write_bytes(b"x")
    alive = mem / f"{scratch.PREFIX}{os.getpid()}-def"
    alive.mkdir()
    other = mem / "someone-else"
    other.mkdir()
    scratch.twin_folder(str(mem))
    left = sorted(p.name for p in mem.iterdir())
    assert dead.name not in left and alive.name in left and other.name in left
    assert len(left) == 3           # and the new twin

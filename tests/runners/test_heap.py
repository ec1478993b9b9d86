"""The C heap keeps memory a process frees (spatec.runners.heap), where glibc's would hand it back."""
import platform
import subprocess
import sys

import pytest

PROBE = """
import sys
from spatec.runners.heap import keep_freed
if sys.argv[1] == "keep":
    assert keep_freed()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
blocks = [bytearray(100_000) for _ in range(2000)]      # 200 MB of 100 KB blocks, on the heap
full = rss()
del blocks
print((full - rss()) >> 20)                              # MB given back to the kernel
"""


@pytest.mark.skipif(platform.system() != "Linux" or not platform.libc_ver()[0] == "glibc",
                    reason="mallopt's settings are glibc's")
def test_freed_memory_is_kept_for_the_next_allocations():
    def given_back(mode):
        out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
        return int(out.stdout)

    assert given_back("default") > 50           # glibc trims the heap's free top at 128 KB
    assert given_back("keep") < 10

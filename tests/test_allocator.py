"""The worker's allocator setting (``agents.allocator``): large buffers keep their own
mappings after a larger one was freed, instead of growing inside the heap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from streameval.agents.allocator import _libc

PROBE = """
import ctypes, json, sys
from streameval.agents.allocator import keep_large_blocks_apart

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
took = keep_large_blocks_apart() if sys.argv[1] == "set" else None
pickle = bytearray(3_000_000)  # a checkpoint's pickle, mapped on its own, then freed
del pickle
mapped = libc.mallinfo2().hblkhd
chunks = bytearray(1_000_000)  # the next checkpoint's buffer
print(json.dumps({"took": took, "mapped": libc.mallinfo2().hblkhd - mapped}))
"""


def mapped_for_the_second_buffer(setting: str) -> dict[str, int | bool | None]:
    """In a fresh process: the bytes newly mapped for a 1 MB buffer after a 3 MB one."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, setting], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def has_mallinfo2() -> bool:
    libc = _libc()
    return libc is not None and hasattr(libc, "mallinfo2")


@pytest.mark.skipif(not has_mallinfo2(), reason="not glibc 2.33 or later")
def test_a_buffer_after_a_larger_freed_one_gets_its_own_mapping() -> None:
    # glibc alone: the freed 3 MB raised the threshold, the 1 MB goes into the heap
    assert mapped_for_the_second_buffer("default") == {"took": None, "mapped": 0}
    held = mapped_for_the_second_buffer("set")
    assert held["took"] is True
    assert 1_000_000 <= held["mapped"] <= 1_000_000 + 8192, held  # its own pages

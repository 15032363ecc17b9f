"""rocketpy.service.allocator against glibc itself, in a child process (its settings are
process-wide): where a thread's memory goes, and whether malloc_trim can return it."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: a thread allocates (blocks below glibc's mmap threshold: from an arena); then glibc's own report (malloc_info) says how many arenas hold memory
CHILD = r"""
import ctypes, sys, tempfile, threading
from rocketpy.service import allocator
if sys.argv[1] == "one":
    assert allocator.one_arena()
kept = []
worker = threading.Thread(target=lambda: kept.extend(bytearray(100_000) for _ in range(20)))
worker.start()
worker.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile("r") as report:
    stream = ctypes.c_void_p(libc.fopen(report.name.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(report.read().count("<heap nr="))
"""


def arenas(mode):
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    out = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60, env=env)
    return int(out.stdout)


def test_one_arena_keeps_a_threads_memory_in_the_main_arena():
    """glibc gives a thread its own arena, whose free top malloc_trim(0) never returns; with
    one_arena() the thread allocates from the main one."""
    assert arenas("default") == 2
    assert arenas("one") == 1

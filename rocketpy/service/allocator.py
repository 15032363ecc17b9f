"""Service layer: C allocator settings for a process that handles large frames (no Java
counterpart: the JVM allocates from a heap it has already mapped).

Every registration is a large frame (a 1,000-topic broker sends 144 KB, a 10,000-topic one
1.5 MB), and each one passes through a few transient buffers of that size: the socket reads,
the joined frame, the body. glibc ``malloc`` serves blocks above ``M_MMAP_THRESHOLD`` (128 KiB
at first, adjusted as blocks are freed) with a fresh ``mmap`` each time, and gives the top of
its heap back to the kernel past ``M_TRIM_THRESHOLD``; either way the next buffer of that size
starts on unmapped pages, and touching them costs one page fault per 4 KiB (about 370 for a
1.5 MB frame, several microseconds each in a virtual machine). Measured on the registration
path, that was three quarters of the server's time for 10,000-topic brokers.

:func:`tune_allocator` keeps blocks up to the frame limit on the heap and lets the heap keep
that much free memory, so buffers are reused instead of mapped afresh. The memory a busy server
keeps is then its peak, as the JVM's heap is. It is best effort: only glibc has ``mallopt``;
elsewhere nothing changes.

:func:`trim_heap` is the other direction, for a server whose route state has just shrunk a
lot (brokers left): glibc ``malloc_trim(0)`` hands the heap's free pages back to the kernel,
wherever they are (the automatic trim only returns the top of the heap). It is called by the
route-memory service (:mod:`rocketpy.service.memory`) unless ``--no-malloc-trim`` is given.
"""
import ctypes
import ctypes.util
import sys

__all__ = ["tune_allocator", "trim_heap"]

# glibc <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc refuses a larger M_MMAP_THRESHOLD (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return None


def trim_heap():
    """glibc ``malloc_trim(0)``: give the heap's free pages back to the kernel. True when the C
    library has it (and gave memory back), False elsewhere."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return bool(trim(0))


def tune_allocator(max_frame_length):
    """Keep frame-sized buffers on the heap (see the module docstring). Returns the
    ``(mmap threshold, trim threshold)`` set, or None when this C library cannot be tuned."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mmap_threshold = min(max(max_frame_length, 0) + 64 * 1024, _MMAP_THRESHOLD_MAX)
    trim_threshold = 2 * mmap_threshold  # glibc's own ratio when it adjusts them itself
    if not mallopt(_M_MMAP_THRESHOLD, mmap_threshold):
        return None
    mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    return mmap_threshold, trim_threshold

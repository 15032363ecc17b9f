"""Service layer: C allocator settings for a process that handles large frames (no Java
counterpart: the JVM allocates from a heap it has already mapped).

Every registration is a large frame (1.5 MB for 10,000 topics) passing through a few transient
buffers of that size. glibc serves blocks above ``M_MMAP_THRESHOLD`` with a fresh ``mmap`` and
returns its heap top past ``M_TRIM_THRESHOLD``, so each new buffer starts on unmapped pages: one
fault per 4 KiB, several microseconds each in a VM -- three quarters of the server's time for
10,000-topic brokers, as measured.

:func:`tune_allocator` keeps blocks up to the frame limit on the heap and lets it keep that much
free, so buffers are reused (the process keeps its peak, as the JVM does). Best effort (only
glibc has ``mallopt``), process-wide, so an operator's choice (``--tune-allocator``) applied at
start, never a side effect of building the service tree.

:func:`heap_trimmer` goes the other way after the route state shrinks (brokers left): glibc
``malloc_trim(0)`` returns the free pages of its heaps, called by :mod:`rocketpy.service.memory`
unless ``--no-malloc-trim``; :func:`one_arena`, applied when the server starts unless that flag
is given, keeps every thread's memory within its reach."""
import ctypes
import ctypes.util
import sys

__all__ = ["tune_allocator", "heap_trimmer", "one_arena"]

# glibc <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
#: glibc refuses a larger M_MMAP_THRESHOLD (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return None


def _mallopt():
    """glibc ``mallopt(param, value)``, or None where the C library has none."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
    return mallopt


def heap_trimmer():
    """glibc ``malloc_trim(0)`` as a call that gives the heap's free pages back to the kernel
    (True when it gave memory back), or None where the C library has none. Resolved once, when
    the service is built: what resolving makes (a ``ctypes`` function type, the library lookup's
    cached regular expression) lives as long as the process, and made at the first release, at
    the route state's peak, it would hold the allocator's pages of the peak (issue 21)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return lambda: bool(trim(0))


def tune_allocator(max_frame_length):
    """Keep frame-sized buffers on the heap (see the module docstring). Returns the
    ``(mmap threshold, trim threshold)`` set, or None when this C library cannot be tuned."""
    mallopt = _mallopt()
    if mallopt is None:
        return None
    mmap_threshold = min(max(max_frame_length, 0) + 64 * 1024, _MMAP_THRESHOLD_MAX)
    trim_threshold = 2 * mmap_threshold  # glibc's own ratio when it adjusts them itself
    if not mallopt(_M_MMAP_THRESHOLD, mmap_threshold):
        return None
    mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    return mmap_threshold, trim_threshold


def one_arena():
    """Have every thread allocate from glibc's main arena (``M_ARENA_MAX`` 1), so that
    ``malloc_trim(0)`` reaches all the free memory: it returns the free top of the main heap
    only, and a thread's own arena keeps a free top up to the trim threshold, which glibc raises
    to twice the largest block freed (the decode thread's arena held 14 MiB after a 10 M-topic
    seed left, issue 21). The threads hold the GIL for nearly all they allocate, so sharing
    one arena costs them next to nothing. A thread that has allocated already keeps its arena:
    call it before the server's threads start. True when set."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, 1))

"""Wire codec layer: the compiled header kernel (``rocketpy/remoting/_kernel``), when it is built.

It reads a frame's prefix, a binary header and the usual JSON header in C, for the codec
(:func:`~rocketpy.remoting.frame.decode_header`), the answer cache's key and the overload peek
(:mod:`~rocketpy.remoting.layout`), and for a JSON body whether an object writes a key twice
(:func:`~rocketpy.remoting.fastjson.repeats_keys`); the capture core links the same header
source. It answers None for
anything it leaves to the Python codec, which stays the specification: the two are proven equal
on every genuine capture frame and the fuzz corpus (``tests/test_header_kernel.py``).
``ROCKETPY_NO_KERNEL=1`` leaves it out (the benchmarks compare both in one run). The decoder
(:mod:`~rocketpy.remoting.frame`), the one caller of what builds commands, configures it with
the command class."""
import os


def built_extension(module):
    """``module`` if it is the compiled extension, None if it is only the C source directory
    of the same name (a tree where nothing was built imports that as an empty namespace
    package)."""
    return module if getattr(module, "__file__", None) else None


KERNEL = None
if not os.environ.get("ROCKETPY_NO_KERNEL"):
    try:
        from . import _kernel as KERNEL
    except ImportError:    # not built (no compiler): the pure-Python codec reads every header
        KERNEL = None
    KERNEL = built_extension(KERNEL)

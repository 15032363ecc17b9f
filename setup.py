"""Build script: everything is declared in setup.cfg except the compiled capture decoder.

``rocketpy.capture._native`` is a plain C extension (no Cython, nothing to download at build
time: gcc and the Python headers are all it needs).  It is optional: when it cannot be built
(no compiler, an unusual platform) the install still succeeds and rocketpy.capture uses the
pure-Python decoder, with one warning when it is first imported.
"""
from glob import glob

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "rocketpy.capture._native",
    sources=sorted(glob("rocketpy/capture/_native/*.c")),
    depends=sorted(glob("rocketpy/capture/_native/*.h")),
    extra_compile_args=["-std=gnu11", "-O2", "-fvisibility=hidden"],
    optional=True,
)])

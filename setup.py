"""Build script: everything is declared in setup.cfg except the compiled modules.

``rocketpy.remoting._kernel`` (the header kernel: a frame's prefix, the binary and the usual JSON
header) and ``rocketpy.capture._native`` (the capture decoder, which links the same kernel
source) are plain C extensions (no Cython, nothing to download at build time: gcc and the Python
headers are all they need).  Both are optional: when they cannot be built (no compiler, an
unusual platform) the install still succeeds and the pure-Python codec and decoder are used.

Before compiling, the layout the C code reads frames with is written from
``rocketpy/remoting/layout.py`` to ``rocketpy/remoting/_kernel/layout_gen.h``, so C states no
offset of its own.
"""
import importlib.util
import sys
from glob import glob
from pathlib import Path

from setuptools import Extension, find_packages, setup

ROOT = Path(__file__).resolve().parent
KERNEL = "rocketpy/remoting/_kernel"


def write_layout_header():
    """layout_gen.h from the codec's layout (rewritten only when it changed)."""
    sys.path.insert(0, str(ROOT))
    try:
        from rocketpy.remoting import layout_c
    finally:
        sys.path.remove(str(ROOT))
    path = ROOT / layout_c.GENERATED_HEADER
    text = layout_c.c_header()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


write_layout_header()
OPTIONS = dict(include_dirs=[KERNEL], extra_compile_args=["-std=gnu11", "-O2", "-fvisibility=hidden"],
               optional=True)
KERNEL_HEADERS = sorted(glob(f"{KERNEL}/*.h"))

# Every package under rocketpy/ is found, none listed; twisted.plugins is added by name: it has no
# __init__.py, by Twisted's rules, so no finder sees it.
PACKAGES = find_packages(include=["rocketpy", "rocketpy.*"]) + ["twisted.plugins"]

setup(packages=PACKAGES, ext_modules=[
    Extension("rocketpy.remoting._kernel", sources=sorted(glob(f"{KERNEL}/*.c")),
              depends=KERNEL_HEADERS, **OPTIONS),
    Extension("rocketpy.capture._native",
              sources=sorted(glob("rocketpy/capture/_native/*.c"))
              + [f"{KERNEL}/kernel.c", f"{KERNEL}/languages.c"],
              depends=sorted(glob("rocketpy/capture/_native/*.h")) + KERNEL_HEADERS, **OPTIONS),
])

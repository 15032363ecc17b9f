"""Test helper: what a call costs, counted, never timed, so a busy machine counts what a quiet one
does (issue 30 part 4).

* :func:`counting_modules`: the compiled modules built with ``-DROCKETPY_COUNT_COST``
  (``rocketpy/remoting/_kernel/cost.h``): the header kernel and the capture core, each with a
  ``take_cost()`` (probes, moves, bytes since the last take). Built once per source state into
  ``build/cost-<hash>`` (beside setuptools' own ``build/``), loaded from there under their own
  names, and configured as the package configures the shipped ones; the shipped build, which
  ``pip install .`` makes, has no counter.
* :func:`python_lines`: the lines of rocketpy's own Python a call runs (``sys.settrace``): the
  pure-Python reference's operations, whatever loop they are in.
* :func:`growth`: each count's ratio between two sizes, for the tests at doubling sizes.
"""
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["counting_modules", "python_lines", "growth", "CountingModules"]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rocketpy"
SOURCES = ("rocketpy/remoting/_kernel", "rocketpy/capture/_native")
_BUILT = {}


class CountingModules:
    """``kernel`` (rocketpy.remoting._kernel) and ``native`` (rocketpy.capture._native), built
    with the cost counters."""

    def __init__(self, kernel, native):
        self.kernel = kernel
        self.native = native


def _source_hash():
    h = hashlib.sha256((ROOT / "setup.py").read_bytes())
    for folder in SOURCES:
        for path in sorted((ROOT / folder).glob("*.[ch]")):
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def _build(where):
    env = dict(os.environ, CFLAGS="-DROCKETPY_COUNT_COST")
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(where),
                           "--build-temp", str(where / "tmp"), "--force"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def _load(where, name):
    package, _, leaf = name.rpartition(".")
    paths = list(where.joinpath(*package.split(".")).glob(f"{leaf}.*.so"))
    assert paths, f"the counting build made no {name} (setup.py builds it optionally: is gcc there?)"
    loader = importlib.machinery.ExtensionFileLoader(name, str(paths[0]))
    spec = importlib.util.spec_from_file_location(name, str(paths[0]), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert hasattr(module, "take_cost"), f"{paths[0]} was built without ROCKETPY_COUNT_COST"
    return module


def counting_modules():
    """The counting build of this checkout's C sources (built on first use, then reused)."""
    key = _source_hash()
    if key not in _BUILT:
        where = ROOT / "build" / f"cost-{key}"
        if not (where / "done").exists():
            _build(where)
            (where / "done").write_text("")
        from rocketpy.capture import engine
        from rocketpy.remoting import codes
        from rocketpy.remoting.command import RemotingCommand
        kernel = _load(where, "rocketpy.remoting._kernel")
        kernel.configure(RemotingCommand, dict(codes.LanguageCode.__members__))
        native = _load(where, "rocketpy.capture._native")
        engine.configure_native(native)
        _BUILT[key] = CountingModules(kernel, native)
    return _BUILT[key]


def python_lines(fn, *args, **kwargs):
    """``(fn's result, the lines of rocketpy's Python it ran)``."""
    prefix = str(PACKAGE)
    lines = 0

    def local(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(prefix) else None

    saved = sys.gettrace()
    sys.settrace(calls)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(saved)
    return result, lines


def growth(small, big):
    """``{count: big / small}`` for each count of two runs (dicts of the same keys) that the
    smaller run made at all; a count only the bigger one made is infinite growth."""
    return {k: (big[k] / small[k] if small[k] else float("inf") if big[k] else 1.0) for k in big}

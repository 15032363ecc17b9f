"""Test helper: what an input costs the pure-Python reference, counted, never timed (issue 31).

A 29-byte header froze the server 37 s and no fuzzer saw it: their contract looked at
exceptions, not at work. Here the work of one call is counted, the same on a busy machine as on
a quiet one, two ways:

* ``lines``: every line of Python it runs (``sys.settrace``), which sees any loop in Python code
  (a line event costs a third of an opcode event to trace, and a loop runs a line per turn);
* ``memory``: the most bytes it holds above what it started with (``tracemalloc``'s peak), which
  sees the big C calls a line count cannot: ``int()`` of ``Decimal("1e1000000")`` runs one line
  but builds a 415 KB integer from 29 bytes; a number, string or list a stranger can blow up
  costs at least in proportion to what it allocates.

:class:`CostContract` turns them into a fuzz contract: calibrated on genuine inputs (the median
of each per byte), it fails an input that passes ``factor`` times a median for its size, plus a
fixed allowance of ``floor`` bytes' worth (every call has a fixed cost)."""
import contextlib
import statistics
import sys
import tracemalloc

__all__ = ["Cost", "measure", "reference", "warm_tracebacks", "CostContract", "CostFinding"]


def warm_tracebacks():
    """Read every rocketpy source file into ``linecache`` once: a handler that fails logs a
    traceback, and the first traceback through a file caches its lines (tens of KB, once per
    process), which is no cost of the input that happened to come first."""
    import linecache
    from pathlib import Path
    import rocketpy
    for path in Path(rocketpy.__file__).parent.rglob("*.py"):
        linecache.getlines(str(path))


@contextlib.contextmanager
def reference():
    """The pure-Python codec only (the header kernel's C work is not counted here): the
    modules that use the kernel see none while the block runs."""
    from rocketpy.remoting import fastjson, frame, layout
    saved = [(module, module.KERNEL) for module in (fastjson, frame, layout)]
    for module, _ in saved:
        module.KERNEL = None
    try:
        yield
    finally:
        for module, kernel in saved:
            module.KERNEL = kernel


class Cost(tuple):
    """``(lines, memory)`` of one call."""

    __slots__ = ()

    def __new__(cls, lines, memory):
        return super().__new__(cls, (lines, memory))

    lines = property(lambda self: self[0])
    memory = property(lambda self: self[1])


def measure(fn, *args, warm=False):
    """``(Cost, exception)`` of ``fn(*args)``: the lines it ran and the peak memory it held;
    the exception it raised (None when it returned), which the caller judges. ``warm`` runs it
    once unmeasured first (a first call's caches and lazy imports are not its input's cost)."""
    if warm:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - measured again below
            pass
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
        return local

    def start(frame, event, arg):
        return local

    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    previous = sys.gettrace()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    error = None
    sys.settrace(start)
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - the caller judges what was raised
        error = exc
    finally:
        sys.settrace(previous)
        peak = tracemalloc.get_traced_memory()[1] - base
        if not tracing:
            tracemalloc.stop()
    return Cost(count[0], max(0, peak)), error


class CostFinding(AssertionError):
    """An input cost far more per byte than the genuine ones; ``data`` reproduces it."""

    def __init__(self, message, data=b""):
        super().__init__(message)
        self.data = bytes(data)


class CostContract:
    """``check(data, cost)`` fails a cost whose lines or memory pass ``factor`` x the median per
    byte of the calibration inputs (``(data, run)`` pairs: ``run(data)`` is measured, and may
    return the size to count for it, ``len(data)`` otherwise) for ``size + floor`` bytes."""

    def __init__(self, target, calibration, factor=32, floor=16):
        warm_tracebacks()
        self.target = target
        lines, memory = [], []
        for data, run in calibration:
            sizes = []
            cost, _ = measure(lambda: sizes.append(run(data)))
            size = max(sizes[0] if sizes and isinstance(sizes[0], int) else len(data), 1)
            lines.append(cost.lines / size)
            memory.append(cost.memory / size)
        self.median = Cost(statistics.median(lines), statistics.median(memory))
        self.factor = factor
        self.floor = floor
        #: the highest cost / allowed ratio seen, and its input (what bench/*fuzz* print)
        self.worst = (0.0, b"")

    def allowed(self, size):
        """The most :class:`Cost` an input of ``size`` bytes may have."""
        scale = self.factor * (size + self.floor)
        return Cost(scale * self.median.lines, scale * self.median.memory)

    def ratio(self, cost, size):
        allowed = self.allowed(size)
        return max(cost.lines / allowed.lines, cost.memory / allowed.memory)

    def check(self, data, cost, size=None):
        size = len(data) if size is None else size
        ratio = self.ratio(cost, size)
        if ratio > self.worst[0]:
            self.worst = (ratio, bytes(data[:4096]))
        if ratio > 1:
            import base64
            raise CostFinding(
                f"[{self.target}] an input of {size} bytes cost {cost.lines} lines and "
                f"{cost.memory} bytes of memory, over {self.factor} x the medians per byte of "
                f"the genuine inputs ({self.median.lines:.2f} lines, {self.median.memory:.1f} "
                f"bytes); reproducer (base64): {base64.b64encode(bytes(data[:4096])).decode()}",
                data)

    def run(self, data, fn, *args, size=None, warm=False):
        """Measure ``fn(*args)`` and check its cost for ``data``; returns what it raised."""
        cost, error = measure(fn, *args, warm=warm)
        self.check(data, cost, size)
        return error

"""Optional PNG plots of a decoded capture (matplotlib: the ``plots`` extra, also in ``spark``).

Layer: ``rocketpy.capture`` presentation helper; imports matplotlib only when called, with the
non-interactive Agg backend, so neither executors nor the plain CLI need it.  Both functions
take already aggregated data, so the Spark job feeds them from a small ``collect()``.
"""
from __future__ import annotations

import math

from rocketpy.remoting import codes

__all__ = ["plot_latency", "plot_rate", "rate_series", "rate_axis_label", "plots_available",
           "PLOTS_HINT"]

#: How to get matplotlib: the extra from a checkout (on PyPI, "rocketpy" is another project).
PLOTS_HINT = ("--plots needs matplotlib, from the plots extra: pip install -e '.[plots]' in the "
              "rocketpy checkout (the PyPI package named rocketpy is another project)")


def plots_available() -> bool:
    """Whether matplotlib (the ``plots`` extra) is installed."""
    import importlib.util
    return importlib.util.find_spec("matplotlib") is not None


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _label(code):
    name = codes.request_code_name(code) if code is not None else None
    return f"{code} {name}" if name else str(code)


def plot_latency(latency_by_code: dict, path: str, max_codes: int = 12) -> str:
    """Box plot of response latency (ms, log scale) per request code -> ``path`` (PNG)."""
    plt = _plt()
    items = sorted(((c, v) for c, v in latency_by_code.items() if v),
                   key=lambda kv: -len(kv[1]))[:max_codes]
    fig, ax = plt.subplots(figsize=(10, 0.5 * max(len(items), 2) + 1.5))
    if items:
        data = [[max(x, 1e-3) for x in v] for _, v in items]
        try:
            ax.boxplot(data, orientation="horizontal")     # matplotlib >= 3.10
        except TypeError:
            ax.boxplot(data, vert=False)
        ax.set_yticks(range(1, len(items) + 1),
                      [f"{_label(c)} (n={len(v)})" for c, v in items])
        ax.set_xscale("log")
    ax.set_xlabel("latency, ms (request to response)")
    ax.set_title("RocketMQ response latency per request code")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def rate_axis_label(t0: float) -> str:
    """The rate plot's x axis: seconds since the first request, that moment as a UTC date
    (``seconds since 2023-11-14 22:13:20 UTC``), not a raw epoch number."""
    import datetime
    start = datetime.datetime.fromtimestamp(t0, datetime.timezone.utc)
    return f"seconds since {start:%Y-%m-%d %H:%M:%S} UTC"


def rate_series(series: dict, t0: float, t1: float, bucket_s: float, points: int = 1000):
    """``(x, requests/s)`` from t0 to t1 for one code's {bucket start: count}: buckets without a
    request are zero (an idle second is a rate of 0, not a line drawn across it), and long
    captures are summed into at most ``points`` wider buckets."""
    step = max(bucket_s, math.ceil((t1 - t0) / bucket_s / points) * bucket_s)
    sums: dict = {}
    for t, n in series.items():
        k = int((t - t0) // step)
        sums[k] = sums.get(k, 0) + n
    xs = [k * step for k in range(int((t1 - t0) // step) + 1)]
    return xs, [sums.get(k, 0) / step for k in range(len(xs))]


def plot_rate(rate: dict, path: str, bucket_s: float = 1.0, max_codes: int = 8) -> str:
    """Requests per second over time, one line per request code -> ``path`` (PNG).

    ``rate``: request code -> {bucket start (epoch s): count}.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4))
    t0 = min((t for series in rate.values() for t in series), default=0)
    t1 = max((t for series in rate.values() for t in series), default=0)
    top = sorted(rate.items(), key=lambda kv: -sum(kv[1].values()))[:max_codes]
    for code, series in top:
        xs, ys = rate_series(series, t0, t1, bucket_s)
        ax.plot(xs, ys, label=_label(code), marker=".", linewidth=1)
    ax.set_xlabel(rate_axis_label(t0))
    ax.set_ylabel("requests / s")
    ax.set_title("RocketMQ request rate")
    if top:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

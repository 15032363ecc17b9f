"""The decoders' counters (packets, bytes, gaps, connections, ...), one plain dict per decode.

Layer: ``rocketpy.capture`` (pure stdlib, imported by both engines, the byte-range planner and
the front ends; light, so that the compiled path starts without the reference decoder)."""
from __future__ import annotations

__all__ = ["Stats"]


class Stats(dict):
    """Counters (plain dict so it pickles and merges): packets, bytes, gaps, ..."""

    def merge(self, other: dict) -> "Stats":
        for k, v in other.items():
            if isinstance(v, dict):
                d = self.setdefault(k, {})
                for kk, vv in v.items():
                    d[kk] = d.get(kk, 0) + vv
            else:
                self[k] = self.get(k, 0) + v
        return self

    def count(self, key: str, n: int = 1) -> None:
        self[key] = self.get(key, 0) + n

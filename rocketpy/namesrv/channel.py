"""NameServer state layer: the identity of one client connection (Java's Netty ``Channel``).

The Java ``RouteInfoManager`` keeps Netty channel objects in its live-broker table and compares
them by identity. rocketpy keeps only this small value: the transport creates one per
connection, so route state never holds a protocol object and stays testable without a reactor.
"""
from dataclasses import dataclass

__all__ = ["Channel"]


@dataclass(frozen=True, slots=True)
class Channel:
    """One connection: a process-unique id and the peer's ``ip:port`` (for logs and remarks)."""

    channel_id: int
    remote_addr: str = ""

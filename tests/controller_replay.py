"""Test helper: the controller-port traffic of the ``rmq53-controller-*`` captures.

The captures hold four ports (fixtures README): the NameServer (59876), the controller (59878:
the DLedger peer address, where brokers and mqadmin send every controller request and the
brokers their oneway heartbeats), and the brokers' listen ports (50911, 50921), where the
controller opens its own connections to push NOTIFY_BROKER_ROLE_CHANGED (1008). Only
``rmq53-controller-sc-elect`` starts with a fresh controller; the other two start mid-run, so
long-lived connections appear without their SYN and are kept here (``tests/replay.py`` keeps
only connections whose SYN it saw).

:func:`controller_streams` gives, per TCP connection, the frames of each direction with their
times; :func:`controller_events` orders the requests to the controller, the pushes it sent and
the connection closes, each request at its arrival: unlike the NameServer's pool (which
:mod:`replay` models by answer times), Java's controller decides every request in arrival order
on one event thread, and answers once its DLedger log has the change (up to ~100 ms later). The
first election of ``sc-elect`` shows it: it is answered after the master's first heartbeat
arrived, yet the controller pushed nothing to it, so it decided before that heartbeat.
"""
import struct
from dataclasses import dataclass, field

import golden

CONTROLLER_PORT = 59878
BROKER_PORTS = (50911, 50921)
CAPTURES = ("rmq53-controller-sc-elect", "rmq53-controller-failover", "rmq53-controller-mqadmin")


@dataclass
class Stream:
    """One TCP connection: ``client`` opened it (or sent first when no SYN was recorded)."""

    index: int
    client: tuple
    server: tuple
    to_server: list = field(default_factory=list)     # [(ts, frame bytes)]
    to_client: list = field(default_factory=list)
    closed: "float | None" = None


def _segments(path):
    for ts, pkt in golden.packets(path.read_bytes()):
        if pkt[12:14] != b"\x08\x00" or pkt[23] != 6:
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 15) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        yield ts, sport, dport, seq, tcp[13], tcp[(tcp[12] >> 4) * 4:]


def _cut(chunks):
    """``[(ts, frame)]`` of one direction's ``[(ts, payload)]`` (a frame is dated by its last
    byte)."""
    buf, marks, frames, pos = bytearray(), [], [], 0
    for ts, payload in chunks:
        buf += payload
        marks.append((len(buf), ts))
    while pos + 4 <= len(buf):
        end = pos + 4 + struct.unpack(">I", buf[pos:pos + 4])[0]
        if end > len(buf):
            break
        frames.append((next(t for n, t in marks if n >= end), bytes(buf[pos:end])))
        pos = end
    return frames


def controller_streams(name):
    """Every connection of capture ``name`` touching the controller port or a broker port."""
    path = golden.PCAP_DIR / f"{name}.pcap"
    conns, order = {}, []
    for ts, sport, dport, seq, flags, payload in _segments(path):
        key = frozenset(((sport,), (dport,)))
        if not {sport, dport} & {CONTROLLER_PORT, *BROKER_PORTS}:
            continue
        conn = conns.get(key)
        if conn is None or (flags & 0x12 == 0x02 and conn["closed"] is not None):
            if flags & 0x12 == 0x02:
                client, server = sport, dport
            else:   # mid-stream: the side on a server port is the server
                server = sport if sport in (CONTROLLER_PORT, *BROKER_PORTS) else dport
                client = dport if server == sport else sport
            conn = conns[key] = {"client": client, "server": server, "chunks": {True: [], False: []},
                                 "seen": {True: set(), False: set()}, "closed": None}
            order.append(conn)
        up = sport == conn["client"]
        if payload and seq not in conn["seen"][up]:
            conn["seen"][up].add(seq)
            conn["chunks"][up].append((ts, payload))
        if flags & 0x05 and conn["closed"] is None:
            conn["closed"] = ts
    out = []
    for conn in order:
        stream = Stream(len(out), ("127.0.0.1", conn["client"]), ("127.0.0.1", conn["server"]),
                        _cut(conn["chunks"][True]), _cut(conn["chunks"][False]), conn["closed"])
        if stream.to_server or stream.to_client:
            out.append(stream)
    return out


def controller_frames(name):
    """``[(stream, to_server, ts, frame)]``: every frame on the controller port and every frame
    the controller pushed to a broker port."""
    out = []
    for stream in controller_streams(name):
        if stream.server[1] == CONTROLLER_PORT:
            out += [(stream, True, ts, f) for ts, f in stream.to_server]
            out += [(stream, False, ts, f) for ts, f in stream.to_client]
        else:
            from rocketpy.remoting import decode_frame
            out += [(stream, True, ts, f) for ts, f in stream.to_server
                    if decode_frame(f).code == 1008]
    return out


@dataclass
class Event:
    """``kind``: "request" (to the controller), "push" (1008 it sent), or "close"."""

    ts: float
    kind: str
    stream: Stream
    request: object = None
    expected: object = None
    frame: bytes = b""
    expected_frame: bytes = b""


def controller_events(name):
    """The controller's work in replay order (see the module docstring)."""
    from rocketpy.remoting import decode_frame
    events = []
    for stream in controller_streams(name):
        if stream.server[1] != CONTROLLER_PORT:
            for ts, f in stream.to_server:
                cmd = decode_frame(f)
                if cmd.code == 1008:
                    events.append(Event(ts, "push", stream, cmd, frame=f))
            continue
        answers = {}
        for ts, f in stream.to_client:
            cmd = decode_frame(f)
            answers.setdefault(cmd.opaque, []).append((ts, f, cmd))
        for ts, f in stream.to_server:
            cmd = decode_frame(f)
            match = answers.get(cmd.opaque)
            if match and not cmd.is_oneway:
                _, answer_frame, answer = match.pop(0)
                events.append(Event(ts, "request", stream, cmd, answer, f, answer_frame))
            else:
                events.append(Event(ts, "request", stream, cmd, frame=f))
        if stream.closed is not None:
            events.append(Event(stream.closed, "close", stream))
    events.sort(key=lambda e: (e.ts, e.kind == "close"))
    return events

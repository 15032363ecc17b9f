"""Test helper: every remoting frame of every genuine capture, read without rocketpy.

The golden tests compare rocketpy's codec against these frames, so this reader shares no code
with it: a minimal classic-pcap reader (Ethernet, IPv4, TCP), per-direction TCP payload in
sequence order (the captures are clean loopback traffic; a retransmitted or out-of-order segment
fails loudly rather than being guessed at), frames cut on the length prefix with ``struct``,
and an independent naive header parser (``json.loads`` for JSON headers, ``struct`` for the
ROCKETMQ binary header).
"""
from __future__ import annotations

import functools
import json
import pathlib
import re
import struct
from dataclasses import dataclass

PCAP_DIR = pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"


def capture_paths():
    return sorted(PCAP_DIR.glob("*.pcap"))


#: The listening ports of the 5.3.3 captures, from the fixtures README: the NameServer, the
#: controller (its DLedger peer address, which also serves the brokers' and mqadmin's controller
#: requests) and the brokers (where the controller pushes NOTIFY_BROKER_ROLE_CHANGED). Some of
#: their connections opened before tcpdump started, so no SYN says which side listens.
PORT_ROLES = {59876: "namesrv", 59878: "controller", 50911: "broker", 50921: "broker"}
ROLES = ("namesrv", "controller", "broker")


def port_role(port):
    """The role of the process listening on ``port``: every other capture port is a NameServer's
    (39876, 49876, and a fresh port per self-contained capture)."""
    return PORT_ROLES.get(port, "namesrv")


def readme_frame_counts():
    """``{file name: frame count}`` from the fixtures README table."""
    text = (PCAP_DIR / "README.md").read_text()
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^\| (\S+\.pcap) \| [^|]+\| [^|]+\| (\d+) \|", text, re.M)}


#: classic pcap magic (as the first four file bytes) -> (byte order, seconds per tick)
_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
          b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}


def packets(data):
    """``(seconds, Ethernet frame)`` of each record of a classic pcap file's bytes (the tests'
    one pcap reader, sharing no code with rocketpy)."""
    if data[:4] not in _MAGIC:
        raise ValueError(f"not a classic pcap (magic {data[:4].hex()})")
    order, scale = _MAGIC[data[:4]]
    linktype = struct.unpack_from(order + "I", data, 20)[0]
    if linktype != 1:
        raise ValueError(f"link type {linktype}, expected Ethernet")
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from(order + "IIII", data, pos)
        pos += 16
        yield sec + frac * scale, data[pos:pos + incl]
        pos += incl


@dataclass(frozen=True)
class Frame:
    capture: str          # file name without .pcap
    conn: int             # connection number within the capture (order of first packet)
    to_server: bool       # direction: True = towards the listening port
    index: int            # frame number within its direction of its connection
    data: bytes           # the whole frame, length prefix included
    role: str = "namesrv"  # who listens on the connection: namesrv, controller or broker

    @property
    def where(self):
        arrow = "->" if self.to_server else "<-"
        return f"{self.capture} conn {self.conn} {arrow} frame {self.index}"


def _streams(path):
    """``[(conn, to_server, payload bytes)]`` of one capture."""
    streams = {}   # (src, sport, dst, dport) -> [next seq or None, bytearray]
    order = []
    listen = set()
    for _, pkt in packets(path.read_bytes()):
        if struct.unpack_from(">H", pkt, 12)[0] != 0x0800:
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        if ip[9] != 6:
            continue
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        flags = tcp[13]
        payload = tcp[(tcp[12] >> 4) * 4:]
        key = (ip[12:16], sport, ip[16:20], dport)
        if key not in streams:
            streams[key] = [None, bytearray()]
            order.append(key)
        state = streams[key]
        if flags & 0x02:  # SYN
            state[0] = (seq + 1) & 0xFFFFFFFF
            if not flags & 0x10:  # a bare SYN goes to the listening port
                listen.add(dport)
            continue
        if not payload:
            continue
        if state[0] is None:
            state[0] = seq
        if seq != state[0]:
            raise ValueError(f"{path.name}: out-of-order or retransmitted segment on {key}")
        state[1] += payload
        state[0] = (seq + len(payload)) & 0xFFFFFFFF
    conns = {}
    out = []
    for key in order:
        pair = frozenset([(key[0], key[1]), (key[2], key[3])])
        conn = conns.setdefault(pair, len(conns))
        out.append((conn, key, bytes(streams[key][1])))
    return out, listen


def _server_ports(streams, listen):
    """The listening ports: where bare SYNs go and the README's 5.3.3 ports; for a capture that
    has neither (a connection older than tcpdump), the port every connection shares."""
    ports = {}
    for conn, key, payload in streams:
        if payload:
            ports.setdefault(conn, set()).update((key[1], key[3]))
    seen = set().union(*ports.values()) if ports else set()
    known = (listen | set(PORT_ROLES)) & seen
    if known:
        return known
    common = set.intersection(*ports.values()) if ports else set()
    if len(common) == 1:
        return common
    return {min(common)} if common else set()


def split(payload):
    """Cut a byte stream into frames on the length prefix."""
    frames = []
    pos = 0
    while pos < len(payload):
        (length,) = struct.unpack_from(">I", payload, pos)
        frames.append(payload[pos:pos + 4 + length])
        pos += 4 + length
    if pos != len(payload):
        raise ValueError("stream does not end on a frame boundary")
    return frames


@functools.lru_cache(maxsize=None)
def capture_frames(name):
    """Every frame of one capture (file name with or without .pcap), both directions."""
    path = PCAP_DIR / (name if name.endswith(".pcap") else name + ".pcap")
    streams, listen = _streams(path)
    servers = _server_ports(streams, listen)
    frames = []
    for conn, key, payload in streams:
        if not payload:
            continue
        to_server = key[3] in servers
        role = port_role(key[3] if to_server else key[1])
        for index, data in enumerate(split(payload)):
            frames.append(Frame(path.stem, conn, to_server, index, data, role))
    return tuple(frames)


def all_frames():
    return [f for path in capture_paths() for f in capture_frames(path.name)]


# --- the independent naive parse -----------------------------------------------------------

@dataclass
class Naive:
    serialize_type: int
    code: int
    language: "int | str"
    version: int
    opaque: int
    flag: int
    remark: "str | None"
    ext_fields: "dict | None"
    header: bytes
    body: bytes
    json_header: "dict | None" = None


@functools.lru_cache(maxsize=None)
def naive(frame):
    """Parse a frame with nothing but ``struct`` and ``json`` (cached: treat as read-only)."""
    (length, word) = struct.unpack_from(">II", frame, 0)
    assert length == len(frame) - 4
    stype, hlen = word >> 24, word & 0xFFFFFF
    header, body = frame[8:8 + hlen], frame[8 + hlen:]
    if stype == 0:
        obj = json.loads(header)
        return Naive(0, obj["code"], obj["language"], obj["version"], obj["opaque"], obj["flag"],
                     obj.get("remark"), obj.get("extFields"), header, body, obj)
    code, lang, version, opaque, flag, rlen = struct.unpack_from(">hbhiii", header, 0)
    pos = 17
    remark = header[pos:pos + rlen].decode() if rlen else None
    pos += rlen
    (elen,) = struct.unpack_from(">i", header, pos)
    pos += 4
    end = pos + elen
    ext = {} if elen else None
    while pos < end:
        (klen,) = struct.unpack_from(">h", header, pos)
        key = header[pos + 2:pos + 2 + klen].decode()
        pos += 2 + klen
        (vlen,) = struct.unpack_from(">i", header, pos)
        ext[key] = header[pos + 4:pos + 4 + vlen].decode()
        pos += 4 + vlen
    assert pos == len(header)
    return Naive(1, code, lang, version, opaque, flag, remark, ext, header, body)


@dataclass(frozen=True)
class Exchange:
    """A request and its recorded answer (``None``: oneway or never answered)."""

    request: Frame
    response: "Frame | None"


@functools.lru_cache(maxsize=None)
def capture_exchanges(name):
    """Requests of one capture (either direction) paired with answers by opaque."""
    frames = capture_frames(name)
    answers = {}
    for f in frames:
        n = naive(f.data)
        if n.flag & 1:
            answers[(f.conn, not f.to_server, n.opaque)] = f
    out = []
    for f in frames:
        n = naive(f.data)
        if not n.flag & 1:
            out.append(Exchange(f, answers.get((f.conn, f.to_server, n.opaque))))
    return tuple(out)

"""Test helper: replay the genuine captures' request streams and compare the answers.

Reads the classic-pcap captures of ``../shared/fixtures/pcap`` (loopback, Ethernet, IPv4):
one :class:`Conversation` per TCP connection to a listening port (the destination of each
connection's SYN), each direction's payload concatenated in sequence order and cut into frames.
Connections that carry no frame (the 5.0 NameServer's own SYN/RST probes) are dropped. Each
conversation has the role of the process it went to (:func:`golden.port_role`): the NameServer,
the 5.3.3 controller (port 59878) or a broker (the controller's NOTIFY_BROKER_ROLE_CHANGED pushes).

:func:`replay_events` orders the work as the fixture README prescribes: a request with a
recorded answer at the time of that answer (the Java NameServer serves a connection's pipelined
requests concurrently, so the state it saw is the state when it answered), a request without
one (oneway, or 4.9's unknown code) at its arrival, a connection close at its FIN/RST.

:func:`replay_capture` drives one processor per role with those events and returns every difference from
the recorded answers (:func:`compare`): same code, remark, header fields and body once parsed
(fastjson's unquoted keys normalised, the NameServer's own paths left aside). Helper E reuses the
event list for its end-to-end socket replay.
"""
import struct
from dataclasses import dataclass, field
from pathlib import Path

from golden import ROLES, packets, port_role
from rocketpy.namesrv.policy import as_policies
from rocketpy.remoting import decode_frame, fastjson

PCAP_DIR = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"

__all__ = ["PCAP_DIR", "Conversation", "ReplayEvent", "conversations", "replay_events",
           "compare", "replay_capture", "ReplayResult", "capture_profile", "sc_captures",
           "namesrv_port", "NamesrvRole", "build_processor", "replay_steps"]


# ------------------------------------------------------------------ pcap -> TCP conversations

def _tcp(path):
    for ts, frame in packets(Path(path).read_bytes()):
        if frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        if ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        flags = tcp[13]
        yield ts, (src, sport), (dst, dport), seq, flags, tcp[(tcp[12] >> 4) * 4:]


@dataclass
class Conversation:
    """One TCP connection to a listening port: frames per direction with their times."""

    index: int
    client: tuple
    server: tuple
    opened: float
    role: str = "namesrv"
    closed: "float | None" = None
    closed_by: "str | None" = None          # "client" or "server"
    requests: list = field(default_factory=list)    # [(ts, frame bytes)]
    responses: list = field(default_factory=list)   # [(ts, frame bytes)]


def _frames(segments, isn):
    """Reassemble one direction (retransmissions dropped) and cut it into frames."""
    buf = bytearray()
    marks = []
    nxt = isn
    for ts, seq, payload in sorted(segments, key=lambda s: (s[1] - (isn or 0)) & 0xFFFFFFFF):
        if nxt is None:
            nxt = seq
        skip = (nxt - seq) & 0xFFFFFFFF
        if skip and skip < 1 << 31:
            payload = payload[skip:]
        if not payload:
            continue
        buf += payload
        nxt = (nxt + len(payload)) & 0xFFFFFFFF
        marks.append((len(buf), ts))
    frames = []
    pos = 0
    while pos + 4 <= len(buf):
        end = pos + 4 + struct.unpack(">I", buf[pos:pos + 4])[0]
        if end > len(buf):
            break
        ts = next(t for length, t in marks if length >= end)
        frames.append((ts, bytes(buf[pos:end])))
        pos = end
    return frames


def conversations(path, roles=ROLES):
    """Every connection of the capture to a listener of one of ``roles``, in the order they
    opened."""
    packets = list(_tcp(path))
    server_ports = {dst[1] for _, _, dst, _, flags, _ in packets if flags & 0x12 == 0x02}
    conns, order = {}, []
    for ts, src, dst, seq, flags, payload in packets:
        if dst[1] in server_ports:
            key, side = (src, dst), "c2s"
        elif src[1] in server_ports:
            key, side = (dst, src), "s2c"
        else:
            continue
        if flags & 0x12 == 0x02 and side == "c2s":
            conn = {"key": key, "opened": ts, "seg": {"c2s": [], "s2c": []}, "isn": {},
                    "closed": None}
            conns.setdefault(key, []).append(conn)
            order.append(conn)
        if key not in conns:
            continue
        conn = conns[key][-1]
        if flags & 0x02:
            conn["isn"][side] = (seq + 1) & 0xFFFFFFFF
        if payload:
            conn["seg"][side].append((ts, seq, payload))
        if flags & 0x05 and conn["closed"] is None:
            conn["closed"] = (ts, "client" if side == "c2s" else "server")
    out = []
    for conn in order:
        requests = _frames(conn["seg"]["c2s"], conn["isn"].get("c2s"))
        if not requests or port_role(conn["key"][1][1]) not in roles:
            continue
        convo = Conversation(len(out), conn["key"][0], conn["key"][1], conn["opened"],
                             port_role(conn["key"][1][1]))
        convo.requests = requests
        convo.responses = _frames(conn["seg"]["s2c"], conn["isn"].get("s2c"))
        if conn["closed"] is not None:
            convo.closed, convo.closed_by = conn["closed"]
        out.append(convo)
    return out


# ------------------------------------------------------------------ events

@dataclass
class ReplayEvent:
    """``kind`` "request" (with ``request``/``expected`` commands) or "close"."""

    ts: float
    kind: str
    conversation: Conversation
    request: object = None
    request_frame: bytes = b""
    expected: object = None
    expected_frame: bytes = b""


def replay_events(path, roles=("namesrv",)):
    """The capture's requests and closes to listeners of ``roles`` in replay order (see the
    module docstring)."""
    events = []
    for convo in conversations(path, roles):
        answers = {}
        for ts, frame in convo.responses:
            cmd = decode_frame(frame)
            answers.setdefault(cmd.opaque, []).append((ts, frame, cmd))
        last = convo.opened
        for ts, frame in convo.requests:
            cmd = decode_frame(frame)
            if cmd.is_response:
                continue
            match = answers.get(cmd.opaque)
            if match and not cmd.is_oneway:
                answer_ts, answer_frame, answer = match.pop(0)
                events.append(ReplayEvent(answer_ts, "request", convo, cmd, frame, answer, answer_frame))
            else:  # applied on arrival, before anything answered after it
                events.append(ReplayEvent(ts - 1e-7, "request", convo, cmd, frame))
            last = max(last, ts)
        if convo.closed is not None:
            events.append(ReplayEvent(max(convo.closed, last), "close", convo))
    events.sort(key=lambda e: (e.ts, e.kind == "close"))
    return events


# ------------------------------------------------------------------ comparison

#: Keys of GET_NAMESRV_CONFIG that are the NameServer's own file-system paths.
PATH_KEYS = {"kvConfigPath", "configStorePath", "rocketmqHome"}
_PROPERTIES_CODES = {318, 319, 47}


def _normalise_json(value):
    if isinstance(value, dict):
        return {str(k): _normalise_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_json(v) for v in value]
    return value


def parsed_body(request_code, body, listen_port=None):
    """A body in comparable form: JSON parsed (numeric keys as strings), properties as a dict
    without the path keys (``listen_port``: the ``listenPort`` this one reports instead of the
    capture's, for a server listening where the kernel put it), anything else as bytes."""
    if body is None:
        return None
    if request_code in _PROPERTIES_CODES:
        from rocketpy.namesrv.javaprops import parse_properties
        props = parse_properties(body.decode("utf-8"))
        if listen_port is not None and "listenPort" in props:
            props["listenPort"] = str(listen_port)
        return {k: v for k, v in props.items() if k not in PATH_KEYS}
    try:
        return _normalise_json(fastjson.loads(body))
    except ValueError:
        return body


def compare(request, expected, actual, listen_port=None):
    """Differences between the recorded answer and ours (empty list: they match);
    ``listen_port``: where this server listens (GET_NAMESRV_CONFIG reports it)."""
    if expected is None:
        return [] if actual is None else [f"Java sent no answer, rocketpy sent code {actual.code}"]
    if actual is None:
        return [f"Java answered code {expected.code}, rocketpy sent nothing"]
    diffs = []
    for name in ("code", "remark", "flag", "opaque", "version", "serialize_type", "language"):
        want, got = getattr(expected, name), getattr(actual, name)
        if name == "language" and isinstance(want, str):
            from rocketpy.remoting.codes import language_from_name
            want = language_from_name(want)
        if want != got:
            diffs.append(f"{name}: Java {want!r}, rocketpy {got!r}")
    want_ext, got_ext = expected.ext_fields, actual.ext_fields
    if expected.serialize_type == 1:   # ROCKETMQ binary cannot tell {} from absent
        want_ext, got_ext = want_ext or None, got_ext or None
    if want_ext != got_ext:
        diffs.append(f"extFields: Java {want_ext!r}, rocketpy {got_ext!r}")
    want_body = parsed_body(request.code, expected.body, listen_port)
    got_body = parsed_body(request.code, actual.body)
    if want_body != got_body:
        diffs.append(f"body: Java {expected.body!r:.300}, rocketpy {actual.body!r:.300}")
    return diffs


# ------------------------------------------------------------------ driving a processor

#: capture name prefix -> the profile of the Java release that recorded it
PROFILE_OF_PREFIX = {"rmq49": "4.9", "rmq50": "5.0", "rmq53": "5.3"}


def capture_profile(path):
    """The profile name of a capture: "4.9" for rmq49-*, "5.0" for rmq50-*, "5.3" for rmq53-*."""
    return PROFILE_OF_PREFIX[Path(path).name[:5]]


def namesrv_port(path):
    """The NameServer's listening port in the capture (the first NameServer connection's)."""
    convos = conversations(path, ("namesrv",))
    return convos[0].server[1] if convos else 9876


def sc_captures():
    return sorted(PCAP_DIR.glob("*-sc-*.pcap"))


@dataclass
class ReplayResult:
    answered: int = 0            # recorded answers compared
    silent: int = 0              # requests with no recorded answer (oneway / unknown on 4.9)
    exact_frames: int = 0        # answers whose bytes equal Java's exactly
    mismatches: list = field(default_factory=list)   # (event, [differences])


def build_processor(path, tmp_dir, profile_name=None, **config):
    """A fresh NameServer like the one in the capture (its port, bindAddress 127.0.0.1)."""
    from rocketpy.namesrv import Configuration, KVConfigManager, RouteInfoManager, profile_for
    from rocketpy.namesrv.processor import DefaultRequestProcessor
    profile = profile_for(profile_name or capture_profile(path))
    tmp_dir = Path(tmp_dir)
    props = {"listenPort": str(namesrv_port(path)), "bindAddress": "127.0.0.1",
             "kvConfigPath": str(tmp_dir / "namesrv" / "kvConfig.json")}
    props.update({k: str(v) for k, v in config.items()})
    configuration = Configuration.from_properties(props, as_policies(profile), str(tmp_dir / "namesrv.conf"))
    rim = RouteInfoManager(configuration.namesrv_config, profile)
    kv = KVConfigManager(configuration.namesrv_config.kv_config_path)
    queue = []

    def submit(request):
        queue.append(request)
        return True

    processor = DefaultRequestProcessor(rim, kv, submit_unregistration=submit, profile=profile,
                                        configuration=configuration)
    processor.unregistration_queue = queue
    return processor


class NamesrvRole:
    """The NameServer side of a replay: a processor, its unregistration queue drained after
    every event, the liveness scan run before each. Another role (the controller) plugs into
    :func:`replay_capture` with the same three methods."""

    def __init__(self, processor):
        self.processor = processor
        self.rim = processor.route_info_manager

    def _drain(self):
        queue = self.processor.unregistration_queue
        if queue:
            batch = list(queue)
            queue.clear()
            self.rim.unregister_brokers(batch)

    def tick(self, now_ms):
        for request, _channel_id in self.rim.scan_not_active_broker(now_ms):
            self.processor.unregistration_queue.append(request)
        self._drain()

    def close(self, channel, now_ms):
        self.processor.unregistration_queue.extend(self.rim.on_channel_destroy(channel))
        self._drain()

    def process(self, request, channel, now_ms):
        actual = self.processor.process(request, channel, now_ms)
        self._drain()
        return actual


def replay_steps(path, processor):
    """Drive ``processor`` with the NameServer events of ``path`` (as :func:`replay_capture`,
    answers not compared), yielding the time (ms) after each event is applied."""
    from rocketpy.namesrv import Channel
    role = NamesrvRole(processor)
    for event in replay_events(path):
        now = int(event.ts * 1000)
        role.tick(now)
        channel = Channel(event.conversation.index, "127.0.0.1:1")
        if event.kind == "close":
            role.close(channel, now)
        else:
            role.process(event.request, channel, now)
        yield now


def replay_capture(path, tmp_dir, profile_name=None, processor=None, roles=None):
    """Replay the requests of ``path`` against fresh servers; compare every answer.

    ``roles`` maps a role (:data:`golden.ROLES`) to what serves it (``tick(now_ms)``,
    ``close(channel, now_ms)``, ``process(request, channel, now_ms)``); by default only the
    NameServer's connections replay, against ``processor`` or a fresh one of the capture's
    profile. Every role's events go through one clock, in the recorded order."""
    from rocketpy.namesrv import Channel
    if roles is None:
        roles = {"namesrv": NamesrvRole(processor or build_processor(path, tmp_dir,
                                                                      profile_name))}
    result = ReplayResult()
    for event in replay_events(path, tuple(roles)):
        now_ms = int(event.ts * 1000)
        for role in roles.values():
            role.tick(now_ms)
        convo = event.conversation
        role = roles[convo.role]
        channel = Channel(convo.index, f"{convo.client[0]}:{convo.client[1]}")
        if event.kind == "close":
            role.close(channel, now_ms)
            continue
        actual = role.process(event.request, channel, now_ms)
        if event.expected is None:
            result.silent += 1
        else:
            result.answered += 1
            if actual is not None and actual.encode() == event.expected_frame:
                result.exact_frames += 1
        diffs = compare(event.request, event.expected, actual)
        if diffs:
            result.mismatches.append((event, diffs))
    return result

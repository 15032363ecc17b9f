"""Helpers for the genuine-client suites (``test_clients_*``): a broker registered from a capture.

Layer: tests.  Neither genuine client (the C++ client in PyPI ``rocketmq``, npm ``ali-ons``)
registers brokers, so the broker side comes from genuine captures: a broker's REGISTER_BROKER
requests, replayed in stream order up to the first one that carries ``TopicA`` (the topic
``mqadmin updateTopic`` created), with one change: ``brokerAddr``, the address clients are
routed to, points at a :class:`fakebroker.FakeBroker`.  The JSON body (``RegisterBrokerBody``)
names no address, so body and ``bodyCrc32`` stay byte-for-byte genuine (the crc is recomputed
anyway, so the helper stays right for a capture whose body would change).  The connection
stays open while the test runs: a closed broker channel unregisters the broker.

Two worlds (:data:`WORLDS`, each also with the server as two processes, ``--workers=2``),
because the genuine NameServers differ exactly where the clients' "no route" error lives.  The C++ client asks for the default topic ``TBW102`` when a topic has
no route (``MQClientFactory::tryToFindTopicPublishInfo``) and sends through that route (the
broker auto-creates the topic), so it reports "No route info of this topic" only when
``TBW102`` is unknown too.  Every full registration in the captures carries ``TBW102``; a broker
registers with *only* the new topic right after ``updateTopic``, and 4.9.8 accepts that as a
first registration while 5.x refuses it (``registerBroker`` returns null: "register broker
failed").  So:

* ``5.3``: our default profile; ``rmq50-sc-admin-all`` replays a 5.0.0 broker's first (full)
  registration and then its ``TopicA``-only one, merged into the table as 5.x does.
* ``4.9``: ``--profile=4.9``; ``rmq49-mqadmin-updateTopic`` replays the 4.9.8 broker's
  ``TopicA``-only registration alone: a broker is registered and ``TBW102`` is unknown.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from fakebroker import FakeBroker
from serverproc import PATIENCE
from rocketpy.remoting import RemotingCommand, decode_frame, fastjson, split_frames
from rocketpy.remoting.codes import RequestCode

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"
REGISTER_BROKER = RequestCode.REGISTER_BROKER
GET_ROUTEINFO_BY_TOPIC = RequestCode.GET_ROUTEINFO_BY_TOPIC
#: the topic ``mqadmin updateTopic`` created in the captures (perm 6; 4 or 8 queues)
TOPIC = "TopicA"
DEFAULT_TOPIC = "TBW102"


@dataclass(frozen=True)
class World:
    """A NameServer profile and the genuine capture whose registrations are replayed to it."""
    name: str
    server_args: tuple[str, ...]
    capture: str

    def __str__(self):
        return self.name

    @property
    def profile(self):
        return self.name.split()[0]

    @property
    def processes(self):
        return 2 if "--workers=2" in self.server_args else 1


WORLDS = (World("5.3", (), "rmq50-sc-admin-all.pcap"),
          World("4.9", ("--profile=4.9",), "rmq49-mqadmin-updateTopic.pcap"),
          # the server as a route writer and a worker (issue 33 part 2): the same answers,
          # whichever process a client's connection lands on
          World("5.3 2 processes", ("--workers=2",), "rmq50-sc-admin-all.pcap"),
          World("4.9 2 processes", ("--profile=4.9", "--workers=2"),
                "rmq49-mqadmin-updateTopic.pcap"))
TESTS = Path(__file__).resolve().parent
CLIENTS = TESTS / "clients"


def tcp_streams(path: Path) -> dict[tuple[int, int], bytes]:
    """Payload bytes per (source port, destination port) of a loopback Ethernet/IPv4 pcap.

    The genuine captures were taken on 127.0.0.1 with nothing lost, so concatenating segments
    in capture order is the whole stream (the full decoder is ``rocketpy.capture``).
    """
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    assert magic == 0xA1B2C3D4, f"{path.name}: not a little-endian microsecond pcap"
    assert struct.unpack_from("<I", data, 20)[0] == 1, f"{path.name}: not Ethernet"
    streams: dict[tuple[int, int], bytearray] = {}
    offset = 24
    while offset + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, offset + 8)[0]
        packet = data[offset + 16:offset + 16 + caplen]
        offset += 16 + caplen
        if packet[12:14] != b"\x08\x00" or packet[14 + 9] != 6:   # IPv4, TCP
            continue
        ip = packet[14:]
        ip_total = struct.unpack_from("!H", ip, 2)[0]
        tcp = ip[(ip[0] & 0x0F) * 4:ip_total]
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            ports = struct.unpack_from("!HH", tcp)
            streams.setdefault(ports, bytearray()).extend(payload)
    return {k: bytes(v) for k, v in streams.items()}


def genuine_registrations(capture: str, topic: str = TOPIC) -> list[bytes]:
    """A capture's REGISTER_BROKER requests, in order, up to the first that carries ``topic``."""
    streams = []
    for buf in tcp_streams(FIXTURES / capture).values():
        frames, rest = split_frames(buf)
        assert rest == b"", f"{capture}: trailing partial frame"
        found = [f for f in frames
                 if (c := decode_frame(f)).code == REGISTER_BROKER and not c.is_response]
        if found:
            streams.append(found)
    assert len(streams) == 1, f"{capture}: expected one broker connection, got {len(streams)}"
    chosen = []
    for frame in streams[0]:
        chosen.append(frame)
        if topic in registered_topics(decode_frame(frame)):
            return chosen
    raise AssertionError(f"no REGISTER_BROKER in {capture} carries {topic}")


def registered_topics(request) -> dict[str, dict]:
    """Topic name -> ``TopicConfig`` (as JSON) in a JSON ``RegisterBrokerBody``."""
    assert request.ext_fields.get("compressed") == "false", "only JSON bodies are used here"
    body = fastjson.loads(request.body)
    return body["topicConfigSerializeWrapper"]["topicConfigTable"]


def redirected(frame: bytes, broker_addr: str) -> bytes:
    """A genuine REGISTER_BROKER frame re-pointed at ``broker_addr`` (ip:port)."""
    request = decode_frame(frame)
    ext = dict(request.ext_fields)
    ext["brokerAddr"] = broker_addr
    ext["bodyCrc32"] = str(zlib.crc32(request.body) & 0x7FFFFFFF)
    return replace(request, ext_fields=ext).encode()


def register_broker(namesrv_port: int, broker_addr: str, capture: str,
                    timeout: float = PATIENCE) -> tuple[socket.socket, dict[str, dict]]:
    """Replay the re-pointed registrations to our NameServer, each answered SUCCESS.

    Returns the open connection and the topics registered (name -> ``TopicConfig``, the last
    registration's wins, as the route table merges them).  Keep the socket open for the
    test's lifetime: a broker whose channel closes is unregistered
    (``RouteInfoManager.onChannelDestroy``).  The caller closes it.
    """
    sock = socket.create_connection(("127.0.0.1", namesrv_port), timeout=timeout)
    topics = {}
    try:
        for genuine in genuine_registrations(capture):
            frame = redirected(genuine, broker_addr)
            request = decode_frame(frame)
            assert not request.is_oneway
            response = _call(sock, frame)
            assert response.code == 0, (
                f"REGISTER_BROKER from {capture} answered {response.code}: {response.remark}")
            topics.update(registered_topics(request))
    except BaseException:
        sock.close()
        raise
    return sock, topics


def _call(sock: socket.socket, frame: bytes):
    """Send one request frame and read its answer (the first frame back)."""
    sock.sendall(frame)
    buf = b""
    while True:
        frames, buf = split_frames(buf)
        if frames:
            break
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("the NameServer closed the connection instead of answering")
        buf += chunk
    response = decode_frame(frames[0])
    request = decode_frame(frame)
    assert response.is_response and response.opaque == request.opaque, response
    return response


@contextlib.contextmanager
def registered_fake_broker(namesrv_port: int, capture: str):
    """A :class:`FakeBroker` that our NameServer routes ``TOPIC`` to, for the block's duration.

    ``broker.registered_topics`` maps the topics the replayed registrations carried to their
    ``TopicConfig`` (``writeQueueNums``, ``perm``, ...).
    """
    with FakeBroker() as broker:
        sock, broker.registered_topics = register_broker(namesrv_port, broker.addr, capture)
        try:
            yield broker
        finally:
            sock.close()


def query_route(namesrv_port: int, topic: str, *, version: int, language: int,
                timeout: float = PATIENCE):
    """GET_ROUTEINFO_BY_TOPIC as a client of ``version``/``language`` sends it; the answer."""
    request = RemotingCommand.request(GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=1,
                                      version=version, language=language)
    with socket.create_connection(("127.0.0.1", namesrv_port), timeout=timeout) as sock:
        return _call(sock, request.encode())


class RecordingProxy:
    """A TCP relay on 127.0.0.1 to ``port`` that keeps every byte each way, per connection: what
    a genuine client asked and what it was answered, read as frames afterwards."""

    def __init__(self, port: int):
        self.port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[tuple[bytearray, bytearray]] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:          # closed: the test is over
                return
            server = socket.create_connection(("127.0.0.1", self.port))
            up, down = bytearray(), bytearray()
            self.connections.append((up, down))
            for src, dst, kept in ((client, server, up), (server, client, down)):
                thread = threading.Thread(target=self._pump, args=(src, dst, kept), daemon=True)
                self._threads.append(thread)
                thread.start()

    @staticmethod
    def _pump(src, dst, kept):
        try:
            while data := src.recv(1 << 16):
                kept += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def exchanges(self) -> list[tuple[RemotingCommand, RemotingCommand | None]]:
        """``(request, its answer or None)`` of every connection, in order."""
        out = []
        for up, down in self.connections:
            answers = {a.opaque: a for a in map(decode_frame, split_frames(bytes(down))[0])}
            out += [(r, answers.get(r.opaque)) for r in map(decode_frame, split_frames(bytes(up))[0])]
        return out

    def close(self):
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)   # wakes the accept (Linux)
        self.listener.close()
        for thread in self._threads[1:]:
            thread.join(5)


def run_client(argv: list[str], *, timeout: float, cwd: Path | None = None) -> dict:
    """Run one client driver script; its last stdout line is a JSON result.

    The child gets a temporary HOME (the C++ client writes ``$HOME/logs``) that is removed
    afterwards, and is killed after ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory(prefix="rocketpy-client-home-") as home:
        env = dict(os.environ, HOME=home)
        try:
            proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{argv[:2]} did not finish within {timeout} s; "
                                 f"stderr: {exc.stderr!r}") from None
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, (
        f"{' '.join(argv[:2])} exited {proc.returncode}\nstdout: {proc.stdout}\n"
        f"stderr: {proc.stderr}")
    result = json.loads(lines[-1])
    result["stderr"] = proc.stderr
    return result


def tool(name: str) -> str:
    """Absolute path of an executable on PATH, or a failing assertion that says so."""
    path = shutil.which(name)
    assert path, f"{name} is not on PATH: the genuine-client suites need it (see .ci/run)"
    return path

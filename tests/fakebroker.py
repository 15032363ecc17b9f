"""Test-only stand-in for a broker's *client-facing* port: records what genuine clients send.

Layer: tests (plain sockets and threads, the ``rocketpy.remoting`` codec; no Twisted, so it can
run beside a client subprocess without a reactor).  It mirrors the answers of Java's broker
``SendMessageProcessor`` just far enough for a genuine producer to count a send as done: SUCCESS
with the ``SendMessageResponseHeader`` fields ``msgId`` (16 bytes as 32 upper-case hex: store
host IPv4, port, commit-log offset, like ``MessageDecoder.createMessageId``), ``queueId`` and
``queueOffset`` (all ``@CFNotNull``), plus the ``MSG_REGION``/``TRACE_ON`` ext fields the Java
broker adds.  Every other request (HEART_BEAT, UNREGISTER_CLIENT, ...) gets a bare SUCCESS.
The route to this port comes from our NameServer, filled by replaying a genuine broker's
REGISTER_BROKER (see ``clientutil``); this file never talks to the NameServer.

Use in-process (``with FakeBroker() as broker: broker.port, broker.requests``) or standalone:
``python tests/fakebroker.py --port 0 --record requests.jsonl`` prints the bound port on its
first stdout line and appends one JSON object per request to the record file.
"""
from __future__ import annotations

import argparse
import base64
import json
import socket
import socketserver
import sys
import threading
import time
from pathlib import Path

try:
    import rocketpy  # noqa: F401
except ImportError:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rocketpy.remoting import FrameSplitter, RemotingCodecError, decode_frame
from rocketpy.remoting.codes import RequestCode, ResponseCode

SEND_MESSAGE = RequestCode.SEND_MESSAGE
SEND_MESSAGE_V2 = RequestCode.SEND_MESSAGE_V2
SEND_BATCH_MESSAGE = RequestCode.SEND_BATCH_MESSAGE
SUCCESS = ResponseCode.SUCCESS
#: answers carry a 4.9.8 broker's version (MQVersion ordinal); neither client checks it
BROKER_VERSION = 409
#: SEND_MESSAGE_V2 abbreviates SendMessageRequestHeader's fields to one letter each
#: (Java ``SendMessageRequestHeaderV2``); records carry both spellings' ``topic`` under "topic"
_V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
             "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
             "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch",
             "n": "brokerName"}


def send_header(request):
    """A SEND_MESSAGE(_V2) request's header with the long field names."""
    ext = dict(request.ext_fields or {})
    if request.code == SEND_MESSAGE_V2:
        return {_V2_NAMES.get(k, k): v for k, v in ext.items()}
    return ext


def message_id(host: str, port: int, offset: int) -> str:
    """Java ``MessageDecoder.createMessageId``: IPv4 + int32 port + int64 offset, hex upper."""
    raw = socket.inet_aton(host) + port.to_bytes(4, "big") + offset.to_bytes(8, "big")
    return raw.hex().upper()


class FakeBroker:
    """A threaded listener on 127.0.0.1 that records requests and answers them SUCCESS."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, record_path: str | None = None):
        self.requests: list[dict] = []
        #: topic -> TopicConfig our NameServer was told this broker serves (set by ``clientutil``)
        self.registered_topics: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._offset = 0
        self._record = open(record_path, "a", encoding="utf-8") if record_path else None
        broker = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                broker._serve(self.request, "%s:%d" % self.client_address[:2])

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._server = Server((host, port), Handler)
        self.host, self.port = self._server.server_address[:2]
        self.addr = f"{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        if self._record:
            self._record.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def sends(self):
        """The recorded SEND_MESSAGE / SEND_MESSAGE_V2 / batch requests."""
        with self._lock:
            return [r for r in self.requests
                    if r["code"] in (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)]

    def wait_for(self, predicate, timeout: float):
        """Block until ``predicate(requests)`` is true; returns the requests, or None on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.requests):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return list(self.requests)

    # -- one connection ---------------------------------------------------------------------
    def _serve(self, sock, peer):
        splitter = FrameSplitter()
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            try:
                frames = splitter.feed(data)
                for frame in frames:
                    request = decode_frame(frame)
                    response = self._answer(request, peer)
                    if response is not None:
                        sock.sendall(response.encode())
            except (RemotingCodecError, OSError):
                return  # Java closes the channel on a decode error

    def _answer(self, request, peer):
        language = request.language
        entry = {"peer": peer, "code": request.code, "flag": request.flag,
                 "language": int(language) if isinstance(language, int) else language,
                 "version": request.version, "ext_fields": request.ext_fields,
                 "body_b64": base64.b64encode(request.body or b"").decode("ascii")}
        is_send = request.code in (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)
        with self._changed:
            offset, self._offset = self._offset, self._offset + 1
            if is_send:
                header = send_header(request)
                entry["topic"] = header.get("topic")
                entry["body"] = (request.body or b"").decode("utf-8", "replace")
                entry["reply"] = {
                    "msgId": message_id(self.host, self.port, offset * 256),
                    "queueId": str(header.get("queueId", "0")), "queueOffset": str(offset),
                    "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
            self.requests.append(entry)
            if self._record:
                self._record.write(json.dumps(entry) + "\n")
                self._record.flush()
            self._changed.notify_all()
        if request.is_response or request.is_oneway:
            return None
        if is_send:
            return request.create_response(SUCCESS, ext_fields=entry["reply"],
                                           version=BROKER_VERSION)
        return request.create_response(SUCCESS, version=BROKER_VERSION)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", help="append one JSON line per request to this file")
    parser.add_argument("--seconds", type=float, default=120.0, help="stop after this long")
    args = parser.parse_args(argv)
    broker = FakeBroker(args.host, args.port, args.record).start()
    print(broker.port, flush=True)
    try:
        time.sleep(args.seconds)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

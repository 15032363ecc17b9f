#!/usr/bin/env python3
"""Issue 31's holes 2-5 against the server as a user runs it (``twistd -n rocketnamesrv`` on
127.0.0.0/8), with the numbers its closing note gives:

    python3 bench/hostile_decodes.py [--part header|bodies|controller|mappings|binding|pool]

* ``header`` (hole 4): a 15 MiB JSON header ``{code:105,opaque:1,a:1,...}``; a second
  connection asks GET_ROUTEINFO_BY_TOPIC in a loop: its longest wait is the server's freeze.
* ``bodies`` (hole 4): the same with a 16 MiB QUERY_DATA_VERSION body in fastjson's lenient
  forms, and with 16 MiB of UPDATE_NAMESRV_CONFIG properties.
* ``controller`` (hole 4): a 15 MiB lenient ALTER_SYNC_STATE_SET body to the controller port of a
  server with ``enableControllerInNamesrv``; the querier asks GET_METADATA_INFO there.
* ``mappings`` (hole 2): the server's resident memory before, after eight registrations of no
  topic and 3 static topic mappings x 250,000 queues (compressed), and after their connections
  closed and the brokers expired (``scanNotActiveBrokerInterval`` 1 s, timeout 3 s);
  ``mappings-unbounded`` the same with the mapping bounds and the decode budget off.
* ``binding`` (hole 3): with ``brokerIdentityBinding``, a registration of a free name from
  127.0.0.2 carrying a mapping of broker-a (live, registered from 127.0.0.1).
* ``pool`` (hole 5): 4 hosts x 4 compressed bodies of ~7 KB in fastjson's lenient forms, then a
  genuine registration from a fifth host: its answer and when it came, and when the last of the
  16 was answered (how long the decode pool was held).

The server runs from this checkout (``PYTHONPATH``: see ``tests/serverproc.py``). Timings depend
on the machine and its load: say which when you quote them.
"""
import argparse
import json
import os
import struct
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from brokerbody import register_body  # noqa: E402
from serverproc import RemotingClient, running_server  # noqa: E402
from rocketpy.remoting import RemotingCommand, bodies  # noqa: E402

MIB = 1024 * 1024


class Querier(threading.Thread):
    """Asks ``code`` again and again on its own connection; ``longest`` is its longest wait."""

    def __init__(self, port, code, ext):
        super().__init__(daemon=True)
        self.client = RemotingClient(port, timeout=600)
        self.code, self.ext = code, ext
        self.longest = 0.0
        self.answers = 0
        self.running = True

    def run(self):
        while self.running:
            started = time.perf_counter()
            self.client.call(self.code, self.ext)
            self.longest = max(self.longest, time.perf_counter() - started)
            self.answers += 1

    def stop(self):
        self.running = False
        self.join(600)
        self.client.close()


def _frame(code, ext, body, header=None, opaque=9):
    if header is None:
        return RemotingCommand.request(code, ext, body, opaque=opaque, version=479).encode()
    body = body or b""
    return (struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body)


def _attack(port, querier_code, querier_ext, frame, label):
    """Send ``frame`` while a querier asks: print the querier's longest wait and what the
    attacker got (an answer, or the connection closed) and when."""
    querier = Querier(port, querier_code, querier_ext)
    querier.start()
    time.sleep(0.5)
    querier.longest = 0.0
    attacker = RemotingClient(port, timeout=600)
    started = time.perf_counter()
    attacker.send_frame(frame)
    try:
        answer = attacker.read_frame()
        outcome = f"answered code {answer.code} ({(answer.remark or '')[:70]!r})"
    except ConnectionError:
        outcome = "connection closed"
    took = time.perf_counter() - started
    time.sleep(0.5)
    querier.stop()
    attacker.close()
    print(f"{label}: {outcome} after {took:.2f} s; longest wait of another client "
          f"{querier.longest * 1000:.0f} ms ({querier.answers} answers meanwhile)")


def part_header():
    header = b"{code:105,opaque:1," + b"a:1," * ((15 * MIB - 20) // 4) + b"}"
    with running_server() as server:
        _attack(server.port, 105, {"topic": "TBW102"}, _frame(0, None, None, header),
                "15 MiB lenient header")


BROKER = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
          "brokerId": "0"}


def part_bodies():
    lenient = b"{counter:1," + b"a:1," * ((16 * MIB - 4096) // 4) + b"}"
    props = b"a=1\n" * ((16 * MIB - 4096) // 4)
    with running_server() as server:
        _attack(server.port, 105, {"topic": "TBW102"}, _frame(322, BROKER, lenient),
                "16 MiB lenient QUERY_DATA_VERSION body")
        _attack(server.port, 105, {"topic": "TBW102"}, _frame(318, None, props),
                "16 MiB UPDATE_NAMESRV_CONFIG properties")


def part_controller():
    import socket
    import tempfile
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    body = b"{syncStateSet:[1]," + b"a:1," * ((15 * MIB - 40) // 4) + b"syncStateSetEpoch:1}"
    ext = {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1", "invokeTime": "0"}
    with tempfile.TemporaryDirectory() as store, running_server(
            "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{port}", "-D", "controllerDLegerSelfId=n0",
            "-D", f"controllerStorePath={store}", "-D", "bindAddress=127.0.0.1"):
        time.sleep(1)
        _attack(port, 1005, None, _frame(1001, ext, body), "15 MiB lenient ALTER_SYNC_STATE_SET")


def _rss_mib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _mapping_body(name, mappings, queues):
    ids = {i: i for i in range(queues)}
    wrapper = {"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {},
               "topicQueueMappingInfoMap": {f"{name}-M{i}": {
                   "topic": f"{name}-M{i}", "bname": name, "totalQueues": queues, "epoch": 1,
                   "currIdMap": ids} for i in range(mappings)}}
    body = bodies.RegisterBrokerBody.from_json(json.dumps(
        {"filterServerList": [], "topicConfigSerializeWrapper": wrapper}).encode())
    return body.encode(compress=True)


def _register_frame(name, addr, body, compressed, opaque=1, timeout_ms=None):
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "brokerId": "0",
           "haServerAddr": addr, "compressed": str(compressed).lower(),
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    if timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = str(timeout_ms)
    return RemotingCommand.request(103, ext, body, opaque=opaque, version=479).encode()


def part_mappings(*extra):
    with running_server("-D", "scanNotActiveBrokerInterval=1000", *extra) as server:
        pid = server.proc.pid
        time.sleep(1)
        before = _rss_mib(pid)
        clients, codes = [], []
        for n in range(8):
            body = _mapping_body(f"m{n}", 3, 250_000)
            client = RemotingClient(server.port, timeout=600, source=f"127.0.1.{n + 1}")
            client.send_frame(_register_frame(f"m{n}", f"127.0.1.{n + 1}:10911", body, True,
                                              timeout_ms=3000))
            answer = client.read_frame()
            codes.append((answer.code, (answer.remark or "")[:60]))
            clients.append(client)
        during = _rss_mib(pid)
        for client in clients:
            client.close()
        time.sleep(15)     # the brokers expire; the memory service releases what they held
        after = _rss_mib(pid)
        print(f"8 registrations of 3 mappings x 250,000 queues ({len(body)} bytes each): "
              f"answers {sorted(set(codes))}")
        print(f"resident memory: {before:.0f} MiB before, {during:.0f} MiB after the "
              f"registrations (peak {_rss_mib(pid, 'VmHWM'):.0f} MiB; brokers of a 3 s timeout "
              f"may have expired meanwhile), {after:.0f} MiB once every connection closed")


def part_mappings_unbounded():
    """The same with the mapping bounds and the decode budget off: the mappings are taken, and
    go with their groups."""
    part_mappings("-D", "namesrvMaxMappingQueues=0", "-D", "registerBrokerDecodeBudget=0",
                  "-D", "namesrvMaxTopicBrokerPairs=0")


def part_binding():
    plain = lambda mappings: json.dumps({   # noqa: E731
        "filterServerList": [], "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": 1, "timestamp": 1},
            "topicConfigTable": {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4,
                                     "perm": 6} for t in ("VT", "VT2")},
            "topicQueueMappingInfoMap": mappings}}).encode()
    with running_server("-D", "brokerIdentityBinding=true") as server:
        genuine = RemotingClient(server.port, source="127.0.0.1")
        genuine.send_frame(_register_frame("broker-a", "127.0.0.1:10911", plain({}), False))
        print(f"broker-a from 127.0.0.1: code {genuine.read_frame().code}")
        evil = RemotingClient(server.port, source="127.0.0.2")
        mapping = {"VT": {"topic": "VT", "bname": "broker-a", "epoch": 999, "totalQueues": 4,
                          "currIdMap": {0: 0, 1: 1, 2: 2, 3: 3}}}
        evil.send_frame(_register_frame("evil", "127.0.0.2:10911", plain(mapping), False))
        answer = evil.read_frame()
        print(f"evil from 127.0.0.2 with a mapping of broker-a: code {answer.code} "
              f"({answer.remark!r})")
        evil.close()
        route = RemotingClient(server.port).call(105, {"topic": "VT"})
        held = json.loads(route.body).get("topicQueueMappingByBroker") if route.body else None
        print(f"route of VT after the attacker left: topicQueueMappingByBroker = {held}")
        genuine.close()


def _lenient_bomb(parts=4, size=4 * MIB - 64):
    dv = b"{counter:1" + b"/**/" * ((size - 11) // 4) + b"}"
    mapping = b"{topic:'T',bname:'b'" + b"/**/" * ((size - 21) // 4) + b"}"
    raw = (struct.pack(">i", len(dv)) + dv + struct.pack(">i", 0) + struct.pack(">i", 2) + b"[]"
           + struct.pack(">i", parts - 1) + (struct.pack(">i", len(mapping)) + mapping)
           * (parts - 1))
    return zlib.compress(raw, 9)


def part_pool():
    bomb = _lenient_bomb()
    genuine = bodies.RegisterBrokerBody.from_json(register_body(
        [f"TopicV{i}" for i in range(100)])).encode(compress=True)
    with running_server() as server:
        bombers = []
        started = time.perf_counter()
        for host in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
            for _ in range(4):
                client = RemotingClient(server.port, timeout=600, source=host)
                client.send_frame(_register_frame("bomb", "10.9.9.9:1", bomb, True))
                bombers.append(client)
        time.sleep(0.3)
        victim = RemotingClient(server.port, timeout=600, source="127.0.0.6")
        sent = time.perf_counter()
        victim.send_frame(_register_frame("broker-v", "127.0.0.6:10911", genuine, True))
        answer = victim.read_frame()
        served = time.perf_counter() - sent
        codes = []
        for client in bombers:
            codes.append(client.read_frame().code)
        held = time.perf_counter() - started
        print(f"16 lenient bombs of {len(bomb)} bytes from 4 hosts: answers "
              f"{sorted(codes)}; the last after {held:.1f} s")
        print(f"genuine registration from a fifth host: code {answer.code} "
              f"({(answer.remark or '')[:50]!r}) after {served * 1000:.0f} ms")
        for client in bombers + [victim]:
            client.close()


PARTS = {"header": part_header, "bodies": part_bodies, "controller": part_controller,
         "mappings": part_mappings, "mappings-unbounded": part_mappings_unbounded,
         "binding": part_binding, "pool": part_pool}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=sorted(PARTS), action="append")
    for name in parser.parse_args().part or PARTS:
        print(f"-- {name}")
        PARTS[name]()


if __name__ == "__main__":
    main()

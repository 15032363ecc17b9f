"""End to end (issue 12, part 2; issue 20): KV writes leave the reactor thread.

A real ``twistd rocketnamesrv``:

* A write that cannot finish does not stop the server. The KV log's segment is made a named
  pipe that nobody reads, so the append of the first PUT_KV_CONFIG blocks in ``open()`` (a disk
  that hangs, an NFS server gone). That PUT is not answered -- it is not durable -- but route
  queries and GET_KV_CONFIG from other connections are (and do not see it: a change reaches
  memory once durable). Once the pipe is read the append goes on and fails (a pipe cannot be
  ``fsync``-ed): the PUT is answered SYSTEM_ERROR, never SUCCESS for a change that is not on
  disk, it changed nothing, and the next PUT is written (to a new segment). (Written on the
  reactor thread, as before issue 12, the server answered nobody while the write hung.)
* A flood: two connections pipeline PUT_KV_CONFIG with 64 KiB values while a third asks for a
  route again and again. Every put and every query succeeds, and every acknowledged put is on
  disk (``bench/kv_flood.py`` prints the route latencies, old code against new).
"""
import os
import socket
import threading
import time

import pytest

from rocketpy.remoting import RemotingCommand
from serverproc import PATIENCE, RemotingClient, running_server
from test_e2e_server import register

pytestmark = pytest.mark.network

VALUE = 64 * 1024


def _put(client, key, value):
    return client.call(100, {"namespace": "ns", "key": key, "value": value})


def test_a_write_that_cannot_finish_does_not_stop_the_server(tmp_path):
    kv_dir = tmp_path / "kv"
    kv_dir.mkdir()
    kv_path = kv_dir / "kvConfig.json"
    fifo = kv_dir / "kvConfig.json.log.1"                # where the first append goes
    with running_server(kv_path=str(kv_path)) as server:
        os.mkfifo(fifo)
        broker = RemotingClient(server.port)
        register(broker)
        writer = RemotingClient(server.port)
        writer.send_frame(RemotingCommand.request(100, {"namespace": "ns", "key": "k", "value": "v1"},
                                                  opaque=1, version=479).encode())
        time.sleep(0.3)     # the write is blocked in open() (were it later, less is shown)
        client = RemotingClient(server.port)
        for _ in range(20):                              # everyone else is served meanwhile
            assert client.call(105, {"topic": "TopicA"}).code == 0
        got = client.call(101, {"namespace": "ns", "key": "k"})
        assert got.code == 22                            # not in memory before it is durable
        writer.sock.settimeout(0.5)
        with pytest.raises(socket.timeout):              # not durable: not acknowledged
            writer.read_frame()
        with open(fifo, "rb") as pipe:                   # the disk comes back
            written = pipe.read()
        assert written == b'["ns","k","v1"]\n'           # its record
        writer.sock.settimeout(PATIENCE)
        answer = writer.read_frame()
        assert (answer.opaque, answer.code) == (1, 1), answer
        assert answer.remark.startswith("the KV config could not be written to disk: "), answer
        assert client.call(101, {"namespace": "ns", "key": "k"}).code == 22   # refused: no change
        assert _put(writer, "k", "v2").code == 0
        os.unlink(fifo)                                  # (only so that it can be read)
        assert server.kv_table() == {"ns": {"k": "v2"}}
        for c in (broker, writer, client):
            c.close()


class _Flood(threading.Thread):
    """One connection pipelining ``count`` puts of 64 KiB values (keys k0..k7), reading the
    answers as they come."""

    def __init__(self, port, name, count):
        super().__init__(daemon=True)
        self.client = RemotingClient(port)
        self.name_, self.count = name, count
        self.acked = {}                                  # key -> last acknowledged value
        self.codes = []

    def run(self):
        frames = []
        values = []
        for i in range(self.count):
            key = f"{self.name_}-k{i % 8}"
            value = f"{self.name_}:{i}:" + "x" * VALUE
            values.append((key, value[:VALUE]))
            frames.append(RemotingCommand.request(100, {"namespace": "ns", "key": key,
                                                        "value": value[:VALUE]},
                                                  opaque=i + 1, version=479).encode())
        sender = threading.Thread(target=lambda: [self.client.send_frame(f) for f in frames],
                                  daemon=True)
        sender.start()
        for _ in range(self.count):
            answer = self.client.read_frame()
            self.codes.append(answer.code)
            if answer.code == 0:
                key, value = values[answer.opaque - 1]
                self.acked[key] = value
        sender.join(PATIENCE)
        self.client.close()


def test_route_queries_and_puts_all_succeed_during_a_kv_flood(tmp_path):
    with running_server() as server:
        broker = RemotingClient(server.port)
        register(broker)
        floods = [_Flood(server.port, name, 60) for name in ("a", "b")]
        for flood in floods:
            flood.start()
        client = RemotingClient(server.port)
        queries = []
        while any(f.is_alive() for f in floods):
            queries.append(client.call(105, {"topic": "TopicA"}).code)
        for flood in floods:
            flood.join(PATIENCE)
            assert flood.codes == [0] * flood.count
        assert queries and set(queries) == {0}
        table = server.kv_table()["ns"]
        for flood in floods:
            for key, value in flood.acked.items():
                assert table[key] == value               # every acknowledged put is on disk
        client.close()
        broker.close()

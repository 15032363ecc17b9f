"""End to end (issue 12, part 5): the process behaves like a well-run service.

A real ``twistd -n rocketnamesrv``: SIGTERM ends it with exit status 0 (twistd re-raised the
signal: -15); a request followed by a half-close (``shutdown(SHUT_WR)``) is still answered,
also when its answer waits for the writer or the decode pool; an oversized web request line
gets HTTP 414 (a long header 431), not a dropped connection; a busy listen port, a bad value,
an unreadable accounts file or a broken KV file is one line on the way out, status 1, no
traceback and no ``--help``.
"""
import os
import re
import signal
import socket
import subprocess
import zlib

import pytest

from brokerbody import register_body
from rocketpy.remoting import RemotingCommand, decode_frame
from serverproc import PATIENCE, REPO_ROOT, RemotingClient, running_server, server_command

pytestmark = pytest.mark.network


def _answers_after_half_close(port, frames):
    """Send ``frames``, shut the sending side, read until the server closes: the answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    sock.sendall(b"".join(frames))
    sock.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    sock.close()
    answers = []
    while data:
        end = 4 + int.from_bytes(data[:4], "big")
        answers.append(decode_frame(data[:end]))
        data = data[end:]
    return answers


def _register_frame(opaque, topics):
    body = register_body(topics, 1)
    return RemotingCommand.request(
        103, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
              "haServerAddr": "127.0.0.1:10912", "brokerId": "0", "compressed": "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body, opaque=opaque,
        version=479).encode()


def test_sigterm_exits_zero_after_a_clean_stop():
    with running_server() as server:
        client = RemotingClient(server.port)
        assert client.call(100, {"namespace": "ns", "key": "k", "value": "v"}).code == 0
        client.close()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(PATIENCE) == 0
        server.wait_for_log(r"Received SIGTERM, shutting down")
        assert '"k":"v"' in server.kv_path.read_text()


def test_requests_before_a_half_close_are_answered():
    with running_server() as server:
        route = RemotingCommand.request(105, {"topic": "TopicA"}, opaque=1, version=479).encode()
        [answer] = _answers_after_half_close(server.port, [route])
        assert (answer.opaque, answer.code) == (1, 17)
        put = RemotingCommand.request(100, {"namespace": "ns", "key": "k", "value": "v"},
                                      opaque=2, version=479).encode()
        got = RemotingCommand.request(101, {"namespace": "ns", "key": "k"}, opaque=3,
                                      version=479).encode()
        answers = _answers_after_half_close(server.port, [put, got])      # after the writer
        assert [(a.opaque, a.code) for a in answers] == [(2, 0), (3, 0)]
        big = _register_frame(4, [f"Topic{i}" for i in range(2000)])       # the decode pool
        route = RemotingCommand.request(105, {"topic": "Topic7"}, opaque=5, version=479).encode()
        answers = _answers_after_half_close(server.port, [big, route])
        assert [(a.opaque, a.code) for a in answers] == [(4, 0), (5, 0)]


def test_oversized_web_request_line_gets_414():
    with running_server("--web=tcp:0:interface=127.0.0.1") as server:
        line = server.wait_for_log(r"rocketpy web endpoint on http://\S+")
        port = int(re.search(r"http://[\d.]+:(\d+)/", line).group(1))
        for request, status in (
                (b"GET /?q=" + b"x" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"414"),
                (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 20_000 + b"\r\n\r\n", b"431"),
                (b"GET /api/summary?q=" + b"x" * 2_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"200")):
            sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
            sock.sendall(request)
            reply = sock.recv(1 << 16)
            sock.close()
            assert reply.split(b"\r\n", 1)[0].startswith(b"HTTP/1.1 " + status), reply[:80]


def _start_fails(*args, home=None):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1",
               HOME=str(home or REPO_ROOT))
    return subprocess.run(server_command(*args, listen=None), capture_output=True, text=True,
                          timeout=60, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)


def _one_line(proc, pattern):
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    lines = [line for line in output.splitlines() if "rocketnamesrv: " in line]
    assert len(lines) == 1 and re.search(pattern, lines[0]), output
    assert "Traceback" not in output and "Examples:" not in output, output


def test_busy_port_is_one_line(tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        proc = _start_fails(f"--listen=tcp:{port}:interface=127.0.0.1",
                            f"--kvConfigPath={tmp_path / 'kv.json'}")
    finally:
        busy.close()
    _one_line(proc, rf"rocketnamesrv: cannot listen on tcp:{port}:interface=127.0.0.1: "
                    r".*Address already in use")


def test_bad_settings_are_one_line(tmp_path):
    kv = tmp_path / "kv.json"
    listen = "--listen=tcp:0:interface=127.0.0.1"
    _one_line(_start_fails(listen, f"--kvConfigPath={kv}", "-D", "namesrvMaxTopics=lots"),
              r"rocketnamesrv: namesrvMaxTopics='lots' in -D: expected an integer >= 0")
    _one_line(_start_fails(listen, f"--kvConfigPath={kv}", "-D", "aclEnable=true",
                           "-D", f"aclConfigPath={tmp_path / 'missing.yml'}"),
              r"rocketnamesrv: aclConfigPath .*missing.yml: \[Errno 2\]")
    kv.write_text('{"configTable":')
    _one_line(_start_fails(listen, f"--kvConfigPath={kv}"),
              r"rocketnamesrv: cannot load the KV config: .*kv.json")
    _one_line(_start_fails(listen, "--profile=6.0"), r"unknown NameServer profile '6.0'")

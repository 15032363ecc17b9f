"""End to end: ``twistd -n rocketnamesrv`` as a subprocess on 127.0.0.1, driven with real sockets.

Routes appear on registration, survive, and disappear on a graceful close, on a kill (reset), on
expiry and on idle; a never-reading client does not make the server buffer without bound; a
broken frame closes only its own connection; TLS modes; SIGTERM flushes the KV config; the
mqnamesrv-style options (-c, -p) and the console script.
"""
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import zlib

import pytest

from rocketpy.remoting import RemotingCommand
from serverproc import PATIENCE, REPO_ROOT, RemotingClient, running_server, server_command, wait_until
from brokerbody import register_body

pytestmark = pytest.mark.network


def register(client, broker="broker-a", addr="127.0.0.1:10911", topics=("TopicA", "TopicB"),
             counter=1, **ext):
    body = register_body(topics, counter)
    fields = {"brokerName": broker, "brokerAddr": addr, "clusterName": "DefaultCluster",
              "haServerAddr": "127.0.0.1:10912", "brokerId": "0", "compressed": "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    fields.update(ext)
    answer = client.call(103, fields, body, version=413)
    assert answer.code == 0, answer
    return answer


def route_code(port, topic="TopicA"):
    client = RemotingClient(port)
    try:
        return client.call(105, {"topic": topic}).code
    finally:
        client.close()


def wait_for_route_code(port, code, client=None):
    """Until the route query answers ``code`` (on ``client``, else on a new connection each
    time), however long that takes."""
    ask = (lambda: client.call(105, {"topic": "TopicA"}).code) if client else (lambda: route_code(port))
    wait_until(lambda: ask() == code, f"the route query to answer {code}")


def assert_unregistered_by_the_close(server, broker="broker-a"):
    """The broker left through its channel's close event (submitted at once), never through the
    120 s expiry: what tells them apart is the server's log, not a clock."""
    server.wait_for_log(rf"the broker's channel destroyed.*broker_name='{broker}'.*submit result: True")
    assert not server.log_lines(r"The broker channel expired"), server.log_text()[-3000:]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_route_appears_survives_and_goes_with_graceful_close():
    with running_server() as server:
        broker = RemotingClient(server.port)
        assert route_code(server.port) == 17
        register(broker)
        assert route_code(server.port) == 0
        for counter in range(2, 5):
            register(broker, counter=counter)
            assert route_code(server.port) == 0
        broker.close()
        wait_for_route_code(server.port, 17)
        assert_unregistered_by_the_close(server)


def test_killed_broker_route_gone_at_once():
    """A reset (kill -9) unregisters on the close event, not after 120 s of silence."""
    with running_server() as server:
        broker = RemotingClient(server.port)
        register(broker)
        watcher = RemotingClient(server.port)
        broker.reset()
        wait_for_route_code(server.port, 17, client=watcher)
        assert_unregistered_by_the_close(server)


def test_expiry_closes_the_silent_brokers_channel():
    with running_server("-D", "scanNotActiveBrokerInterval=100") as server:
        broker = RemotingClient(server.port)
        register(broker, heartbeatTimeoutMillis="800", enableActingMaster="false")
        assert route_code(server.port) == 0
        assert broker.is_closed_by_server()
        assert route_code(server.port) == 17
        server.wait_for_log(r"The broker channel expired")


def test_idle_connection_closed_and_unregistered():
    """Closed once silent for the configured second: never before it (the clock starts before
    the last request, so a busy machine only makes the close later), and before the default
    120 s would have closed it (the wait's only bound: the close is the server's signal)."""
    with running_server("-D", "serverChannelMaxIdleTimeSeconds=1") as server:
        broker = RemotingClient(server.port)
        start = time.monotonic()
        register(broker)
        assert broker.is_closed_by_server(timeout=120)
        assert time.monotonic() - start >= 1.0
        server.wait_for_log(r"IDLE exception")
        wait_for_route_code(server.port, 17)


def test_broken_frame_closes_only_that_connection():
    with running_server() as server:
        good = RemotingClient(server.port)
        register(good)
        bad = RemotingClient(server.port)
        header = b"{this is not json"
        bad.send_frame((4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header)
        assert bad.is_closed_by_server()
        oversized = RemotingClient(server.port)
        oversized.send_frame((64 * 1024 * 1024).to_bytes(4, "big"))
        assert oversized.is_closed_by_server()
        assert good.call(105, {"topic": "TopicA"}).code == 0
        server.wait_for_log(r"decode exception")


def test_never_reading_client_does_not_grow_the_server():
    """The server stops reading a peer that reads none of its answers: it says so (debug), and
    the peer's sends then block for good; bytes, not seconds, bound the loop."""
    with running_server("--logLevel=debug") as server:
        broker = RemotingClient(server.port)
        register(broker, topics=[f"Topic{i}" for i in range(50)] + ["TopicA"])
        baseline = rss_kib(server.proc.pid)
        hog = socket.create_connection(("127.0.0.1", server.port))
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.setblocking(False)
        paused = rf"Channel\[127\.0\.0\.1:{hog.getsockname()[1]}\] auto-read is disabled"
        request = RemotingCommand.request(105, {"topic": "TopicA"}, opaque=1, version=479).encode()
        burst = request * 2000
        sent = 0
        while sent < 100 * len(burst):
            try:
                sent += hog.send(burst)
            except BlockingIOError:      # full: the server is slow, or stopped reading us
                if server.log_lines(paused):
                    break
                time.sleep(0.01)
        # the server stopped reading us long before we could offer it all
        assert server.log_lines(paused) and sent < 100 * len(burst), sent
        assert broker.call(105, {"topic": "TopicA"}).code == 0  # others are still served
        grown = rss_kib(server.proc.pid) - baseline
        assert grown < 64 * 1024, f"server grew by {grown} KiB"
        hog.close()


def test_tls_permissive_serves_both_enforcing_refuses_plain():
    import OpenSSL  # noqa: F401  (twisted[tls] is an install dependency)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    request = RemotingCommand.request(105, {"topic": "x"}, opaque=9, version=479).encode()
    with running_server() as server:  # permissive is the default, with a test-mode certificate
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port))) as tls:
            tls.sendall(request)
            assert b'"opaque":9' in tls.recv(65536)
        assert route_code(server.port, "x") == 17
    with running_server("-D", "tls.server.mode=enforcing") as server:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port))) as tls:
            tls.sendall(request)
            assert b'"opaque":9' in tls.recv(65536)
        plain = RemotingClient(server.port)
        plain.send_frame(request)
        assert plain.is_closed_by_server()
    with running_server("-D", "tls.server.mode=disabled") as server:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port))):
                pass
        assert route_code(server.port, "x") == 17


def _served_serial(tls):
    from cryptography import x509
    return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_tls_certificate_reloads_for_new_connections(tmp_path):
    from test_transport_tls import _cert, _serial_of
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    live, renewed = tmp_path / "live", tmp_path / "renewed"
    live.mkdir()
    renewed.mkdir()
    cert, key = _cert(live)
    new_cert, new_key = _cert(renewed)
    request = RemotingCommand.request(105, {"topic": "x"}, opaque=9, version=479).encode()
    with running_server("-D", "tls.test.mode.enable=false", "-D", f"tls.server.certPath={cert}",
                        "-D", f"tls.server.keyPath={key}") as server:
        old = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)))
        first = _served_serial(old)
        assert first == _serial_of(cert)
        os.replace(new_cert, cert)
        os.replace(new_key, key)
        server.wait_for_log(r"The TLS certificate and key changed")
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port))) as fresh:
            assert _served_serial(fresh) == _serial_of(cert) != first
        with old:
            old.sendall(request)
            assert b'"opaque":9' in old.recv(65536)     # the old connection still works


def test_tls_starts_once_missing_files_appear(tmp_path):
    from test_transport_tls import _cert, _serial_of
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    live, ready = tmp_path / "live", tmp_path / "ready"
    live.mkdir()
    ready.mkdir()
    cert, key = live / "server.pem", live / "server.key"
    with running_server("-D", "tls.test.mode.enable=false", "-D", f"tls.server.certPath={cert}",
                        "-D", f"tls.server.keyPath={key}") as server:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port),
                                                          timeout=PATIENCE)):
                pass
        new_cert, new_key = _cert(ready)
        os.replace(new_key, key)
        os.replace(new_cert, cert)
        server.wait_for_log(r"The TLS certificate and key changed")
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port))) as tls:
            assert _served_serial(tls) == _serial_of(cert)


def test_a_fifo_or_device_at_the_certificate_path_is_refused_and_sigterm_still_stops(tmp_path):
    """Issue 31 point 9: a FIFO put at the certificate path hung the server past SIGTERM (the
    watcher opened it on the reactor and waited for a writer)."""
    from test_transport_tls import _cert
    cert, key = _cert(tmp_path)
    request = RemotingCommand.request(105, {"topic": "x"}, opaque=9, version=479).encode()
    with running_server("-D", "tls.test.mode.enable=false", "-D", f"tls.server.certPath={cert}",
                        "-D", f"tls.server.keyPath={key}") as server:
        os.unlink(cert)
        os.mkfifo(cert)
        server.wait_for_log(r"certPath \S+ is not a regular file", timeout=10)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as plain:
            plain.sendall(request)
            assert b'"opaque":9' in plain.recv(65536)     # still serving
        os.unlink(cert)
        os.symlink("/dev/zero", cert)
        for _ in range(100):
            if server.log_text().count("is not a regular file") == 2:
                break
            time.sleep(0.1)
        assert server.log_text().count("is not a regular file") == 2
        assert server.stop(timeout=20) in (0, -15)
    assert "Server Shut Down." in server.log_text()


def test_sigterm_flushes_kv_and_exits_cleanly():
    with running_server() as server:
        admin = RemotingClient(server.port)
        assert admin.call(100, {"namespace": "NS", "key": "k", "value": "v"}).code == 0
        code = server.stop()
        with open(server.kv_path) as f:
            assert json.load(f)["configTable"] == {"NS": {"k": "v"}}
    assert code in (0, -15)
    assert "Server Shut Down." in server.log_text()


def test_config_file_and_print_config_item(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=0\nbindAddress=127.0.0.1\nserverChannelMaxIdleTimeSeconds=77\n"
                    "someUnknownKey=kept\n")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HOME=str(tmp_path))
    printed = subprocess.run(server_command("-c", str(conf), "-p", listen=None), env=env,
                             cwd=tmp_path, capture_output=True, timeout=60)
    out = printed.stdout.decode()
    assert printed.returncode == 0, printed.stderr.decode()
    assert "serverChannelMaxIdleTimeSeconds=77" in out
    assert "listenPort=0" in out
    with running_server("-c", str(conf), listen=None) as server:
        assert route_code(server.port) == 17
        admin = RemotingClient(server.port)
        answer = admin.call(319)
        assert b"someUnknownKey=kept" in answer.body
        assert b"serverChannelMaxIdleTimeSeconds=77" in answer.body


def test_console_script_module_boots(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HOME=str(tmp_path), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "rocketpy.service.cli",
                             "--listen=tcp:0:interface=127.0.0.1", f"--kvConfigPath={tmp_path}/kv.json"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        port = None
        for raw in proc.stdout:                  # until the boot line, or the process's end
            line = raw.decode()
            if "The Name Server boot success" in line:
                port = int(line.rsplit(":", 1)[1])
                break
        assert port and route_code(port, "x") == 17
    finally:
        proc.terminate()
        proc.wait(PATIENCE)


def test_acting_master_notification_reaches_the_brokers_own_port():
    """notifyMinBrokerIdChanged: the NameServer connects to the slave's brokerAddr (a listener
    here, standing in for the broker) and sends NOTIFY_MIN_BROKER_ID_CHANGE oneway."""
    from rocketpy.remoting import decode_frame
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(PATIENCE)
    slave_addr = f"127.0.0.1:{listener.getsockname()[1]}"
    with running_server("-D", "notifyMinBrokerIdChanged=true", "-D", "supportActingMaster=true") as server:
        slave = RemotingClient(server.port)
        register(slave, addr=slave_addr, brokerId="1", enableActingMaster="true")
        master = RemotingClient(server.port)
        register(master, addr="127.0.0.1:10911", brokerId="0", enableActingMaster="true")
        conn, _ = listener.accept()
        conn.settimeout(PATIENCE)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = conn.recv(65536)
            assert chunk, "the NameServer closed the notification channel"
            data += chunk
        note = decode_frame(data[:4 + int.from_bytes(data[:4], "big")])
        assert note.code == 905 and note.is_oneway
        assert note.ext_fields["minBrokerId"] == "0"
        assert note.ext_fields["minBrokerAddr"] == "127.0.0.1:10911"
        conn.close()
    listener.close()

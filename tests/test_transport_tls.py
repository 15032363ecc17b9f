"""Transport: TLS settings and the server's OpenSSL context, handshaking in memory (no sockets).

The per-connection first-byte decision is tested in test_transport_protocol.py and over real
sockets in test_e2e_server.py; here: Java's property names and defaults, test mode's throw-away
certificate, certificate files (with an encrypted key), and client-certificate policies.
"""
import datetime

import pytest
from twisted.internet.interfaces import IOpenSSLContextFactory
from zope.interface.verify import verifyObject

from rocketpy.transport.tls import (TlsMode, TlsSettings, TlsUnavailableError,
                                    build_context_factory, watched_paths)

from OpenSSL import SSL  # twisted[tls]: an install dependency, so a missing one fails


def _cert(tmp_path, name="server", password=None):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2)).sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8, encryption))
    return str(cert_path), str(key_path)


def _handshake(server_ctx, client_cert=None):
    """Run a TLS handshake between ``server_ctx`` and a client in memory; True if it succeeds."""
    client_ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    if client_cert:
        client_ctx.use_certificate_file(client_cert[0])
        client_ctx.use_privatekey_file(client_cert[1])
    server = SSL.Connection(server_ctx, None)
    server.set_accept_state()
    client = SSL.Connection(client_ctx, None)
    client.set_connect_state()
    for _ in range(20):
        for conn in (client, server):
            try:
                conn.do_handshake()
            except SSL.WantReadError:
                pass
            except SSL.Error:
                return False
        for a, b in ((client, server), (server, client)):
            try:
                b.bio_write(a.bio_read(65536))
            except SSL.WantReadError:
                pass
        try:  # TLS 1.3 servers verify the client certificate after the client thinks it is done
            client.send(b"ping")
            server.bio_write(client.bio_read(65536))
            return server.recv(4) == b"ping"
        except (SSL.WantReadError, SSL.Error):
            continue
    return False


def test_settings_from_java_properties():
    s = TlsSettings.from_properties({
        "tls.server.mode": "enforcing", "tls.test.mode.enable": "false",
        "tls.server.certPath": "/c.pem", "tls.server.keyPath": "/k.pem",
        "tls.server.keyPassword": "pw", "tls.server.need.client.auth": "require",
        "tls.server.authClient": "TRUE", "tls.server.trustCertPath": "/ca.pem"})
    assert s.mode is TlsMode.ENFORCING
    assert (s.test_mode, s.cert_path, s.key_path, s.key_password) == (False, "/c.pem", "/k.pem", "pw")
    assert (s.need_client_auth, s.auth_client, s.trust_cert_path) == ("require", True, "/ca.pem")


def test_java_defaults():
    s = TlsSettings.from_properties({})
    assert s.mode is TlsMode.PERMISSIVE and s.test_mode and s.need_client_auth == "none"
    assert s.config_file == "/etc/rocketmq/tls.properties"


def test_test_mode_self_signed_handshakes():
    factory = build_context_factory(TlsSettings())
    verifyObject(IOpenSSLContextFactory, factory)
    assert _handshake(factory.getContext())


def test_certificate_files_with_encrypted_key(tmp_path):
    cert, key = _cert(tmp_path, password="secret")
    settings = TlsSettings(test_mode=False, cert_path=cert, key_path=key, key_password="secret")
    assert _handshake(build_context_factory(settings).getContext())


def test_wrong_key_password_is_refused(tmp_path):
    cert, key = _cert(tmp_path, password="secret")
    with pytest.raises(TlsUnavailableError):
        build_context_factory(TlsSettings(test_mode=False, cert_path=cert, key_path=key,
                                          key_password="nope"))


def test_missing_files_are_refused():
    with pytest.raises(TlsUnavailableError):
        build_context_factory(TlsSettings(test_mode=False))


def test_require_client_certificate(tmp_path):
    cert, key = _cert(tmp_path)
    client = _cert(tmp_path, name="client")
    settings = TlsSettings(test_mode=False, cert_path=cert, key_path=key, need_client_auth="require")
    ctx = build_context_factory(settings).getContext()
    assert not _handshake(ctx)
    assert _handshake(build_context_factory(settings).getContext(), client_cert=client)


def test_auth_client_verifies_against_trust_store(tmp_path):
    cert, key = _cert(tmp_path)
    trusted = _cert(tmp_path, name="trusted")
    stranger = _cert(tmp_path, name="stranger")
    settings = TlsSettings(test_mode=False, cert_path=cert, key_path=key, need_client_auth="require",
                           auth_client=True, trust_cert_path=trusted[0])
    assert _handshake(build_context_factory(settings).getContext(), client_cert=trusted)
    assert not _handshake(build_context_factory(settings).getContext(), client_cert=stranger)


def _connected(server_ctx):
    """A client and a server connection, handshaken in memory."""
    server = SSL.Connection(server_ctx, None)
    server.set_accept_state()
    client = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), None)
    client.set_connect_state()
    for _ in range(20):
        for conn in (client, server):
            try:
                conn.do_handshake()
            except SSL.WantReadError:
                pass
        for a, b in ((client, server), (server, client)):
            try:
                b.bio_write(a.bio_read(65536))
            except SSL.WantReadError:
                pass
    return client, server


def _echo(client, server, data):
    client.send(data)
    server.bio_write(client.bio_read(65536))
    return server.recv(1024)


def _serial(client):
    return client.get_peer_certificate().get_serial_number()


def _serial_of(cert_path):
    from cryptography import x509
    with open(cert_path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read()).serial_number


def test_certificate_reload_on_change(tmp_path):
    # TlsFileWatch polls the files on the reactor's clock; a change gives new connections the
    # new certificate, established ones keep working, a bad file is logged and the old kept
    from twisted.internet.task import Clock
    from twisted.logger import globalLogPublisher
    from rocketpy.service.tlswatch import TlsFileWatch, WATCH_INTERVAL

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cert, key = _cert(first)
    new_cert, new_key = _cert(second)
    settings = TlsSettings.from_properties({"tls.test.mode.enable": "false",
                                            "tls.server.certPath": cert,
                                            "tls.server.keyPath": key})
    installed = [build_context_factory(settings)]
    clock = Clock()
    watch = TlsFileWatch(settings, installed.append, clock)
    current = lambda: installed[-1].getContext()       # noqa: E731  (what a new connection gets)
    errors = []
    observer = lambda event: errors.append(event) if event.get("log_level").name == "error" else None
    globalLogPublisher.addObserver(observer)
    try:
        watch.startService()
        old_client, old_server = _connected(current())
        assert _serial(old_client) == _serial_of(cert)
        clock.advance(WATCH_INTERVAL)
        assert watch.reloads == 0            # nothing changed, nothing read

        with open(new_cert, "rb") as f:       # the certificate first: it does not match the key
            open(cert, "wb").write(f.read())
        clock.advance(WATCH_INTERVAL)
        assert (watch.reloads, watch.failures) == (0, 1)
        assert _serial(_connected(current())[0]) != _serial_of(new_cert)
        with open(new_key, "rb") as f:        # then the key: both in place, reloaded
            open(key, "wb").write(f.read())
        clock.advance(WATCH_INTERVAL)
        assert watch.reloads == 1
        assert _serial(_connected(current())[0]) == _serial_of(new_cert)
        assert _echo(old_client, old_server, b"still here") == b"still here"

        open(cert, "wb").write(b"-----BEGIN CERTIFICATE-----\ngarbage\n")   # a bad new file
        clock.advance(WATCH_INTERVAL)
        assert (watch.reloads, watch.failures) == (1, 2)
        assert _serial(_connected(current())[0]) == _serial_of(new_cert)
        assert len(errors) == 2 and "keeping the previous certificate" in errors[-1]["log_format"]
        clock.advance(WATCH_INTERVAL)
        assert watch.failures == 2           # logged once per change, not per poll
    finally:
        globalLogPublisher.removeObserver(observer)
        watch.stopService()


def test_files_that_did_not_load_at_start_are_watched(tmp_path):
    from twisted.internet.task import Clock
    from rocketpy.service.tlswatch import TlsFileWatch, WATCH_INTERVAL
    settings = TlsSettings.from_properties({"tls.test.mode.enable": "false",
                                            "tls.server.certPath": str(tmp_path / "server.pem"),
                                            "tls.server.keyPath": str(tmp_path / "server.key")})
    with pytest.raises(TlsUnavailableError):
        build_context_factory(settings)               # nothing there yet: no TLS at start
    installed = []
    clock = Clock()
    watch = TlsFileWatch(settings, installed.append, clock)
    watch.startService()
    try:
        cert, _ = _cert(tmp_path)                     # the files appear
        clock.advance(WATCH_INTERVAL)
        assert len(installed) == 1
        assert _serial(_connected(installed[0].getContext())[0]) == _serial_of(cert)
    finally:
        watch.stopService()


def test_test_mode_watches_no_file():
    assert watched_paths(TlsSettings()) == ()


def test_only_regular_files_under_the_size_bound_are_read(tmp_path):
    """Issue 31 point 9: a FIFO at the certificate path hung the server (open() waits for a
    writer, past SIGTERM) and a link to /dev/zero read 3.5 GB in 10 s; a file over the bound
    was read whole too."""
    import os
    import threading
    from rocketpy.service.tlswatch import TlsFileWatch
    from twisted.internet.task import Clock
    cert, key = _cert(tmp_path)
    settings = TlsSettings.from_properties({"tls.test.mode.enable": "false",
                                            "tls.server.certPath": cert,
                                            "tls.server.keyPath": key})
    big = tmp_path / "big.pem"
    with open(cert, "rb") as f:
        big.write_bytes(f.read() + b"#" * (2 << 20))
    os.replace(big, cert)
    with pytest.raises(TlsUnavailableError, match=r"tls.server.certPath .* is larger than 1048576"):
        build_context_factory(settings)
    os.unlink(cert)
    os.symlink("/dev/zero", cert)
    with pytest.raises(TlsUnavailableError, match=r"tls.server.certPath .* is not a regular file"):
        build_context_factory(settings)
    os.unlink(cert)
    _cert(tmp_path)
    watch = TlsFileWatch(settings, lambda factory: None, Clock())
    os.unlink(cert)
    os.mkfifo(cert)
    poll = threading.Thread(target=watch.run_once, daemon=True)
    poll.start()
    poll.join(30)
    hung = poll.is_alive()
    if hung:                       # let the old code's open() return, so the thread ends
        os.close(os.open(cert, os.O_WRONLY | os.O_NONBLOCK))
    assert not hung
    assert watch.failures == 1


def test_the_watch_builds_through_run_one_build_at_a_time(tmp_path):
    """The files are read where ``run`` says (the reactor's thread pool in the server), and a
    poll while a build is under way reads nothing."""
    from twisted.internet.defer import Deferred
    from twisted.internet.task import Clock
    from rocketpy.service.tlswatch import TlsFileWatch, WATCH_INTERVAL
    cert, key = _cert(tmp_path)
    settings = TlsSettings.from_properties({"tls.test.mode.enable": "false",
                                            "tls.server.certPath": cert,
                                            "tls.server.keyPath": key})
    builds, installed, clock = [], [], Clock()
    watch = TlsFileWatch(settings, installed.append, clock,
                         run=lambda f, *a: builds.append((f, a, Deferred())) or builds[-1][2])
    watch.startService()
    try:
        _cert(tmp_path)                              # new files
        clock.advance(WATCH_INTERVAL)
        assert len(builds) == 1 and installed == []  # handed to run, not built here
        _cert(tmp_path)
        clock.advance(WATCH_INTERVAL)
        assert len(builds) == 1                      # one at a time
        function, args, d = builds[0]
        d.callback(function(*args))
        assert len(installed) == 1 and watch.reloads == 1
        clock.advance(WATCH_INTERVAL)
        assert len(builds) == 2                      # the change seen meanwhile
    finally:
        watch.stopService()

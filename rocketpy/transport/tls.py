"""Transport layer: TLS settings and the server's OpenSSL context (Java ``TlsSystemConfig``,
``TlsHelper.buildSslContext(false)``, ``TlsMode``).

``tls.server.mode`` is ``disabled`` (a client starting a handshake is disconnected),
``permissive`` (the default, and any unknown spelling, as ``TlsMode.parse``: a first byte 0x16
starts TLS) or ``enforcing`` (plain clients are disconnected); the protocol decides per
connection. This module turns the ``tls.*`` properties into a context: with
``tls.test.mode.enable`` (default ``true``, as Java) a throw-away self-signed certificate, client
certificates not verified; otherwise ``tls.server.certPath``/``keyPath``/``keyPassword`` (PEM,
PKCS#8 or traditional), ``tls.server.need.client.auth`` and ``tls.server.authClient`` +
``trustCertPath``.

A new context is built when the certificate, key or trust files change
(:class:`~rocketpy.service.tlswatch.TlsFileWatch`, as Java's ``FileWatchService``): new
connections get it, established ones keep theirs, and a new file that does not load is logged
and the old context kept. Every file is read by :func:`read_tls_file`: a regular file of at most
:data:`MAX_TLS_FILE` bytes, opened without blocking and checked before a byte is read (a FIFO
at the path hung the server past SIGTERM; a link to ``/dev/zero`` read 3.5 GB in 10 s).

pyOpenSSL is optional (``twisted[tls]``): without it ``build_context_factory`` raises
:class:`TlsUnavailableError`, and a TLS handshake is answered as Java does when its
``sslContext`` is null: the connection is closed and why is logged."""
import datetime
import enum
import os
import stat
from dataclasses import dataclass

from twisted.internet.interfaces import IOpenSSLContextFactory
from zope.interface import implementer

__all__ = ["TlsMode", "TlsSettings", "TlsUnavailableError", "build_context_factory",
           "ServerContextFactory", "watched_paths", "read_tls_file", "HANDSHAKE_MAGIC", "TLS_KEYS",
           "MAX_TLS_FILE"]

#: The largest certificate, key or trust file read (a chain or a CA bundle is tens of KB).
MAX_TLS_FILE = 1024 * 1024

#: First byte of a TLS record carrying a handshake (Java ``TlsModeHandler.HANDSHAKE_MAGIC_CODE``).
HANDSHAKE_MAGIC = 0x16

#: The ``tls.*`` keys the server reads (Java ``TlsSystemConfig``; client keys are not needed).
TLS_KEYS = ("tls.server.mode", "tls.config.file", "tls.test.mode.enable",
            "tls.server.need.client.auth", "tls.server.keyPath", "tls.server.keyPassword",
            "tls.server.certPath", "tls.server.authClient", "tls.server.trustCertPath")


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, name):
        """Java ``TlsMode.parse``: exact lower-case names, anything else is PERMISSIVE."""
        for mode in cls:
            if mode.value == name:
                return mode
        return cls.PERMISSIVE


class TlsUnavailableError(RuntimeError):
    """No OpenSSL context can be built (pyOpenSSL missing, unreadable certificate or key)."""


def _bool(text, default):
    if text is None:
        return default
    return text.strip().lower() == "true"  # Java Boolean.parseBoolean


@dataclass(frozen=True)
class TlsSettings:
    mode: TlsMode = TlsMode.PERMISSIVE
    test_mode: bool = True
    need_client_auth: str = "none"
    cert_path: "str | None" = None
    key_path: "str | None" = None
    key_password: "str | None" = None
    auth_client: bool = False
    trust_cert_path: "str | None" = None
    config_file: str = "/etc/rocketmq/tls.properties"

    @classmethod
    def from_properties(cls, props):
        """Settings from a ``{"tls.server.mode": ...}`` mapping (missing keys keep Java defaults)."""
        get = props.get
        return cls(
            mode=TlsMode.parse(get("tls.server.mode", "permissive")),
            test_mode=_bool(get("tls.test.mode.enable"), True),
            need_client_auth=get("tls.server.need.client.auth", "none") or "none",
            cert_path=get("tls.server.certPath") or None,
            key_path=get("tls.server.keyPath") or None,
            key_password=get("tls.server.keyPassword") or None,
            auth_client=_bool(get("tls.server.authClient"), False),
            trust_cert_path=get("tls.server.trustCertPath") or None,
            config_file=get("tls.config.file", "/etc/rocketmq/tls.properties"),
        )


def _self_signed():
    """A fresh self-signed certificate and key, as Netty's ``SelfSignedCertificate``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .sign(key, hashes.SHA256()))
    return cert, key


def _load_files(settings):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    if not settings.cert_path or not settings.key_path:
        raise TlsUnavailableError("tls.server.certPath and tls.server.keyPath are required "
                                  "when tls.test.mode.enable is false")
    cert_data = read_tls_file(settings.cert_path, "tls.server.certPath")
    key_data = read_tls_file(settings.key_path, "tls.server.keyPath")
    try:
        cert = x509.load_pem_x509_certificate(cert_data)
        password = settings.key_password.encode() if settings.key_password else None
        key = load_pem_private_key(key_data, password)
    except (ValueError, TypeError) as exc:
        raise TlsUnavailableError(f"cannot load the TLS certificate or key: {exc}") from exc
    return cert, key


def read_tls_file(path, key):
    """The bytes of ``path`` (the value of setting ``key``) when it is a regular file of at most
    :data:`MAX_TLS_FILE` bytes; TlsUnavailableError naming the problem otherwise. It is opened
    non-blocking (opening a FIFO waits for a writer) and its type and size are checked on the
    descriptor before anything is read (a device is endless); at most one byte more than the
    bound is read, should the file grow meanwhile."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise TlsUnavailableError(f"cannot read {key} {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TlsUnavailableError(f"{key} {path} is not a regular file")
        chunks, size = [], 0
        if info.st_size <= MAX_TLS_FILE:
            while size <= MAX_TLS_FILE:
                chunk = os.read(fd, MAX_TLS_FILE + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        if info.st_size > MAX_TLS_FILE or size > MAX_TLS_FILE:
            raise TlsUnavailableError(f"{key} {path} is larger than {MAX_TLS_FILE} bytes")
    except OSError as exc:
        raise TlsUnavailableError(f"cannot read {key} {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    return b"".join(chunks)


def _trust(ctx, path):
    """Add the certificates of the PEM bundle ``path`` to ``ctx``'s store (what
    ``load_verify_locations`` does, from bytes read by :func:`read_tls_file`)."""
    from cryptography import x509
    from OpenSSL import crypto
    try:
        certs = x509.load_pem_x509_certificates(read_tls_file(path, "tls.server.trustCertPath"))
    except ValueError as exc:
        raise TlsUnavailableError(f"cannot load tls.server.trustCertPath: {exc}") from exc
    store = ctx.get_cert_store()
    for cert in certs:
        try:
            store.add_cert(cert)
        except TypeError:      # pyOpenSSL before 24.3 takes its own objects only
            store.add_cert(crypto.X509.from_cryptography(cert))


@implementer(IOpenSSLContextFactory)
class ServerContextFactory:
    """The context for ``startTLS`` (Twisted's ``IOpenSSLContextFactory``)."""

    def __init__(self, context):
        self._context = context

    def getContext(self):
        return self._context


def watched_paths(settings):
    """The files a context is built from (none in test mode: its certificate is made up)."""
    if settings.test_mode:
        return ()
    paths = [settings.cert_path, settings.key_path]
    if settings.auth_client and settings.trust_cert_path:
        paths.append(settings.trust_cert_path)
    return tuple(p for p in paths if p)


def build_context_factory(settings):
    """A :class:`ServerContextFactory` for ``ITLSTransport.startTLS``, built from ``settings``
    (the files as they are now); TlsUnavailableError when they do not load or do not match."""
    return ServerContextFactory(_build_context(settings))


def _build_context(settings):
    try:
        from OpenSSL import SSL, crypto
    except ImportError as exc:
        raise TlsUnavailableError("TLS needs pyOpenSSL (pip install 'twisted[tls]')") from exc
    cert, key = _self_signed() if settings.test_mode else _load_files(settings)
    ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    try:
        try:  # pyOpenSSL >= 24.3 takes cryptography objects (and deprecates its own)
            ctx.use_certificate(cert)
            ctx.use_privatekey(key)
        except TypeError:
            ctx.use_certificate(crypto.X509.from_cryptography(cert))
            ctx.use_privatekey(crypto.PKey.from_cryptography_key(key))
        ctx.check_privatekey()
    except SSL.Error as exc:
        raise TlsUnavailableError(f"the TLS key does not match the certificate: {exc}") from exc
    auth = "optional" if settings.test_mode else (settings.need_client_auth or "none").strip().lower()
    verify_certs = settings.auth_client and not settings.test_mode
    if verify_certs and settings.trust_cert_path:
        _trust(ctx, settings.trust_cert_path)

    def _verify(conn, x509, errno, depth, ok):
        # Java uses InsecureTrustManagerFactory unless tls.server.authClient is true.
        return bool(ok) if verify_certs else True

    if auth == "require":
        ctx.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, _verify)
    elif auth == "optional":
        ctx.set_verify(SSL.VERIFY_PEER, _verify)
    return ctx

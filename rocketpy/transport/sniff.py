"""Transport layer: the first-byte TLS sniffer (Java ``TlsModeHandler``): a connection's first
byte decides whether it is TLS (0x16 starts a handshake) or plain remoting, and
``tls.server.mode`` whether that is allowed.

The verdict is pure (:func:`sniff`); :func:`start_tls` hands the connection over to Twisted's
TLS layer (``ITLSTransport.startTLS`` puts a ``TLSMemoryBIOProtocol`` between the socket and
the remoting protocol) and gives it the bytes already read, so the handshake goes on there and
the protocol receives decrypted bytes from then on."""
from dataclasses import dataclass

from .tls import HANDSHAKE_MAGIC, TlsMode

__all__ = ["PLAIN", "TLS", "Refusal", "sniff", "start_tls"]

#: Verdicts: serve the bytes as plain remoting / start TLS with them.
PLAIN = "plain"
TLS = "tls"


@dataclass(frozen=True)
class Refusal:
    """The connection is closed: ``reason`` for the ``connection.refused`` event, ``message``
    (with ``{peer}``) as Java logs it."""

    reason: str
    message: str


TLS_DISABLED = Refusal("tls disabled", "Clients intend to establish an SSL connection while this "
                       "server is running in SSL disabled mode ({peer})")
NO_CONTEXT = Refusal("no tls context", "Trying to establish an SSL connection but sslContext is "
                     "null ({peer})")
TLS_ENFORCING = Refusal("tls enforcing", "Clients intend to establish an insecure connection "
                        "while this server is running in SSL enforcing mode ({peer})")


def sniff(first_byte, mode, has_context):
    """:data:`PLAIN`, :data:`TLS` or a :class:`Refusal` for a connection whose first byte is
    ``first_byte``; ``has_context``: a TLS context exists and the transport can start TLS."""
    if first_byte == HANDSHAKE_MAGIC:
        if mode is TlsMode.DISABLED:
            return TLS_DISABLED
        return TLS if has_context else NO_CONTEXT
    if mode is TlsMode.ENFORCING:
        return TLS_ENFORCING
    return PLAIN


def start_tls(transport, context_factory, data):
    """Start TLS on ``transport`` and feed ``data`` (the handshake's first bytes, already read)
    to the TLS layer now between the socket and the protocol."""
    transport.startTLS(context_factory)
    transport.protocol.dataReceived(data)

"""Transport layer: a server connection's life written once, as one transition table (Netty's
channel goes active, may have its input shut down, then is closed and becomes inactive), and
"paused" as a set of reasons, so reading resumes exactly when the set is empty.

Pure bookkeeping (no Twisted): :class:`~rocketpy.transport.protocol.RemotingServerProtocol`
fires the events and acts on what they return.

States:

* ``sniffing``: connected, the first byte not seen (it decides TLS or plain, Java's
  ``TlsModeHandler``);
* ``open``: serving frames (plain, or decrypted by the TLS layer);
* ``draining``: the peer shut its sending side; what it sent is answered, then we close;
* ``closing``: we closed (answers are flushed, the peer is reset after a grace time);
* ``closed``: the transport is gone (``connectionLost``, or ``stopProducing``).

Events: ``plain`` / ``tls`` (the sniffer's verdict), ``read_closed`` (half-close), ``close``
(ours: a refusal, a bad frame, a timeout, shutdown), ``lost`` (the transport's)."""

__all__ = ["SNIFFING", "OPEN", "DRAINING", "CLOSING", "CLOSED", "STATES", "EVENTS",
           "TRANSITIONS", "ConnectionState", "PauseReasons", "FLOW", "OVERLOAD", "DECODE",
           "PAUSE_REASONS"]

SNIFFING, OPEN, DRAINING, CLOSING, CLOSED = "sniffing", "open", "draining", "closing", "closed"
STATES = (SNIFFING, OPEN, DRAINING, CLOSING, CLOSED)
EVENTS = ("plain", "tls", "read_closed", "close", "lost")

#: ``(state, event) -> state``, for every pair: a pair that changes nothing maps to its own
#: state (a second close, a verdict after the peer went, bytes after we closed).
TRANSITIONS = {
    (SNIFFING, "plain"): OPEN,
    (SNIFFING, "tls"): OPEN,             # decrypted bytes follow, through the TLS layer
    (SNIFFING, "read_closed"): DRAINING,  # nothing sent: nothing to answer
    (SNIFFING, "close"): CLOSING,
    (SNIFFING, "lost"): CLOSED,
    (OPEN, "plain"): OPEN,
    (OPEN, "tls"): OPEN,
    (OPEN, "read_closed"): DRAINING,
    (OPEN, "close"): CLOSING,
    (OPEN, "lost"): CLOSED,
    (DRAINING, "plain"): DRAINING,
    (DRAINING, "tls"): DRAINING,
    (DRAINING, "read_closed"): DRAINING,
    (DRAINING, "close"): CLOSING,
    (DRAINING, "lost"): CLOSED,
    (CLOSING, "plain"): CLOSING,
    (CLOSING, "tls"): CLOSING,
    (CLOSING, "read_closed"): CLOSING,
    (CLOSING, "close"): CLOSING,
    (CLOSING, "lost"): CLOSED,
    (CLOSED, "plain"): CLOSED,
    (CLOSED, "tls"): CLOSED,
    (CLOSED, "read_closed"): CLOSED,
    (CLOSED, "close"): CLOSED,
    (CLOSED, "lost"): CLOSED,
}


class ConnectionState:
    """One connection's place in :data:`TRANSITIONS`."""

    __slots__ = ("state", "closing")

    def __init__(self, state=SNIFFING):
        self.state = state
        #: we closed, or the transport is gone: nothing more is read, served or written (a
        #: plain attribute: the serving loop reads it per frame)
        self.closing = state in (CLOSING, CLOSED)

    def fire(self, event):
        """Apply ``event``; True when it changed the state (the caller acts only then)."""
        new = TRANSITIONS[self.state, event]
        if new == self.state:
            return False
        self.state = new
        self.closing = new in (CLOSING, CLOSED)
        return True


#: The reasons a connection is not read (Java turns ``autoRead`` off for the first).
FLOW = "write back-pressure"   # the peer does not read its answers (high-water mark)
OVERLOAD = "overload"          # this turn's request budget is spent (limits.LoadGovernor)
DECODE = "decode pending"      # a request's work is on a pool; later frames wait for it
PAUSE_REASONS = (FLOW, OVERLOAD, DECODE)


class PauseReasons(set):
    """Why reading is paused: a set (empty: reading), so a reason is added and cleared on its
    own and reading resumes when (and only when) the last one is cleared. Changed only through
    :meth:`pause` and :meth:`resume`, which say when the transport must follow."""

    __slots__ = ()

    def pause(self, reason):
        """Add ``reason``; True when it is the first (the caller stops reading)."""
        first = not self
        self.add(reason)
        return first

    def resume(self, reason):
        """Clear ``reason``; True when it was the last one (the caller reads again)."""
        if reason not in self:
            return False
        self.discard(reason)
        return not self

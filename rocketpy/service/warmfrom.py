"""Service layer: ``--warm-from URL``, a peer rocketpy NameServer's route tables at start (its
web endpoint's ``/api/route-snapshot``, :mod:`rocketpy.web.health`), for a NameServer that has
no usable snapshot of its own (a new host, a lost disk).

The answer is read with a bound on its size (what the route bounds allow, checked against its
``Content-Length`` before the body and counted as it comes) and a deadline; it is then read as a
snapshot file is (:mod:`rocketpy.service.routesnapshot`): a peer is a stranger as far as the
format's checks go."""
from urllib.parse import urlsplit

from twisted.internet import defer, protocol
from twisted.web.client import Agent, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import UNKNOWN_LENGTH

from ..namesrv.routefile import SnapshotRefused

__all__ = ["fetch_snapshot", "snapshot_url", "FETCH_TIMEOUT"]

#: seconds the peer has to send its whole snapshot
FETCH_TIMEOUT = 60.0


def snapshot_url(peer):
    """``http://host:port`` (or a bare ``host:port``) of a peer's web endpoint -> the URL of its
    snapshot; ValueError for anything else."""
    url = peer.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise ValueError(f"not a web endpoint URL (http://host:port): {peer!r}")
    parts.port   # ValueError for a bad port
    return f"{url.rstrip('/')}/api/route-snapshot"


class _Body(protocol.Protocol):
    def __init__(self, finished, max_bytes):
        self.finished = finished
        self.max_bytes = max_bytes
        self.chunks = []
        self.size = 0

    def dataReceived(self, data):
        self.size += len(data)
        if self.max_bytes is not None and self.size > self.max_bytes:
            self.transport.stopProducing()
            if not self.finished.called:
                self.finished.errback(SnapshotRefused(
                    f"over the bounds: the peer's snapshot passed {self.max_bytes} bytes"))
            return
        self.chunks.append(data)

    def connectionLost(self, reason):
        if self.finished.called:
            return
        if reason.check(ResponseDone, PotentialDataLoss):
            self.finished.callback(b"".join(self.chunks))
        else:
            self.finished.errback(SnapshotRefused(
                f"the peer's snapshot was cut short: {reason.getErrorMessage()}"))


def fetch_snapshot(reactor, url, max_bytes, timeout=FETCH_TIMEOUT, agent=None):
    """A Deferred of the snapshot stream at ``url``; fails with :exc:`SnapshotRefused` (one
    line) when the peer cannot be asked, answers otherwise than 200, or passes ``max_bytes``."""
    agent = agent or Agent(reactor, connectTimeout=min(timeout, 10.0))
    finished = defer.Deferred()

    def answered(response):
        if response.code != 200:
            raise SnapshotRefused(f"the peer answered HTTP {response.code} at {url}")
        if (max_bytes is not None and response.length is not UNKNOWN_LENGTH
                and response.length > max_bytes):
            raise SnapshotRefused(f"over the bounds: the peer's snapshot has {response.length} "
                                  f"bytes, over {max_bytes}")
        response.deliverBody(_Body(finished, max_bytes))
        return finished

    def unreachable(failure):
        if failure.check(SnapshotRefused):
            return failure
        raise SnapshotRefused(f"cannot ask the peer at {url}: {failure.getErrorMessage()}")

    d = agent.request(b"GET", url.encode("ascii"), Headers({b"user-agent": [b"rocketpy"]}))
    d.addCallback(answered)
    d.addErrback(unreachable)
    d.addTimeout(timeout, reactor, onTimeoutCancel=lambda result, t: _timed_out(url, t))
    return d


def _timed_out(url, seconds):
    raise SnapshotRefused(f"the peer at {url} sent no whole snapshot within {seconds:g} s")
